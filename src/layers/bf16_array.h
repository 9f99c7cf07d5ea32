/* bfloat16 arrays for --precision bf16 (models/precision.c): core/bf16.h's conversion, eight
 * floats at a time where the CPU has AVX2 (kernels.h), as the layers' kernels do. */
#ifndef DT_LAYERS_BF16_ARRAY_H
#define DT_LAYERS_BF16_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h"

/* dst[i] = bf16(src[i]) */
void dt_bf16_store(uint16_t *dst, const float *src, size_t n);
/* dst[i] = bf16(float(dst[i]) + src[i]): a gradient that a second consumer adds to */
void dt_bf16_store_add(uint16_t *dst, const float *src, size_t n);
/* dst[i] = float(src[i]) */
void dt_bf16_load(float *dst, const uint16_t *src, size_t n);
/* dst[i] = float(bf16(src[i])): what a bf16 operand holds, as a float (dst may be src) */
void dt_bf16_round(float *dst, const float *src, size_t n);

#endif
