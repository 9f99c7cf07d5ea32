/* The IDX files of MNIST and Fashion-MNIST (idx.c), for dataset.c's loading by name. */
#ifndef DT_IDX_H
#define DT_IDX_H

#include "dtrain.h"

/* How many of total examples a load of the first max_n (0: all) keeps. */
static inline long long dt_first_count(int max_n, long long total) { return max_n > 0 && max_n < total ? max_n : total; }

/* The first max_n examples (0: all) of an images file and its labels file. */
dt_status dt_idx_load_first(const char *images_path, const char *labels_path, int max_n, dt_dataset *out);

#endif
