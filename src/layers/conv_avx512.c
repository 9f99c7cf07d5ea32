/* AVX-512 forms of the convolution's data movement (conv_avx512.h) */
#include "layers/conv_avx512.h"

#include "layers/conv_avx2.h"
#include "layers/kernels.h"

#ifdef DT_KERNELS_AVX512 /* x86 with GCC or clang */

/* im2col for stride 1 and rows of at most 64: per kernel tap, the masks of the (up to 4)
 * 16-float pieces of an output row are computed once; masked loads give the zero padding and
 * full-width stores are used: the part of a store past ow lands in the next output row
 * (written after this one) or in the row slack of col_ld. Rows of at most 8 (cnn1's conv2:
 * 8x8) take 8-float stores: those rows start at multiples of 32 bytes (col is 64-byte
 * aligned, ld a multiple of 16), so no store crosses a cache line, where a 16-float store at
 * every other row did (measured: conv2's forward 14% faster on this machine). */
DT_AVX512 void dt_im2col_s1_avx512(const float *restrict x, int c, int h, int w, int k, int p, int oh, int ow,
                                   float *restrict col, size_t ld) {
    const int nv = (ow + 15) / 16, narrow = ow <= 8;
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *r = col + (size_t)((ci * k + ki) * k + kj) * ld;
                const float *xc = x + (size_t)ci * h * w;
                int lo, hi;
                dt_conv_valid_cols(w, kj, 1, p, ow, &lo, &hi);
                __mmask16 m[4];
                for (int v = 0; v < nv; v++) m[v] = dt_mask_range(lo, hi, 16 * v);
                for (int oy = 0; oy < oh; oy++, r += ow) {
                    const int iy = oy - p + ki, in = iy >= 0 && iy < h;
                    const float *src = in ? xc + (ptrdiff_t)iy * w + kj - p : NULL;
                    if (narrow)
                        _mm256_storeu_ps(r, in ? (dt_lanes_check(src, m[0]), _mm256_maskz_loadu_ps((__mmask8)m[0], src))
                                               : _mm256_setzero_ps());
                    else
                        for (int v = 0; v < nv; v++)
                            _mm512_storeu_ps(r + 16 * v, in ? dt_maskz_loadu_ps(m[v], src + 16 * v) : _mm512_setzero_ps());
                }
            }
}

/* col2im for stride 1, w <= 64, k <= 16, gathered: each 16-pixel piece of an input row sums its
 * k*k shifted column pieces in a register and is stored once (no read-modify-write of
 * overlapping pieces); the masks of every (kj, piece) are computed once. */
DT_AVX512 void dt_col2im_s1_avx512(const float *restrict col, int c, int h, int w, int k, int p, int oh,
                                   int ow, size_t ld, float *restrict x, int acc) {
    const int nv = (w + 15) / 16;
    __mmask16 mw[4], mk[16][4];
    for (int v = 0; v < nv; v++) {
        mw[v] = dt_mask_range(0, w, 16 * v);
        /* ox = ix + l + p - kj must lie in [0, ow) */
        for (int kj = 0; kj < k; kj++) mk[kj][v] = mw[v] & dt_mask_range(kj - p, kj - p + ow, 16 * v);
    }
    for (int ci = 0; ci < c; ci++)
        for (int iy = 0; iy < h; iy++) {
            float *xr = x + ((size_t)ci * h + iy) * w;
            for (int v = 0; v < nv; v++) {
                const int ix = 16 * v;
                __m512 sum = acc ? dt_maskz_loadu_ps(mw[v], xr + ix) : _mm512_setzero_ps();
                for (int ki = 0; ki < k; ki++) {
                    const int oy = iy + p - ki;
                    if (oy < 0 || oy >= oh) continue;
                    const float *r = col + (size_t)((ci * k + ki) * k) * ld + (ptrdiff_t)oy * ow + ix + p;
                    for (int kj = 0; kj < k; kj++, r += ld - 1)
                        sum = _mm512_add_ps(sum, dt_maskz_loadu_ps(mk[kj][v], r));
                }
                dt_mask_storeu_ps(xr + ix, mw[v], sum);
            }
        }
}

/* im2row for k <= 16 (the caller checks): a store per (c, ki): its k valid lanes, and zeros past
 * them that the next piece (or the row's slack) takes; 8-wide when k <= 8 (half the bytes, and
 * fewer stores across cache lines) */
DT_AVX512 void dt_im2row_k16_avx512(const float *restrict x, int c, int h, int w, int k, int s, int p,
                                    int oh, int ow, float *restrict rows, size_t ld) {
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            float *r = rows + (size_t)(oy * ow + ox) * ld;
            const int ix0 = ox * s - p;
            /* taps kj with 0 <= ix0 + kj < w */
            const int lo = ix0 < 0 ? -ix0 : 0, hi = w - ix0 < k ? w - ix0 : k;
            const __mmask16 m = dt_mask_range(lo, hi, 0);
            const int narrow = k <= 8;
            for (int ci = 0; ci < c; ci++)
                for (int ki = 0; ki < k; ki++, r += k) {
                    const int iy = oy * s - p + ki, in = iy >= 0 && iy < h;
                    const float *src = in ? x + ((size_t)ci * h + iy) * w + ix0 : NULL;
                    if (narrow) _mm256_storeu_ps(r, in ? (dt_lanes_check(src, m), _mm256_maskz_loadu_ps((__mmask8)m, src)) : _mm256_setzero_ps());
                    else _mm512_storeu_ps(r, in ? dt_maskz_loadu_ps(m, src) : _mm512_setzero_ps());
                }
        }
}

#endif
