/* exp over arrays and the softmax and GELU kernels on it (vmath.h): AVX2 + FMA, or libm. */
#include "layers/vmath.h"

#include <math.h>

#include "layers/kernels.h"

/* GELU's constants: sqrt(2/pi) and the cubic's 0.044715 */
#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f

static float gelu1(float x) {
    const float t = tanhf(GELU_K0 * (x + GELU_K1 * x * x * x));
    return 0.5f * x * (1.0f + t);
}

static float gelu_grad1(float x) {
    const float t = tanhf(GELU_K0 * (x + GELU_K1 * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * x * x);
}

#ifdef DT_KERNELS_AVX512
/* Cephes' expf: x = n ln2 + r, |r| <= ln2/2 (ln 2 in two parts, so n ln2 is exact), exp(r) by
 * its polynomial, 2^n into the exponent. Inputs above 88.02 give exp(88.02) (n stays <= 127, not
 * inf: nothing here needs more), below ln(FLT_MIN) 0; NaN stays NaN (min and max return their
 * second operand when one is NaN, and x is the second). */
DT_AVX2 static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654475f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.02f), x);
    x = _mm256_max_ps(lo, x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

DT_AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

DT_AVX2 static float vmax_avx2(const float *x, size_t n) {
    size_t i = 0;
    float m = x[0];
    if (n >= 8) {
        __m256 v = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(x + i));
        __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        s = _mm_max_ss(s, _mm_movehdup_ps(s));
        m = _mm_cvtss_f32(s);
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

DT_AVX2 static float vexp_sum_avx2(float *y, const float *x, size_t n, float shift) {
    const __m256 sh = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
        if (y) _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) { /* the tail through a padded copy: the same exp as the rest of the row */
        float buf[8] = {0};
        for (size_t k = i; k < n; k++) buf[k - i] = x[k] - shift;
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 e = _mm256_and_ps(exp8(_mm256_loadu_ps(buf)), _mm256_castsi256_ps(live));
        _mm256_storeu_ps(buf, e);
        for (size_t k = i; k < n; k++)
            if (y) y[k] = buf[k - i];
        acc = _mm256_add_ps(acc, e);
    }
    return hsum8(acc);
}

DT_AVX2 static void vscale_avx2(float *y, size_t n, float a) {
    const __m256 av = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), av));
    for (; i < n; i++) y[i] *= a;
}

/* tanh(u) = 1 - 2 / (exp(2u) + 1): exact in its limits (exp 0 gives -1, exp large 1); near 0 its
 * absolute error is exp's (~1e-7), which is what GELU's 1 + tanh needs. Also returns
 * x^2 (the gradient uses it). */
DT_AVX2 static inline __m256 gelu_tanh8(__m256 x, __m256 *x2) {
    *x2 = _mm256_mul_ps(x, x);
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(GELU_K0)),
                                   _mm256_fmadd_ps(*x2, _mm256_set1_ps(GELU_K1), _mm256_set1_ps(1.0f)));
    const __m256 e = exp8(_mm256_add_ps(u, u)), one = _mm256_set1_ps(1.0f);
    return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
}

DT_AVX2 static void vgelu_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m256 x2;
        const __m256 t = gelu_tanh8(v, &x2);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                                              _mm256_add_ps(_mm256_set1_ps(1.0f), t)));
    }
    for (; i < n; i++) y[i] = gelu1(x[i]);
}

DT_AVX2 static void vgelu_grad_avx2(float *dx, const float *x, const float *dy, size_t n, int acc) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m256 x2;
        const __m256 t = gelu_tanh8(v, &x2);
        /* 0.5 (1 + t) + 0.5 x (1 - t^2) k0 (1 + 3 k1 x^2) */
        const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(GELU_K0),
                                           _mm256_fmadd_ps(x2, _mm256_set1_ps(3.0f * GELU_K1), one));
        const __m256 sech2 = _mm256_fnmadd_ps(t, t, one);
        const __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(half, v), sech2), inner,
                                         _mm256_mul_ps(half, _mm256_add_ps(one, t)));
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dy + i), d);
        if (acc) g = _mm256_add_ps(g, _mm256_loadu_ps(dx + i));
        _mm256_storeu_ps(dx + i, g);
    }
    for (; i < n; i++) dx[i] = (acc ? dx[i] : 0.0f) + dy[i] * gelu_grad1(x[i]);
}
#define HAVE_AVX2 dt_cpu_avx2()
#else
#define HAVE_AVX2 0
#define vmax_avx2(x, n) 0.0f
#define vexp_sum_avx2(y, x, n, s) 0.0f
#define vscale_avx2(y, n, a) ((void)0)
#define vgelu_avx2(y, x, n) ((void)0)
#define vgelu_grad_avx2(dx, x, dy, n, acc) ((void)0)
#endif

float dt_vmax(const float *x, size_t n) {
    if (HAVE_AVX2) return vmax_avx2(x, n);
    float m = x[0];
    for (size_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

float dt_vexp_sum(float *y, const float *x, size_t n, float shift) {
    if (HAVE_AVX2) return vexp_sum_avx2(y, x, n, shift);
    float s = 0;
    for (size_t i = 0; i < n; i++) {
        const float e = expf(x[i] - shift);
        if (y) y[i] = e;
        s += e;
    }
    return s;
}

void dt_vscale(float *y, size_t n, float a) {
    if (HAVE_AVX2) { vscale_avx2(y, n, a); return; }
    for (size_t i = 0; i < n; i++) y[i] *= a;
}

void dt_vgelu(float *y, const float *x, size_t n) {
    if (HAVE_AVX2) { vgelu_avx2(y, x, n); return; }
    for (size_t i = 0; i < n; i++) y[i] = gelu1(x[i]);
}

void dt_vgelu_grad(float *dx, const float *x, const float *dy, size_t n, int acc) {
    if (HAVE_AVX2) { vgelu_grad_avx2(dx, x, dy, n, acc); return; }
    for (size_t i = 0; i < n; i++) dx[i] = (acc ? dx[i] : 0.0f) + dy[i] * gelu_grad1(x[i]);
}
