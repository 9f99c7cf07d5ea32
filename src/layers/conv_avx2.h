/* The convolution's data movement (im2col, its adjoint col2im, im2row) for CPUs with AVX2 and
 * no AVX-512 (AMD Zen, older Intel): 8-float masked loads, chosen at run time by conv.c when
 * dt_cpu_avx2() says the CPU runs them and the AVX-512 kernels do not apply. The portable loops
 * of conv.c stay the reference; tests run all three (tests/CMakeLists.txt). */
#ifndef DT_CONV_AVX2_H
#define DT_CONV_AVX2_H

#include <stddef.h>

/* First output column ox whose input column ox*s-p+kj lies in [0, w), and one past the last. */
static inline void dt_conv_valid_cols(int w, int kj, int s, int p, int ow, int *lo, int *hi) {
    int a = p - kj > 0 ? (p - kj + s - 1) / s : 0;
    int b = w - 1 + p - kj >= 0 ? (w - 1 + p - kj) / s + 1 : 0;
    if (b > ow) b = ow;
    if (a > b) a = b;
    *lo = a; *hi = b;
}

/* Stride 1, ow <= 64: col[(c*k+ki)*k+kj][oy*ow+ox] = x[c][oy-p+ki][ox-p+kj] (0 outside). Stores
 * are 8 floats wide: a row's last store may run up to 7 floats past it, into the next row
 * (written after it) or the slack the caller leaves after the last (>= 8 floats). */
void dt_im2col_s1_avx2(const float *x, int c, int h, int w, int k, int p, int oh, int ow, float *col, size_t ld);
/* Stride 1, w <= 64, k <= 16: x (+)= the columns summed back (acc 0: overwrites). */
void dt_col2im_s1_avx2(const float *col, int c, int h, int w, int k, int p, int oh, int ow, size_t ld, float *x,
                       int acc);
/* k <= 8: rows[oy*ow+ox][(c*k+ki)*k+kj] = x[c][oy*s-p+ki][ox*s-p+kj] (0 outside); 8-float stores,
 * the last of a row up to 7 floats past its c*k*k (the caller's row slack). */
void dt_im2row_k8_avx2(const float *x, int c, int h, int w, int k, int s, int p, int oh, int ow, float *rows,
                       size_t ld);

#endif
