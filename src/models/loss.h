/* The training loss: softmax cross-entropy over the logits (loss.c), for the fp32 pass
 * (model.c) and the bf16 pass (precision.c) alike. */
#ifndef DT_MODELS_LOSS_H
#define DT_MODELS_LOSS_H

#include <stdint.h>

/* The mean loss over rows of classes logits each (a classifier's examples, or every position
 * of every example of a language model), targets one class index per row; d(mean loss)/d(logits)
 * into dlogits when it is not NULL; the count of arg-max hits into *correct when it is not NULL. */
float dt_softmax_xent(const float *logits, const uint16_t *targets, int rows, int classes, float *dlogits,
                      int *correct);

#endif
