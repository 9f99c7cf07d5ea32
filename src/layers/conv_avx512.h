/* The convolution's data movement (im2col, its adjoint col2im, im2row) in AVX-512: masked
 * 16-float loads give the zero padding, stores are full width. Chosen at run time by conv.c
 * when dt_cpu_avx512() says the CPU runs them (conv_avx2.h: the tier below); the portable loops
 * of conv.c stay the reference. Defined where DT_KERNELS_AVX512 is (kernels.h). */
#ifndef DT_CONV_AVX512_H
#define DT_CONV_AVX512_H

#include <stddef.h>

/* Stride 1, ow <= 64: col[(c*k+ki)*k+kj][oy*ow+ox] = x[c][oy-p+ki][ox-p+kj] (0 outside); a
 * row's last store may run up to 15 floats past it (the caller's row slack, >= 16 floats). */
void dt_im2col_s1_avx512(const float *x, int c, int h, int w, int k, int p, int oh, int ow, float *col, size_t ld);
/* Stride 1, w <= 64, k <= 16: x (+)= the columns summed back (acc 0: overwrites). */
void dt_col2im_s1_avx512(const float *col, int c, int h, int w, int k, int p, int oh, int ow, size_t ld, float *x,
                         int acc);
/* k <= 16: rows[oy*ow+ox][(c*k+ki)*k+kj] = x[c][oy*s-p+ki][ox*s-p+kj] (0 outside); each store
 * up to 16 floats wide, the last of a row past its c*k*k (the caller's row slack). */
void dt_im2row_k16_avx512(const float *x, int c, int h, int w, int k, int s, int p, int oh, int ow, float *rows,
                          size_t ld);

#endif
