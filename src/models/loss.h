/* The training loss: softmax cross-entropy over the logits (loss.c), for the fp32 pass
 * (model.c) and the bf16 pass (precision.c) alike. */
#ifndef DT_MODELS_LOSS_H
#define DT_MODELS_LOSS_H

#include <stdint.h>

/* The batch's mean loss; d(mean loss)/d(logits) into dlogits when it is not NULL; the count
 * of arg-max hits into *correct when it is not NULL. */
float dt_softmax_xent(const float *logits, const uint8_t *labels, int batch, int classes, float *dlogits,
                      int *correct);

#endif
