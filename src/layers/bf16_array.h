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

/* The bf16 forms of the elementwise layers (layers that take their bf16 activations as stored,
 * ops->bf16_io): each value converted to fp32, computed as the fp32 layer does, rounded once,
 * so the bits are those of the fp32 layer run on fp32 copies (models/precision.c's staging). */
/* dst[i] = bf16(float(a[i]) + float(b[i])) */
void dt_bf16_add(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
/* dst[i] = bf16(max(float(x[i]), 0)) (NaN gives 0, as the fp32 layer) */
void dt_bf16_relu(uint16_t *dst, const uint16_t *x, size_t n);
/* g[i] = y[i] > 0 ? dy[i] : 0; dx[i] = bf16(g[i]), or with acc bf16(float(dx[i]) + g[i]) */
void dt_bf16_relu_grad(uint16_t *dx, const uint16_t *y, const uint16_t *dy, size_t n, int acc);
/* dx[i] = bf16(float(dy[i])), or with acc bf16(float(dx[i]) + float(dy[i])) */
void dt_bf16_pass_grad(uint16_t *dx, const uint16_t *dy, size_t n, int acc);

#endif
