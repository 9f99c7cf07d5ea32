/* Attention's per-head products in oneDNN's bf16 matmul (built with DTRAIN_WITH_DNNL), for
 * --precision bf16 on a CPU with bf16 arithmetic, where a plan chooses it (dtrain tune): every
 * example's and head's S = Q K^T / sqrt(D), Y = P V, and backward's dP = dY V^T, dQ = dS K,
 * dK = dS^T Q, dV = P^T dY, each one batched matmul over (example, head), bf16 operands and fp32
 * sums, the caller's fp32 memories around (Q, K, V read in place from the fused [T][3C] input).
 * The products are the full T x T ones (the layer's own path skips the blocks above the causal
 * diagonal): the softmax and its gradient stay the layer's (attention.c), in fp32. P and dS are
 * rounded to bf16 where they enter a product, as PyTorch's autocast does. Without oneDNN the
 * stubs below say "not here", and the layer's own path runs. */
#ifndef DT_LAYERS_ATTENTION_DNNL_H
#define DT_LAYERS_ATTENTION_DNNL_H

#include "layers/layer.h"

typedef struct dt_attn_dnnl dt_attn_dnnl;

#ifdef DT_WITH_DNNL
/* Node n's plan at this batch (kept in n->engine) when a plan chose oneDNN's bf16 products for
 * it under bf16; NULL: the layer's own products */
dt_attn_dnnl *dt_attn_dnnl_get(dt_node *n, int batch, int bf16);
/* P = Q K^T / sqrt(D) for every example and head ([b][h][T][T], the full rows: the caller masks) */
dt_status dt_attn_dnnl_scores(dt_attn_dnnl *a, const float *x, float *P);
/* Y = P V */
dt_status dt_attn_dnnl_mix(dt_attn_dnnl *a, const float *P, const float *x, float *y);
/* dP = dY V^T into the plan's own [b][h][T][T] buffer, returned (NULL on failure) */
float *dt_attn_dnnl_dP(dt_attn_dnnl *a, const float *dy, const float *x);
/* dQ, dK (with the 1/sqrt(D)) and dV into dx ([T][3C], overwritten) from dS (in the buffer
 * dt_attn_dnnl_dP returned), P, x and dY */
dt_status dt_attn_dnnl_grads(dt_attn_dnnl *a, const float *P, const float *x, const float *dy, float *dx);
const char *dt_attn_dnnl_impl(const dt_attn_dnnl *a);
/* ops->prepare, ops->kernels, ops->engine, ops->release of the attention layer */
dt_status dt_attn_dnnl_prepare(dt_node *n, int batch, int bf16);
unsigned dt_attn_dnnl_kernels(const dt_node *n, int bf16);
const char *dt_attn_dnnl_engine(const dt_node *n, int bf16);
void dt_attn_dnnl_release(dt_node *n);
#else
static inline dt_attn_dnnl *dt_attn_dnnl_get(dt_node *n, int batch, int bf16) {
    (void)n, (void)batch, (void)bf16;
    return NULL;
}
static inline dt_status dt_attn_dnnl_scores(dt_attn_dnnl *a, const float *x, float *P) {
    (void)a, (void)x, (void)P;
    return DT_ERR_STATE;
}
static inline dt_status dt_attn_dnnl_mix(dt_attn_dnnl *a, const float *P, const float *x, float *y) {
    (void)a, (void)P, (void)x, (void)y;
    return DT_ERR_STATE;
}
static inline float *dt_attn_dnnl_dP(dt_attn_dnnl *a, const float *dy, const float *x) {
    (void)a, (void)dy, (void)x;
    return NULL;
}
static inline dt_status dt_attn_dnnl_grads(dt_attn_dnnl *a, const float *P, const float *x, const float *dy, float *dx) {
    (void)a, (void)P, (void)x, (void)dy, (void)dx;
    return DT_ERR_STATE;
}
static inline const char *dt_attn_dnnl_impl(const dt_attn_dnnl *a) { (void)a; return ""; }
/* (in the ops table: no other engine to prepare, name or free, no kernel for a plan to choose) */
#define dt_attn_dnnl_prepare NULL
#define dt_attn_dnnl_kernels NULL
#define dt_attn_dnnl_engine NULL
#define dt_attn_dnnl_release NULL
#endif

#endif
