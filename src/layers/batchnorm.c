/* Batch normalisation over (N, H, W) per channel. Training normalises with the batch's
 * biased variance and updates running statistics (unbiased variance, momentum as in
 * PyTorch); evaluation uses the running statistics. aux keeps mean and 1/std per channel. */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

static dt_status bn_setup(dt_node *n) {
    if (n->eps <= 0.0f) n->eps = 1e-5f;
    if (n->momentum <= 0.0f) n->momentum = 0.1f;
    n->oc = n->ic; n->oh = n->ih; n->ow = n->iw;
    n->nparam = 2; n->nstate = 2;
    n->ptens[0] = (dt_ptensor){"weight", 1, {n->ic, 0, 0, 0}};
    n->ptens[1] = (dt_ptensor){"bias", 1, {n->ic, 0, 0, 0}};
    n->stens[0] = (dt_ptensor){"running_mean", 1, {n->ic, 0, 0, 0}};
    n->stens[1] = (dt_ptensor){"running_var", 1, {n->ic, 0, 0, 0}};
    n->flops = 2.0 * dt_node_in_size(n);
    return DT_OK;
}

static void bn_init(dt_node *n, dt_rng *rng) {
    (void)rng;
    for (int c = 0; c < n->ic; c++) {
        n->w[0][c] = 1.0f; n->w[1][c] = 0.0f;
        n->s[0][c] = 0.0f; n->s[1][c] = 1.0f;
    }
}

static size_t bn_aux(const dt_node *n, int batch) {
    (void)batch;
    return 2 * (size_t)n->ic * sizeof(float);
}

static void bn_forward(dt_node *n, const dt_pass *p) {
    const int C = n->ic, N = p->batch;
    const size_t hw = (size_t)n->ih * n->iw, m = (size_t)N * hw;
    float *mean = n->aux, *invstd = mean + C;
    for (int c = 0; c < C; c++) {
        if (p->train) {
            double s = 0, ss = 0;
            for (int b = 0; b < N; b++) {
                const float *x = p->x[0] + ((size_t)b * C + c) * hw;
                for (size_t j = 0; j < hw; j++) s += x[j];
            }
            double mu = s / (double)m;
            for (int b = 0; b < N; b++) {
                const float *x = p->x[0] + ((size_t)b * C + c) * hw;
                for (size_t j = 0; j < hw; j++) { double d = x[j] - mu; ss += d * d; }
            }
            double var = ss / (double)m;
            mean[c] = (float)mu;
            invstd[c] = (float)(1.0 / sqrt(var + n->eps));
            double unbiased = m > 1 ? ss / (double)(m - 1) : var;
            n->s[0][c] = (1.0f - n->momentum) * n->s[0][c] + n->momentum * (float)mu;
            n->s[1][c] = (1.0f - n->momentum) * n->s[1][c] + n->momentum * (float)unbiased;
        } else {
            mean[c] = n->s[0][c];
            invstd[c] = 1.0f / sqrtf(n->s[1][c] + n->eps);
        }
        const float a = n->w[0][c] * invstd[c], bshift = n->w[1][c] - mean[c] * a;
        for (int b = 0; b < N; b++) {
            const float *x = p->x[0] + ((size_t)b * C + c) * hw;
            float *y = n->y + ((size_t)b * C + c) * hw;
            for (size_t j = 0; j < hw; j++) y[j] = x[j] * a + bshift;
        }
    }
}

static void bn_backward(dt_node *n, const dt_pass *p) {
    const int C = n->ic, N = p->batch;
    const size_t hw = (size_t)n->ih * n->iw, m = (size_t)N * hw;
    const float *mean = n->aux, *invstd = mean + C;
    for (int c = 0; c < C; c++) {
        double dgamma = 0, dbeta = 0;
        for (int b = 0; b < N; b++) {
            const float *x = p->x[0] + ((size_t)b * C + c) * hw;
            const float *dy = n->dy + ((size_t)b * C + c) * hw;
            for (size_t j = 0; j < hw; j++) {
                dbeta += dy[j];
                dgamma += dy[j] * (x[j] - mean[c]) * invstd[c];
            }
        }
        n->g[0][c] = (float)dgamma;
        n->g[1][c] = (float)dbeta;
        if (!p->dx[0]) continue;
        const float gi = n->w[0][c] * invstd[c];
        /* Training: dx = gamma*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)); evaluation: the
         * statistics are constants, so dx = gamma*invstd*dy. */
        const float mdy = p->train ? (float)(dbeta / (double)m) : 0.0f;
        const float mdx = p->train ? (float)(dgamma / (double)m) : 0.0f;
        for (int b = 0; b < N; b++) {
            const float *x = p->x[0] + ((size_t)b * C + c) * hw;
            const float *dy = n->dy + ((size_t)b * C + c) * hw;
            float *dx = p->dx[0] + ((size_t)b * C + c) * hw;
            for (size_t j = 0; j < hw; j++) {
                float xhat = (x[j] - mean[c]) * invstd[c];
                float v = gi * (dy[j] - mdy - xhat * mdx);
                dx[j] = p->dx_acc[0] ? dx[j] + v : v;
            }
        }
    }
}

const dt_layer_ops dt_layer_batchnorm = {
    .kind = "batchnorm", .auto_prefix = "bn", .ninputs = 1, .setup = bn_setup, .init = bn_init,
    .forward = bn_forward, .backward = bn_backward, .aux_bytes = bn_aux,
};
