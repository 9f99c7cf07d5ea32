/* Causal multi-head self-attention on a fused QKV input (nanoGPT's CausalSelfAttention between
 * its c_attn and c_proj, which are linear layers around this one): input [T][3C], per position
 * q, k, v of C features each, head h their features h*D .. h*D+D-1 (D = C/H); output [T][C],
 * head h's result at the same features. Per example and head:
 *   S = Q K^T / sqrt(D), S[t][s] = -inf for s > t, P = softmax(S) by rows, Y = P V
 * with the GEMMs (gemm.h) reading Q, K, V in place (row stride 3C) and writing Y in place (C).
 *
 * Memory: P, H x T x T floats an example, is kept in aux from forward to backward, which needs
 * it (dV = P^T dY, and the softmax's gradient); backward's dP (T x T) is one head's at a time in
 * the shared scratch. At gpt-small's shapes (T 256, H 6) P is 1.5 MiB an example and layer, 9 MiB
 * an example for the 6 layers (108 MiB at batch 12); gpt-tiny's (T 64, H 4) 64 KiB a layer. The
 * scores themselves are never kept: S becomes P in place. PyTorch 1.13's nanoGPT keeps at least
 * as much (its autograd saves the softmax output and the masked scores). */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

#include "layers/attention_dnnl.h"
#include "layers/gemm.h"
#include "layers/vmath.h"

static dt_status attn_setup(dt_node *n) {
    if (n->heads < 1) return dt_fail(DT_ERR_ARG, "attention needs heads=H with H >= 1");
    if (n->ic % 3 != 0)
        return dt_fail(DT_ERR_ARG, "attention takes each position's fused q, k and v (3C features: a linear out=3C "
                       "before it), and %d is not a multiple of 3", n->ic);
    const int C = n->ic / 3, T = n->ih;
    if (C % n->heads != 0)
        return dt_fail(DT_ERR_ARG, "attention: %d features (C) do not divide into heads=%d", C, n->heads);
    n->oc = C; n->oh = T; n->ow = 1;
    /* QK^T and PV as full T x T products, 2 T T C each (as PyTorch's profiler and nanoGPT's MFU
     * estimate count them, the masked half included), and the softmax's 5 per score (scale,
     * max, exp, sum, divide) */
    n->flops = 4.0 * T * T * C + 5.0 * n->heads * T * T;
    return DT_OK;
}

static size_t attn_aux(const dt_node *n, int batch) {
    return (size_t)batch * n->heads * n->ih * n->ih * sizeof(float);
}

static size_t attn_workspace(const dt_node *n, int batch) {
    (void)batch;
    return (size_t)n->ih * n->ih;
}

/* The causal mask leaves the upper triangle of each head's T x T products zero, so the GEMMs
 * go by blocks of BLK rows (or columns) and skip what lies above the diagonal block: the
 * products of row block i take columns 0 .. (i+1) BLK only, about half of T x T for a long
 * context (gpt-small's 256: 5/8 at BLK 64). That took a fifth off the layer there (the GEMMs,
 * K = D = 64 deep, run at half OpenBLAS's peak; smaller blocks lose to their calls' cost, BLK 128
 * and the whole T measured slower). P is written (and read) only within those blocks, with
 * zeros above the diagonal inside the diagonal one. */
static int block_of(int T) { return T <= 128 ? 32 : 64; }

/* Rows t0 .. t1-1 of a head's scores (row t of T, at P + t T) become softmax rows over
 * columns 0 .. t, and columns t+1 .. cols-1 zero (the causal mask) */
static void causal_softmax(float *P, int T, int t0, int t1, int cols) {
    for (int t = t0; t < t1; t++) {
        float *row = P + (size_t)t * T;
        const float mx = dt_vmax(row, (size_t)t + 1);
        const float sum = dt_vexp_sum(row, row, (size_t)t + 1, mx);
        dt_vscale(row, (size_t)t + 1, 1.0f / sum);
        memset(row + t + 1, 0, (size_t)(cols - t - 1) * sizeof(float));
    }
}

/* Rows t0 .. t1-1 of dP become the softmax's gradient dS = P (dP - rowsum(P dP)), zero past
 * the diagonal up to column cols */
static void softmax_grad(const float *P, float *dP, int T, int t0, int t1, int cols) {
    for (int t = t0; t < t1; t++) {
        const float *pr = P + (size_t)t * T;
        float *dr = dP + (size_t)t * T, dot = 0;
        for (int s = 0; s <= t; s++) dot += pr[s] * dr[s];
        for (int s = 0; s <= t; s++) dr[s] = pr[s] * (dr[s] - dot);
        memset(dr + t + 1, 0, (size_t)(cols - t - 1) * sizeof(float));
    }
}

/* The products in oneDNN's bf16 matmul, every example and head at once (attention_dnnl.h);
 * 0 where it failed (the own path then computes everything again) */
static int dnnl_forward(dt_node *n, const dt_pass *p, dt_attn_dnnl *a) {
    const int T = n->ih;
    float *P = n->aux;
    if (dt_attn_dnnl_scores(a, p->x[0], P) != DT_OK) return 0;
    for (size_t bh = 0; bh < (size_t)p->batch * n->heads; bh++) causal_softmax(P + bh * T * T, T, 0, T, T);
    return dt_attn_dnnl_mix(a, P, p->x[0], n->y) == DT_OK;
}

