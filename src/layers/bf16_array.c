/* bfloat16 array conversions (bf16_array.h). The AVX2 forms do core/bf16.h's integer arithmetic
 * eight lanes at a time, so both paths give the same bits (test_bf16 checks them against each
 * other on every class of float). */
#include "layers/bf16_array.h"
#include "layers/kernels.h"

#ifdef DT_KERNELS_AVX512
/* Eight floats to eight bf16 values, rounded to nearest even, NaN quieted. */
DT_AVX2 static inline __m128i pack8(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, qnan, nan);
    /* the 16-bit halves of lanes 0-3 and 4-7 into one 128-bit register */
    const __m256i packed = _mm256_packus_epi32(r, r); /* per 128-bit lane: r0..r3 r0..r3 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

DT_AVX2 static inline __m256 unpack8(const uint16_t *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

DT_AVX2 static size_t store_avx2(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), pack8(_mm256_loadu_ps(src + i)));
    return i;
}

DT_AVX2 static size_t store_add_avx2(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), pack8(_mm256_add_ps(unpack8(dst + i), _mm256_loadu_ps(src + i))));
    return i;
}

DT_AVX2 static size_t load_avx2(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, unpack8(src + i));
    return i;
}

DT_AVX2 static size_t round_avx2(float *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = pack8(_mm256_loadu_ps(src + i));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
    return i;
}
DT_AVX2 static size_t add_avx2(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), pack8(_mm256_add_ps(unpack8(a + i), unpack8(b + i))));
    return i;
}

/* max(x, 0) as the fp32 layer's x > 0 ? x : 0 (NaN: 0) */
DT_AVX2 static inline __m256 relu8(__m256 x) {
    return _mm256_and_ps(x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
}

DT_AVX2 static size_t relu_avx2(uint16_t *dst, const uint16_t *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), pack8(relu8(unpack8(x + i))));
    return i;
}

DT_AVX2 static size_t relu_grad_avx2(uint16_t *dx, const uint16_t *y, const uint16_t *dy, size_t n, int acc) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 pos = _mm256_cmp_ps(unpack8(y + i), _mm256_setzero_ps(), _CMP_GT_OQ);
        const __m256 g = _mm256_and_ps(unpack8(dy + i), pos);
        _mm_storeu_si128((__m128i *)(dx + i), pack8(acc ? _mm256_add_ps(unpack8(dx + i), g) : g));
    }
    return i;
}

DT_AVX2 static size_t pass_grad_avx2(uint16_t *dx, const uint16_t *dy, size_t n, int acc) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = unpack8(dy + i);
        _mm_storeu_si128((__m128i *)(dx + i), pack8(acc ? _mm256_add_ps(unpack8(dx + i), g) : g));
    }
    return i;
}
/* The same sixteen lanes at a time on AVX-512 */
DT_AVX512 static inline __m256i pack16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
}

DT_AVX512 static inline __m512 unpack16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

DT_AVX512 static size_t store_avx512(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(dst + i), pack16(_mm512_loadu_ps(src + i)));
    return i;
}

DT_AVX512 static size_t load_avx512(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, unpack16(src + i));
    return i;
}

DT_AVX512 static size_t round_avx512(float *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = pack16(_mm512_loadu_ps(src + i));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
    return i;
}

DT_AVX512 static size_t relu_grad_avx512(uint16_t *dx, const uint16_t *y, const uint16_t *dy, size_t n, int acc) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __mmask16 pos = _mm512_cmp_ps_mask(unpack16(y + i), _mm512_setzero_ps(), _CMP_GT_OQ);
        const __m512 g = _mm512_maskz_mov_ps(pos, unpack16(dy + i));
        _mm256_storeu_si256((__m256i *)(dx + i), pack16(acc ? _mm512_add_ps(unpack16(dx + i), g) : g));
    }
    return i;
}

/* AVX-512 where the CPU has it, else AVX2, else none: the lanes it did (the rest: scalar) */
#define FAST(f, ...) (dt_cpu_avx2() ? f(__VA_ARGS__) : 0)
#define FASTER(f, ...) (dt_cpu_avx512() ? f##512(__VA_ARGS__) : FAST(f##2, __VA_ARGS__))
#else
#define FAST(f, ...) 0
#define FASTER(f, ...) 0
#endif

void dt_bf16_store(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = FASTER(store_avx, dst, src, n); i < n; i++) dst[i] = dt_f32_to_bf16(src[i]);
}

void dt_bf16_store_add(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = FAST(store_add_avx2, dst, src, n); i < n; i++)
        dst[i] = dt_f32_to_bf16(dt_bf16_to_f32(dst[i]) + src[i]);
}

void dt_bf16_load(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = FASTER(load_avx, dst, src, n); i < n; i++) dst[i] = dt_bf16_to_f32(src[i]);
}

void dt_bf16_round(float *dst, const float *src, size_t n) {
    for (size_t i = FASTER(round_avx, dst, src, n); i < n; i++) dst[i] = dt_bf16_to_f32(dt_f32_to_bf16(src[i]));
}

void dt_bf16_add(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n) {
    for (size_t i = FAST(add_avx2, dst, a, b, n); i < n; i++) dst[i] = dt_f32_to_bf16(dt_bf16_to_f32(a[i]) + dt_bf16_to_f32(b[i]));
}

void dt_bf16_relu(uint16_t *dst, const uint16_t *x, size_t n) {
    for (size_t i = FAST(relu_avx2, dst, x, n); i < n; i++) {
        const float v = dt_bf16_to_f32(x[i]);
        dst[i] = dt_f32_to_bf16(v > 0.0f ? v : 0.0f);
    }
}

void dt_bf16_relu_grad(uint16_t *dx, const uint16_t *y, const uint16_t *dy, size_t n, int acc) {
    for (size_t i = FASTER(relu_grad_avx, dx, y, dy, n, acc); i < n; i++) {
        const float g = dt_bf16_to_f32(y[i]) > 0.0f ? dt_bf16_to_f32(dy[i]) : 0.0f;
        dx[i] = dt_f32_to_bf16(acc ? dt_bf16_to_f32(dx[i]) + g : g);
    }
}

void dt_bf16_pass_grad(uint16_t *dx, const uint16_t *dy, size_t n, int acc) {
    for (size_t i = FAST(pass_grad_avx2, dx, dy, n, acc); i < n; i++) {
        const float g = dt_bf16_to_f32(dy[i]);
        dx[i] = dt_f32_to_bf16(acc ? dt_bf16_to_f32(dx[i]) + g : g);
    }
}
