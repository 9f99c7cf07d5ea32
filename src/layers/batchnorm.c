/* Batch normalisation over (N, H, W) per channel. Training normalises with the batch's
 * biased variance and updates running statistics (unbiased variance, momentum as in
 * PyTorch); evaluation uses the running statistics. aux keeps mean and 1/std per channel. */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

#include "layers/bf16_array.h"
#include "layers/kernels.h"

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

/* Channel statistics are sums over N rows of hw floats. A single double accumulator is one
 * long dependency chain (~4 cycles an element, the layer's whole cost in ResNet-18); 16 float
 * lanes per row vectorise, and each row's lanes are added into a double, so the error stays
 * that of a float sum over one row (hw <= 1024 here). */
#define BN_LANES 16
/* The library is built for any x86-64 (SSE2: 4 of the 16 lanes at a time); these loops are
 * also compiled for AVX-512, chosen at load time where the CPU has it (GCC's function
 * multiversioning). The lanes are explicit and nothing is contracted into an FMA (ISO C's
 * -ffp-contract=off), so both clones give the same bits. */
#if defined(DT_KERNELS_AVX512) && defined(__GNUC__) && !defined(__clang__)
#define BN_CLONES __attribute__((target_clones("avx512f", "default")))
#else
#define BN_CLONES
#endif
BN_CLONES static double row_sum(const float *x, size_t n) {
    float acc[BN_LANES] = {0};
    size_t j = 0;
    for (; j + BN_LANES <= n; j += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) acc[l] += x[j + l];
    double s = 0;
    for (int l = 0; l < BN_LANES; l++) s += acc[l];
    for (; j < n; j++) s += x[j];
    return s;
}
BN_CLONES static double row_sqdev(const float *x, size_t n, float mu) {
    float acc[BN_LANES] = {0};
    size_t j = 0;
    for (; j + BN_LANES <= n; j += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) { float d = x[j + l] - mu; acc[l] += d * d; }
    double s = 0;
    for (int l = 0; l < BN_LANES; l++) s += acc[l];
    for (; j < n; j++) { double d = x[j] - mu; s += d * d; }
    return s;
}
/* sum dy and sum dy * (x - mu) over one row */
BN_CLONES static void row_grad_sums(const float *x, const float *dy, size_t n, float mu, double *sdy, double *sdyx) {
    float a[BN_LANES] = {0}, b[BN_LANES] = {0};
    size_t j = 0;
    for (; j + BN_LANES <= n; j += BN_LANES)
        for (int l = 0; l < BN_LANES; l++) { a[l] += dy[j + l]; b[l] += dy[j + l] * (x[j + l] - mu); }
    double s1 = 0, s2 = 0;
    for (int l = 0; l < BN_LANES; l++) { s1 += a[l]; s2 += b[l]; }
    for (; j < n; j++) { s1 += dy[j]; s2 += (double)dy[j] * (x[j] - mu); }
    *sdy += s1;
    *sdyx += s2;
}

BN_CLONES static void row_affine(const float *x, size_t n, float a, float b, float *y) {
    for (size_t j = 0; j < n; j++) y[j] = x[j] * a + b;
}
BN_CLONES static void row_dx(const float *x, const float *dy, size_t n, float gi, float mdy, float mu, float is, float mdx,
                             int add, float *dx) {
    if (add)
        for (size_t j = 0; j < n; j++) dx[j] += gi * (dy[j] - mdy - (x[j] - mu) * is * mdx);
    else
        for (size_t j = 0; j < n; j++) dx[j] = gi * (dy[j] - mdy - (x[j] - mu) * is * mdx);
}

/* Under --precision bf16 the layer takes its activations as stored (bf16_io: p->x16, n->y16,
 * n->dy16, p->dx16): each row (one image's channel) is converted into the workspace, computed
 * on as in fp32, and rounded on the way out: the bits of the fp32 code on fp32 copies of the
 * whole tensors (models/precision.c), without writing those copies to memory and back. */
static int bn_bf16_io(dt_node *n, int batch) {
    (void)n; (void)batch;
    return 1;
}

/* Under bf16, a channel's rows of every image (x, and dy backward) are converted once into the
 * workspace and read from there by each pass (statistics, then output): one conversion instead
 * of two or three, from cache (resnet18-cifar's largest: 32 x 1024 floats, 128 kB) */
static size_t bn_workspace(const dt_node *n, int batch) {
    return (2 * (size_t)batch + 1) * n->ih * n->iw;
}

