/* A linear layer's bf16 GEMMs through oneDNN's matmul (built with DTRAIN_WITH_DNNL), for
 * --precision bf16 on a CPU with bf16 arithmetic: y = x W^T + b, dX = dY W, dW = dY^T x with
 * bf16 operands and fp32 sums, the caller's fp32 memories (bf16 values: models/precision.c's
 * staging) around; the bias gradient stays the layer's. Without oneDNN the stubs below say "not
 * here", and the layer's fp32 GEMMs run. */
#ifndef DT_LAYERS_LINEAR_DNNL_H
#define DT_LAYERS_LINEAR_DNNL_H

#include "layers/layer.h"

typedef struct dt_linear_dnnl dt_linear_dnnl;

#ifdef DT_WITH_DNNL
/* The plan of linear node n at this batch; NULL, with dt_last_error set, when oneDNN cannot. */
dt_linear_dnnl *dt_linear_dnnl_plan(const dt_node *n, int batch);
void dt_linear_dnnl_free(dt_linear_dnnl *p);
/* y = x W^T + b (b NULL without bias), ReLU'd when n->relu_out */
dt_status dt_linear_dnnl_forward(dt_linear_dnnl *p, const float *x, const float *w, const float *b, float *y);
/* dW (overwritten) and, if dx is not NULL, dX (overwritten; dx_acc, adding to it, is refused
 * before anything is written: the layer's own path does that) */
dt_status dt_linear_dnnl_backward(dt_linear_dnnl *p, const float *x, const float *w, const float *dy, float *dx,
                                  int dx_acc, float *dw);
const char *dt_linear_dnnl_impl(const dt_linear_dnnl *p);

/* Does linear node n's bf16 work go to oneDNN? Only with DTRAIN_ENGINE=onednn, on a CPU with
 * bf16 arithmetic: on downpour-cnn's fc1 (64 x 9216 x 128) oneDNN 2.6's bf16 matmul took 7.6 ms
 * a step on Zen 5, against 4.3 for OpenBLAS's fp32 GEMM on the same bf16 values (its backward
 * GEMMs, K = 64 and 128, ran at ~63 GFLOP/s, and the transposed weights' reorder took 1.5 ms):
 * kept for CPUs where it wins (AMX), tested, not chosen by default. */
int dt_linear_dnnl_wanted(const dt_node *n);
/* The kernels a plan may choose for n here (ops->kernels): under bf16 with bf16 arithmetic,
 * the fp32 GEMM on rounded values (own) or oneDNN's bf16 matmul */
unsigned dt_linear_dnnl_kernels(const dt_node *n, int bf16);
/* Node n's plan at this batch, kept in n->engine; NULL: OpenBLAS's fp32 GEMM on bf16 values. */
dt_linear_dnnl *dt_linear_dnnl_get(dt_node *n, int batch);
void dt_linear_dnnl_release(dt_node *n);
/* ops->prepare: under bf16, node n's plan made for this batch now (NULL: the fp32 GEMM, said
 * once, not an error) */
dt_status dt_linear_dnnl_prepare(dt_node *n, int batch, int bf16);
/* ops->engine: under bf16 "oneDNN-bf16" or "own"; NULL in fp32 (always OpenBLAS's: not named) */
const char *dt_linear_dnnl_engine(const dt_node *n, int bf16);
#else
static inline dt_linear_dnnl *dt_linear_dnnl_get(dt_node *n, int batch) {
    (void)n, (void)batch;
    return NULL;
}
static inline dt_status dt_linear_dnnl_forward(dt_linear_dnnl *p, const float *x, const float *w, const float *b,
                                               float *y) {
    (void)p, (void)x, (void)w, (void)b, (void)y;
    return DT_ERR_STATE;
}
static inline dt_status dt_linear_dnnl_backward(dt_linear_dnnl *p, const float *x, const float *w, const float *dy,
                                                float *dx, int dx_acc, float *dw) {
    (void)p, (void)x, (void)w, (void)dy, (void)dx, (void)dx_acc, (void)dw;
    return DT_ERR_STATE;
}
/* (in the ops table: no other engine to prepare, name or free, no kernel for a plan to choose) */
#define dt_linear_dnnl_prepare NULL
#define dt_linear_dnnl_engine NULL
#define dt_linear_dnnl_release NULL
#define dt_linear_dnnl_kernels NULL
#endif

#endif
