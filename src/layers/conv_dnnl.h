/* A convolution through oneDNN's primitives (built with DTRAIN_WITH_DNNL): forward and both
 * gradients of one conv node at one batch size, NCHW fp32 in and out as dtrain's own path,
 * oneDNN's own layouts (and, under bf16, its bf16 data) inside, reorders around. Everything is
 * made by the plan: no allocation when it runs (its scratchpad is its own, oneDNN's "user"
 * scratchpad mode, in one arena all plans share). Without oneDNN the stubs below say "not here",
 * and conv.c's own kernels run. */
#ifndef DT_LAYERS_CONV_DNNL_H
#define DT_LAYERS_CONV_DNNL_H

#include "layers/layer.h"

typedef struct dt_conv_dnnl dt_conv_dnnl;

enum { DT_CONV_AUTO, DT_CONV_OWN, DT_CONV_ONEDNN, DT_CONV_BAD };
/* A plan's arithmetic and memories: fp32; bf16 arithmetic (activations and weights bf16, sums
 * and parameter gradients fp32) on fp32 memories; the same on the model's bf16 activations */
enum { DT_CONV_FP32, DT_CONV_BF16, DT_CONV_BF16_IO, DT_CONV_FP32_DIRECT /* fp32, never Winograd (a plan's onednn-direct) */ };

#ifdef DT_WITH_DNNL
#include "layers/dnnl_op.h"

/* The plan of node n (a conv) at this batch in this mode; NULL, with dt_last_error set, when
 * oneDNN cannot make one. */
dt_conv_dnnl *dt_conv_dnnl_plan(const dt_node *n, int batch, int mode);
void dt_conv_dnnl_free(dt_conv_dnnl *p);
/* y = conv(x, w) + b (b NULL without bias), ReLU'd when n->relu_out */
dt_status dt_conv_dnnl_forward(dt_conv_dnnl *p, const float *x, const float *w, const float *b, float *y);
/* dW, dB (overwritten; db NULL without bias) and, if dx is not NULL, dX (overwritten, or
 * added to with dx_acc) from x, w and dY */
dt_status dt_conv_dnnl_backward(dt_conv_dnnl *p, const float *x, const float *w, const float *dy, float *dx,
                                int dx_acc, float *dw, float *db);
/* The same with bf16 activations and their gradients (DT_CONV_BF16_IO plans); dX added to in
 * fp32 and rounded, as models/precision.c adds a second consumer's gradient */
dt_status dt_conv_dnnl_forward16(dt_conv_dnnl *p, const uint16_t *x, const float *w, const float *b, uint16_t *y);
dt_status dt_conv_dnnl_backward16(dt_conv_dnnl *p, const uint16_t *x, const float *w, const uint16_t *dy, uint16_t *dx,
                                  int dx_acc, float *dw, float *db);
/* The implementations oneDNN chose ("forward / backward data / backward weights"). */
const char *dt_conv_dnnl_impl(const dt_conv_dnnl *p);

/* Does node n run through oneDNN (in bf16 or fp32)? DTRAIN_ENGINE=own|onednn, else the
 * rule by shape (the same choice on every rank and every run). */
int dt_conv_dnnl_wanted(const dt_node *n, int bf16);
/* The kernel (DT_KERNEL_*, never RULE) that runs node n at this precision: DTRAIN_ENGINE if
 * set, else the plan's (n->kernel), else the rule's; ONEDNN_BF16 only where the CPU has bf16
 * arithmetic. */
int dt_conv_dnnl_kernel(const dt_node *n, int bf16);
/* oneDNN's kernels a plan may choose for n here (conv.c adds dtrain's own); 0 without its engine */
unsigned dt_conv_dnnl_kernels(const dt_node *n, int bf16);
/* Node n's plan at this batch and mode, made on its first use and kept in n->engine; NULL:
 * dtrain's own path. A bf16 mode asks: where the CPU has no bf16 arithmetic, DT_CONV_BF16
 * gets an fp32 plan (on the bf16-rounded values) and DT_CONV_BF16_IO none. */
dt_conv_dnnl *dt_conv_dnnl_get(dt_node *n, int batch, int mode);
/* Frees node n's plans (with its model). */
void dt_conv_dnnl_release(dt_node *n);
/* ops->prepare: node n's plan made for this batch now, not in the first step (NULL: the own
 * path, said once, not an error) */
dt_status dt_conv_dnnl_prepare(dt_node *n, int batch, int bf16);
/* ops->engine: "oneDNN-bf16", "oneDNN" or "own" */
const char *dt_conv_dnnl_engine(const dt_node *n, int bf16);
/* ops->bf16_io: under bf16, a conv whose input is another layer's output takes it as stored
 * (bf16) where oneDNN has bf16 kernels; the model input is fp32 */
int dt_conv_dnnl_bf16_io(dt_node *n, int batch);
#else
static inline dt_conv_dnnl *dt_conv_dnnl_get(dt_node *n, int batch, int mode) {
    (void)n, (void)batch, (void)mode;
    return NULL;
}
static inline dt_status dt_conv_dnnl_forward(dt_conv_dnnl *p, const float *x, const float *w, const float *b,
                                             float *y) {
    (void)p, (void)x, (void)w, (void)b, (void)y;
    return DT_ERR_STATE;
}
static inline dt_status dt_conv_dnnl_backward(dt_conv_dnnl *p, const float *x, const float *w, const float *dy,
                                              float *dx, int dx_acc, float *dw, float *db) {
    (void)p, (void)x, (void)w, (void)dy, (void)dx, (void)dx_acc, (void)dw, (void)db;
    return DT_ERR_STATE;
}
static inline dt_status dt_conv_dnnl_forward16(dt_conv_dnnl *p, const uint16_t *x, const float *w, const float *b,
                                               uint16_t *y) {
    (void)p, (void)x, (void)w, (void)b, (void)y;
    return DT_ERR_STATE;
}
static inline dt_status dt_conv_dnnl_backward16(dt_conv_dnnl *p, const uint16_t *x, const float *w,
                                                const uint16_t *dy, uint16_t *dx, int dx_acc, float *dw, float *db) {
    (void)p, (void)x, (void)w, (void)dy, (void)dx, (void)dx_acc, (void)dw, (void)db;
    return DT_ERR_STATE;
}
static inline unsigned dt_conv_dnnl_kernels(const dt_node *n, int bf16) {
    (void)n, (void)bf16;
    return 0;
}
/* (in the ops table: no other engine to prepare, name or free, no bf16 activations taken) */
#define dt_conv_dnnl_prepare NULL
#define dt_conv_dnnl_engine NULL
#define dt_conv_dnnl_release NULL
#define dt_conv_dnnl_bf16_io NULL
#endif

#endif
