/* Texts as datasets (text.c): what dataset.c and the batch assembly ask of them. The public
 * calls (dt_dataset_set_window, dt_batch_fill_targets) are in dtrain.h. */
#ifndef DT_DATA_TEXT_H
#define DT_DATA_TEXT_H

#include "dtrain.h"

/* 1 for the names of texts: kjv, fortunes, text:FILE (bytes), tokens:FILE (llm.c's format). */
int dt_text_name(const char *name);
/* The training part (train = 1: the first nine tenths) or the held-out tail of a text, its
 * window not yet set (h = 0, n = 0). */
dt_status dt_text_load(const char *name, const char *dir, int train, dt_dataset *out);
/* Every token below the model's vocabulary (d a text; nothing to check otherwise). */
dt_status dt_text_check_vocab(const dt_dataset *d, int vocab);

#endif
