/* AVX2 forms of the convolution's data movement (conv_avx2.h). They mirror conv.c's AVX-512
 * kernels with 8-float pieces: the masks of each tap's valid lanes are made once, masked loads
 * (_mm256_maskload_ps: lanes outside the mask are neither read nor faulted) give the zero
 * padding, and stores are full width. On a Zen 3 core without AVX-512 the portable loops' short
 * copies were a third of cnn1's training step (perf: memcpy per row of 8-24 floats, and a
 * scalar add per element in col2im). */
#include "layers/conv_avx2.h"
#include "layers/kernels.h"

#ifdef DT_KERNELS_AVX512 /* x86 with GCC or clang: the same condition as the AVX-512 kernels */

/* Lanes l of an 8-lane piece starting at index base with lo <= base + l < hi, as a mask. */
DT_AVX2 static inline __m256i lanes(int lo, int hi, int base) {
    const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(base));
    return _mm256_and_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx));
}

/* A masked load, its lanes checked under DTRAIN_SANITIZE (kernels.h: GCC's ASan does not see
 * into masked intrinsics) */
DT_AVX2 static inline __m256 load(const float *p, __m256i m) {
    dt_lanes_check8(p, _mm256_movemask_ps(_mm256_castsi256_ps(m)));
    return _mm256_maskload_ps(p, m);
}

DT_AVX2 void dt_im2col_s1_avx2(const float *x, int c, int h, int w, int k, int p, int oh, int ow, float *col,
                               size_t ld) {
    const int nv = (ow + 7) / 8;
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *r = col + (size_t)((ci * k + ki) * k + kj) * ld;
                const float *xc = x + (size_t)ci * h * w;
                int lo, hi;
                dt_conv_valid_cols(w, kj, 1, p, ow, &lo, &hi);
                __m256i m[8];
                for (int v = 0; v < nv; v++) m[v] = lanes(lo, hi, 8 * v);
                for (int oy = 0; oy < oh; oy++, r += ow) {
                    const int iy = oy - p + ki;
                    if (iy < 0 || iy >= h) {
                        for (int v = 0; v < nv; v++) _mm256_storeu_ps(r + 8 * v, _mm256_setzero_ps());
                        continue;
                    }
                    /* lane l of piece v reads x[iy][8v + l + kj - p]: only lanes in [lo, hi) */
                    const float *src = xc + (ptrdiff_t)iy * w + kj - p;
                    for (int v = 0; v < nv; v++) _mm256_storeu_ps(r + 8 * v, load(src + 8 * v, m[v]));
                }
            }
}

DT_AVX2 void dt_col2im_s1_avx2(const float *col, int c, int h, int w, int k, int p, int oh, int ow, size_t ld,
                               float *x, int acc) {
    const int nv = (w + 7) / 8;
    __m256i mw[8], mk[16][8];
    for (int v = 0; v < nv; v++) {
        mw[v] = lanes(0, w, 8 * v);
        /* ox = ix + l + p - kj must lie in [0, ow) */
        for (int kj = 0; kj < k; kj++) mk[kj][v] = _mm256_and_si256(mw[v], lanes(kj - p, kj - p + ow, 8 * v));
    }
    for (int ci = 0; ci < c; ci++)
        for (int iy = 0; iy < h; iy++) {
            float *xr = x + ((size_t)ci * h + iy) * w;
            for (int v = 0; v < nv; v++) {
                const int ix = 8 * v;
                __m256 sum = acc ? load(xr + ix, mw[v]) : _mm256_setzero_ps();
                for (int ki = 0; ki < k; ki++) {
                    const int oy = iy + p - ki;
                    if (oy < 0 || oy >= oh) continue;
                    const float *r = col + (size_t)((ci * k + ki) * k) * ld + (ptrdiff_t)oy * ow + ix + p;
                    for (int kj = 0; kj < k; kj++, r += ld - 1) sum = _mm256_add_ps(sum, load(r, mk[kj][v]));
                }
                dt_lanes_check8(xr + ix, _mm256_movemask_ps(_mm256_castsi256_ps(mw[v])));
                _mm256_maskstore_ps(xr + ix, mw[v], sum);
            }
        }
}

DT_AVX2 void dt_im2row_k8_avx2(const float *x, int c, int h, int w, int k, int s, int p, int oh, int ow,
                               float *rows, size_t ld) {
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            float *r = rows + (size_t)(oy * ow + ox) * ld;
            const int ix0 = ox * s - p;
            /* taps kj with 0 <= ix0 + kj < w, and kj < k: the lanes past k belong to the next piece */
            const int lo = ix0 < 0 ? -ix0 : 0, hi = w - ix0 < k ? w - ix0 : k;
            const __m256i m = lanes(lo, hi, 0);
            for (int ci = 0; ci < c; ci++)
                for (int ki = 0; ki < k; ki++, r += k) {
                    const int iy = oy * s - p + ki;
                    _mm256_storeu_ps(r, iy >= 0 && iy < h ? load(x + ((size_t)ci * h + iy) * w + ix0, m)
                                                          : _mm256_setzero_ps());
                }
        }
}

#endif
