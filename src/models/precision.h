/* --precision bf16 (precision.c): a model's forward and backward passes with bf16 activations
 * and bf16-rounded GEMM operands, computed in fp32 staging buffers. */
#ifndef DT_MODELS_PRECISION_H
#define DT_MODELS_PRECISION_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"

/* The staging floats a reserve for batch needs; carving them from m->stage; forward and
 * backward through the staging buffers. */
size_t dt_bf16_stage_floats(const dt_model *m, int batch);
void dt_bf16_stage_carve(dt_model *m, int batch);
void dt_bf16_forward(dt_model *m, int batch, int train);
float dt_bf16_backward(dt_model *m, const uint16_t *targets, int *correct, float *dx_out);

#endif
