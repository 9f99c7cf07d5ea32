/* Tiled transposes (transpose.h). */
#include "layers/transpose.h"

#include <stdint.h>

#include "core/bf16.h"
#include "layers/kernels.h"

#define TILE 16

/* One tile (or an edge piece of one) of the plain loop */
static void tile_plain(char *dst, size_t dp, const char *src, size_t sp, size_t rows, size_t cols, int size, int add) {
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++)
            if (size == 4) {
                float *d = (float *)dst + j * dp + r;
                const float v = ((const float *)src)[r * sp + j];
                *d = add ? *d + v : v;
            } else {
                uint16_t *d = (uint16_t *)dst + j * dp + r;
                const uint16_t v = ((const uint16_t *)src)[r * sp + j];
                *d = add ? dt_f32_to_bf16(dt_bf16_to_f32(*d) + dt_bf16_to_f32(v)) : v;
            }
}

#ifdef DT_KERNELS_AVX512
/* 16 rows of 16 32-bit lanes transposed in registers: 4 x 4 blocks within 128-bit lanes
 * (unpack 32 then 64), then the lanes themselves (two rounds of shuffle_i32x4). */
DT_AVX512 static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* u[4i + k], lane L: column 4L + k of rows 4i .. 4i + 3 */
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) { /* row 4L + k: lane L of u[k], u[4 + k], u[8 + k], u[12 + k] */
        const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xee);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44),
                      w1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xee);
        r[k] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[4 + k] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
        r[8 + k] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[12 + k] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
    }
}

/* 16 floats (as bits) to bf16 in the low halves, rounded to nearest even, NaN quieted (core/bf16.h) */
DT_AVX512 static inline __m512i round16(__m512i u) {
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

DT_AVX512 static void tile16(char *dst, size_t dp, const char *src, size_t sp, int size, int add) {
    __m512i r[16];
    if (size == 4) {
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512((const float *)src + i * sp);
        transpose16(r);
        for (int i = 0; i < 16; i++) {
            float *d = (float *)dst + i * dp;
            __m512 v = _mm512_castsi512_ps(r[i]);
            if (add) v = _mm512_add_ps(_mm512_loadu_ps(d), v);
            _mm512_storeu_ps(d, v);
        }
        return;
    }
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i * sp)));
    transpose16(r);
    for (int i = 0; i < 16; i++) {
        uint16_t *d = (uint16_t *)dst + i * dp;
        __m512i v = r[i];
        if (add) { /* both as floats (bf16 << 16), summed, rounded */
            const __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)d)), 16));
            v = round16(_mm512_castps_si512(_mm512_add_ps(a, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)))));
        }
        _mm256_storeu_si256((__m256i *)d, _mm512_cvtepi32_epi16(v));
    }
}
#endif

void dt_transpose(void *dst, size_t dp, const void *src, size_t sp, size_t rows, size_t cols, int size, int add) {
    char *d = dst;
    const char *s = src;
    /* dst in order (a block of its rows finished before the next): its lines are written
     * whole; src's rows, read a tile's width at a time, stay in cache between blocks */
    for (size_t j0 = 0; j0 < cols; j0 += TILE)
        for (size_t r0 = 0; r0 < rows; r0 += TILE) {
            const size_t nr = rows - r0 < TILE ? rows - r0 : TILE, nc = cols - j0 < TILE ? cols - j0 : TILE;
            char *dt = d + (j0 * dp + r0) * (size_t)size;
            const char *st = s + (r0 * sp + j0) * (size_t)size;
#ifdef DT_KERNELS_AVX512
            if (nr == TILE && nc == TILE && dt_cpu_avx512()) {
                tile16(dt, dp, st, sp, size, add);
                continue;
            }
#endif
            tile_plain(dt, dp, st, sp, nr, nc, size, add);
        }
}