static int dnnl_backward(dt_node *n, const dt_pass *p, dt_attn_dnnl *a) {
    const int T = n->ih;
    const float *P = n->aux;
    float *dS = dt_attn_dnnl_dP(a, n->dy, p->x[0]);
    if (!dS) return 0;
    for (size_t bh = 0; bh < (size_t)p->batch * n->heads; bh++) softmax_grad(P + bh * T * T, dS + bh * T * T, T, 0, T, T);
    return dt_attn_dnnl_grads(a, P, p->x[0], n->dy, p->dx[0]) == DT_OK;
}

static void attn_forward(dt_node *n, const dt_pass *p) {
    dt_attn_dnnl *a = dt_attn_dnnl_get(n, p->batch, p->bf16);
    if (a && dnnl_forward(n, p, a)) return;
    const int T = n->ih, C = n->oc, H = n->heads, D = C / H, C3 = 3 * C, BLK = block_of(T);
    const float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < H; h++) {
            const float *q = p->x[0] + (size_t)b * T * C3 + h * D, *k = q + C, *v = q + 2 * C;
            float *P = (float *)n->aux + ((size_t)b * H + h) * T * T, *y = n->y + (size_t)b * T * C + h * D;
            for (int r0 = 0; r0 < T; r0 += BLK) {
                const int rows = T - r0 < BLK ? T - r0 : BLK, cols = r0 + rows; /* S[r0.., 0..cols) */
                float *Pb = P + (size_t)r0 * T;
                dt_sgemm(0, 1, rows, cols, D, scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, Pb, T);
                causal_softmax(P, T, r0, cols, cols);
                dt_sgemm(0, 0, rows, D, cols, 1.0f, Pb, T, v, C3, 0.0f, y + (size_t)r0 * C, C);
            }
        }
}

static void attn_backward(dt_node *n, const dt_pass *p) {
    if (!p->dx[0]) return; /* no parameters: nothing else to do */
    /* oneDNN's products overwrite dX: where another consumer wrote it first, the own path adds */
    dt_attn_dnnl *a = p->dx_acc[0] ? NULL : dt_attn_dnnl_get(n, p->batch, p->bf16);
    if (a && dnnl_backward(n, p, a)) return;
    const int T = n->ih, C = n->oc, H = n->heads, D = C / H, C3 = 3 * C, BLK = block_of(T);
    const float scale = 1.0f / sqrtf((float)D), beta = p->dx_acc[0] ? 1.0f : 0.0f;
    float *dP = p->work; /* becomes dS, row by row */
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < H; h++) {
            const float *q = p->x[0] + (size_t)b * T * C3 + h * D, *k = q + C, *v = q + 2 * C;
            const float *P = (const float *)n->aux + ((size_t)b * H + h) * T * T;
            const float *dy = n->dy + (size_t)b * T * C + h * D;
            float *dq = p->dx[0] + (size_t)b * T * C3 + h * D, *dk = dq + C, *dv = dq + 2 * C;
            /* by row blocks: dP = dY V^T, the softmax's gradient dS in place, dQ = dS K (the
             * scale goes into dQ's and dK's GEMMs) */
            for (int r0 = 0; r0 < T; r0 += BLK) {
                const int rows = T - r0 < BLK ? T - r0 : BLK, cols = r0 + rows;
                dt_sgemm(0, 1, rows, cols, D, 1.0f, dy + (size_t)r0 * C, C, v, C3, 0.0f, dP + (size_t)r0 * T, T);
                softmax_grad(P, dP, T, r0, cols, cols);
                dt_sgemm(0, 0, rows, D, cols, scale, dP + (size_t)r0 * T, T, k, C3, beta, dq + (size_t)r0 * C3, C3);
            }
            /* by column blocks (rows from the block's first on: above it P and dS are zero):
             * dV = P^T dY, dK = dS^T Q */
            for (int c0 = 0; c0 < T; c0 += BLK) {
                const int cols = T - c0 < BLK ? T - c0 : BLK, rows = T - c0;
                const size_t at = (size_t)c0 * T + c0;
                dt_sgemm(1, 0, cols, D, rows, 1.0f, P + at, T, dy + (size_t)c0 * C, C, beta, dv + (size_t)c0 * C3, C3);
                dt_sgemm(1, 0, cols, D, rows, scale, dP + at, T, q + (size_t)c0 * C3, C3, beta, dk + (size_t)c0 * C3,
                         C3);
            }
        }
}

const dt_layer_ops dt_layer_attention = {
    .kind = "attention", .auto_prefix = "attn", .ninputs = 1, .setup = attn_setup, .forward = attn_forward,
    .backward = attn_backward, .workspace = attn_workspace, .aux_bytes = attn_aux, .bwd_skips = DT_SKIPS_Y,
    .seq = DT_SEQ_ONLY, .prepare = dt_attn_dnnl_prepare, .engine = dt_attn_dnnl_engine,
    .release = dt_attn_dnnl_release, .kernels = dt_attn_dnnl_kernels,
};
