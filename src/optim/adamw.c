/* AdamW's arithmetic, as torch.optim.AdamW's single-tensor step (PyTorch 1.13, foreach=False,
 * amsgrad off) computes it, in its order:
 *     step += 1
 *     param.mul_(1 - lr * weight_decay)
 *     exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
 *     exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
 *     step_size = lr / (1 - beta1 ** step)
 *     denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
 *     param.addcdiv_(exp_avg, denom, value=-step_size)
 * The scalars are Python floats (doubles) until a tensor op rounds them to float. PyTorch's CPU
 * kernels for add_ and addcmul_ are fused multiply-adds (vec::fmadd: exp_avg = fma(grad,
 * 1 - beta1, exp_avg * beta1), exp_avg_sq = fma((1 - beta2) * grad, grad, exp_avg_sq * beta2)),
 * so these are too: fmaf rounds once wherever it runs (libm's, or the CPU's FMA instructions in
 * the AVX2 form), and the result is PyTorch's bit for bit (tests/test_optim.c checks it against
 * PyTorch's steps, on every kernel tier). */
#include "optim/optim.h"

#include <math.h>

#include "layers/kernels.h"

void dt_adamw_scalars(dt_adamw_k *k, float lr, float wd, double beta1, double beta2, double eps, int64_t t) {
    const double lrd = lr, td = (double)t;
    /* PyTorch multiplies by it with weight decay 0 too: by 1, which changes no value */
    k->decay_mul = (float)(1.0 - lrd * (double)wd);
    k->b1 = (float)beta1;
    k->one_b1 = (float)(1.0 - beta1);
    k->b2 = (float)beta2;
    k->one_b2 = (float)(1.0 - beta2);
    k->bc2_sqrt = (float)sqrt(1.0 - pow(beta2, td));
    k->eps = (float)eps;
    k->neg_step = (float)-(lrd / (1.0 - pow(beta1, td)));
}

/* Every operation below is IEEE's, rounded once (fmaf too), so the loop gives the same bits
 * however it is compiled; the AVX2 form is the same operations eight at a time. */
static inline __attribute__((always_inline)) void adamw_loop(float *restrict w, const float *restrict g,
                                                             float *restrict m, float *restrict v, size_t n,
                                                             const dt_adamw_k *k) {
    for (size_t i = 0; i < n; i++) {
        const float mi = fmaf(g[i], k->one_b1, m[i] * k->b1);
        const float vi = fmaf(k->one_b2 * g[i], g[i], v[i] * k->b2);
        const float denom = sqrtf(vi) / k->bc2_sqrt + k->eps;
        m[i] = mi;
        v[i] = vi;
        w[i] = w[i] * k->decay_mul + k->neg_step * mi / denom;
    }
}

#ifdef DT_KERNELS_AVX512
DT_AVX2 static void adamw_avx2(float *w, const float *g, float *m, float *v, size_t n, const dt_adamw_k *k) {
    const __m256 dm = _mm256_set1_ps(k->decay_mul), b1 = _mm256_set1_ps(k->b1), ob1 = _mm256_set1_ps(k->one_b1),
                 b2 = _mm256_set1_ps(k->b2), ob2 = _mm256_set1_ps(k->one_b2), bc2 = _mm256_set1_ps(k->bc2_sqrt),
                 eps = _mm256_set1_ps(k->eps), ns = _mm256_set1_ps(k->neg_step);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gi = _mm256_loadu_ps(g + i);
        const __m256 mi = _mm256_fmadd_ps(gi, ob1, _mm256_mul_ps(_mm256_loadu_ps(m + i), b1));
        const __m256 vi = _mm256_fmadd_ps(_mm256_mul_ps(ob2, gi), gi, _mm256_mul_ps(_mm256_loadu_ps(v + i), b2));
        const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), eps);
        const __m256 wi = _mm256_mul_ps(_mm256_loadu_ps(w + i), dm);
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(w + i, _mm256_add_ps(wi, _mm256_div_ps(_mm256_mul_ps(ns, mi), denom)));
    }
    adamw_loop(w + i, g + i, m + i, v + i, n - i, k);
}
#endif

void dt_adamw_run(float *w, const float *g, float *m, float *v, size_t n, const dt_adamw_k *k) {
#ifdef DT_KERNELS_AVX512
    if (dt_cpu_avx2()) {
        adamw_avx2(w, g, m, v, n, k);
        return;
    }
#endif
    adamw_loop(w, g, m, v, n, k);
}
