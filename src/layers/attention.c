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

static void attn_forward(dt_node *n, const dt_pass *p) {
    const int T = n->ih, C = n->oc, H = n->heads, D = C / H, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < H; h++) {
            const float *q = p->x[0] + (size_t)b * T * C3 + h * D, *k = q + C, *v = q + 2 * C;
            float *P = (float *)n->aux + ((size_t)b * H + h) * T * T;
            dt_sgemm(0, 1, T, T, D, scale, q, C3, k, C3, 0.0f, P, T);
            for (int t = 0; t < T; t++) {
                float *row = P + (size_t)t * T;
                const float mx = dt_vmax(row, (size_t)t + 1);
                const float sum = dt_vexp_sum(row, row, (size_t)t + 1, mx);
                dt_vscale(row, (size_t)t + 1, 1.0f / sum);
                memset(row + t + 1, 0, (size_t)(T - t - 1) * sizeof(float)); /* the causal mask */
            }
            dt_sgemm(0, 0, T, D, T, 1.0f, P, T, v, C3, 0.0f, n->y + (size_t)b * T * C + h * D, C);
        }
}

static void attn_backward(dt_node *n, const dt_pass *p) {
    if (!p->dx[0]) return; /* no parameters: nothing else to do */
    const int T = n->ih, C = n->oc, H = n->heads, D = C / H, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)D), beta = p->dx_acc[0] ? 1.0f : 0.0f;
    float *dP = p->work;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < H; h++) {
            const float *q = p->x[0] + (size_t)b * T * C3 + h * D, *k = q + C, *v = q + 2 * C;
            const float *P = (const float *)n->aux + ((size_t)b * H + h) * T * T;
            const float *dy = n->dy + (size_t)b * T * C + h * D;
            float *dq = p->dx[0] + (size_t)b * T * C3 + h * D, *dk = dq + C, *dv = dq + 2 * C;
            dt_sgemm(1, 0, T, D, T, 1.0f, P, T, dy, C, beta, dv, C3); /* dV = P^T dY */
            dt_sgemm(0, 1, T, T, D, 1.0f, dy, C, v, C3, 0.0f, dP, T); /* dP = dY V^T */
            /* the softmax's gradient, dS = P (dP - rowsum(P dP)), in place; the scale goes
             * into the two GEMMs below */
            for (int t = 0; t < T; t++) {
                const float *pr = P + (size_t)t * T;
                float *dr = dP + (size_t)t * T, dot = 0;
                for (int s = 0; s <= t; s++) dot += pr[s] * dr[s];
                for (int s = 0; s <= t; s++) dr[s] = pr[s] * (dr[s] - dot);
                memset(dr + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
            }
            dt_sgemm(0, 0, T, D, T, scale, dP, T, k, C3, beta, dq, C3); /* dQ = dS K */
            dt_sgemm(1, 0, T, D, T, scale, dP, T, q, C3, beta, dk, C3); /* dK = dS^T Q */
        }
}

const dt_layer_ops dt_layer_attention = {
    .kind = "attention", .auto_prefix = "attn", .ninputs = 1, .setup = attn_setup, .forward = attn_forward,
    .backward = attn_backward, .workspace = attn_workspace, .aux_bytes = attn_aux, .bwd_skips = DT_SKIPS_Y,
    .seq = DT_SEQ_ONLY,
};
