/* exp over arrays, and the kernels built on it: softmax rows (attention, the loss) and GELU.
 * Eight floats at a time with AVX2 and FMA where the CPU has them (kernels.h's run-time choice,
 * which AVX-512 CPUs take too), libm's expf and tanhf otherwise. The AVX2 exp is Cephes' expf
 * (a degree-6 polynomial after a two-constant ln 2 reduction): within 2 ulp of libm's, so the
 * tiers agree to float noise, not bit for bit. libm's scalar exp was the GPT step's largest cost
 * outside the GEMMs (GELU's tanh on 4C values a position, the T x T softmax, the vocabulary's). */
#ifndef DT_LAYERS_VMATH_H
#define DT_LAYERS_VMATH_H

#include <stddef.h>

/* max(x[0..n)), n >= 1; a NaN among them may or may not be the answer (what follows it turns
 * NaN anyway: exp of x - max) */
float dt_vmax(const float *x, size_t n);
/* y[i] = exp(x[i] - shift) (y may be x; NULL: not stored); returns the sum of them. exp of
 * what is below float's smallest normal exponent is 0; a NaN stays NaN. */
float dt_vexp_sum(float *y, const float *x, size_t n, float shift);
/* y[i] *= a */
void dt_vscale(float *y, size_t n, float a);
/* GELU, GPT-2's tanh form: y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void dt_vgelu(float *y, const float *x, size_t n);
/* its gradient: dx = dy GELU'(x), or with acc dx += dy GELU'(x) */
void dt_vgelu_grad(float *dx, const float *x, const float *dy, size_t n, int acc);

#endif