/* Channel c of every image of v16 in fp32, image after image, into buf */
static void stage_channel(const uint16_t *v16, int c, int C, int N, size_t hw, float *buf) {
    for (int b = 0; b < N; b++) dt_bf16_load(buf + (size_t)b * hw, v16 + ((size_t)b * C + c) * hw, hw);
}

/* Row (b, c) of an activation in fp32: v's own, or the staged channel's */
static const float *row(const float *v, const float *staged, int b, size_t at, size_t hw) {
    return staged ? staged + (size_t)b * hw : v + at;
}

static void bn_forward(dt_node *n, const dt_pass *p) {
    const int C = n->ic, N = p->batch;
    const size_t hw = (size_t)n->ih * n->iw, m = (size_t)N * hw;
    float *mean = n->aux, *invstd = mean + C;
    const uint16_t *x16 = p->x16[0];
    float *xs = x16 ? p->work : NULL, *ybuf = p->work + (size_t)N * hw;
    for (int c = 0; c < C; c++) {
        if (x16) stage_channel(x16, c, C, N, hw, xs);
        if (p->train) {
            double s = 0, ss = 0;
            for (int b = 0; b < N; b++) s += row_sum(row(p->x[0], xs, b, ((size_t)b * C + c) * hw, hw), hw);
            double mu = s / (double)m;
            for (int b = 0; b < N; b++)
                ss += row_sqdev(row(p->x[0], xs, b, ((size_t)b * C + c) * hw, hw), hw, (float)mu);
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
            const size_t at = ((size_t)b * C + c) * hw;
            const float *x = row(p->x[0], xs, b, at, hw);
            float *y = x16 ? ybuf : n->y + at;
            row_affine(x, hw, a, bshift, y);
            if (x16) dt_bf16_store(n->y16 + at, y, hw);
        }
    }
}

static void bn_backward(dt_node *n, const dt_pass *p) {
    const int C = n->ic, N = p->batch;
    const size_t hw = (size_t)n->ih * n->iw, m = (size_t)N * hw;
    const float *mean = n->aux, *invstd = mean + C;
    const uint16_t *x16 = p->x16[0];
    float *xs = x16 ? p->work : NULL, *dys = x16 ? p->work + (size_t)N * hw : NULL, *dxbuf = p->work + 2 * (size_t)N * hw;
    for (int c = 0; c < C; c++) {
        double dgamma = 0, dbeta = 0;
        if (x16) {
            stage_channel(x16, c, C, N, hw, xs);
            stage_channel(n->dy16, c, C, N, hw, dys);
        }
        for (int b = 0; b < N; b++) {
            const size_t at = ((size_t)b * C + c) * hw;
            row_grad_sums(row(p->x[0], xs, b, at, hw), row(n->dy, dys, b, at, hw), hw, mean[c], &dbeta, &dgamma);
        }
        dgamma *= invstd[c];
        n->g[0][c] = (float)dgamma;
        n->g[1][c] = (float)dbeta;
        if (x16 ? !p->dx16[0] : !p->dx[0]) continue;
        const float gi = n->w[0][c] * invstd[c];
        /* Training: dx = gamma*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)); evaluation: the
         * statistics are constants, so dx = gamma*invstd*dy. */
        const float mdy = p->train ? (float)(dbeta / (double)m) : 0.0f;
        const float mdx = p->train ? (float)(dgamma / (double)m) : 0.0f;
        for (int b = 0; b < N; b++) {
            const size_t at = ((size_t)b * C + c) * hw;
            const float *x = row(p->x[0], xs, b, at, hw);
            const float *dy = row(n->dy, dys, b, at, hw);
            float *dx = x16 ? dxbuf : p->dx[0] + at;
            const float mu = mean[c], is = invstd[c];
            row_dx(x, dy, hw, gi, mdy, mu, is, mdx, p->dx_acc[0] && !x16, dx);
            /* added where the staged path adds: on the way into bf16 */
            if (x16 && p->dx_acc[0]) dt_bf16_store_add(p->dx16[0] + at, dx, hw);
            else if (x16) dt_bf16_store(p->dx16[0] + at, dx, hw);
        }
    }
}

const dt_layer_ops dt_layer_batchnorm = {
    .kind = "batchnorm", .auto_prefix = "bn", .ninputs = 1, .setup = bn_setup, .init = bn_init,
    .forward = bn_forward, .backward = bn_backward, .aux_bytes = bn_aux, .bwd_skips = DT_SKIPS_Y,
    .workspace = bn_workspace, .bf16_io = bn_bf16_io,
};
