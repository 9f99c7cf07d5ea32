/* Linear layers' bf16 GEMMs through oneDNN's matmul (linear_dnnl.h); checked against the fp32
 * GEMM on the same bf16 values in tests/test_conv_dnnl.c. */
#include "layers/linear_dnnl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "layers/dnnl_op.h"

#define TRY DT_DNNL_TRY

struct dt_linear_dnnl {
    dt_dnnl_op fwd, bwd_data, bwd_weights;
    dnnl_memory_t x, y, w, wt, b, dy, dyt, dx, dw; /* the user's (wt, dyt: W and dY transposed) */
    int bias;
    char impl[256];
};

/* A plain fp32 matrix rows x cols whose rows are row_stride apart and columns col_stride. */
static dnnl_status_t plain(dnnl_memory_desc_t *md, dnnl_dim_t rows, dnnl_dim_t cols, dnnl_dim_t row_stride,
                           dnnl_dim_t col_stride) {
    const dnnl_dims_t d = {rows, cols}, s = {row_stride, col_stride};
    return dnnl_memory_desc_init_by_strides(md, 2, d, dnnl_f32, s);
}

static dnnl_status_t any16(dnnl_memory_desc_t *md, dnnl_dim_t rows, dnnl_dim_t cols) {
    const dnnl_dims_t d = {rows, cols};
    return dnnl_memory_desc_init_by_tag(md, 2, d, dnnl_bf16, dnnl_format_tag_any);
}

dt_linear_dnnl *dt_linear_dnnl_plan(const dt_node *n, int batch) {
    const dnnl_engine_t engine = dt_dnnl_engine();
    if (!engine) return NULL;
    dt_linear_dnnl *p = calloc(1, sizeof *p);
    if (!p) { dt_nomem("a oneDNN linear plan"); return NULL; }
    const dnnl_dim_t N = (dnnl_dim_t)batch * dt_node_rows(n), in = dt_node_row_len(n), out = n->out; /* per position */
    p->bias = n->bias;
    dnnl_primitive_attr_t attr = NULL, fattr = NULL;
    dnnl_post_ops_t relu = NULL;
    dnnl_memory_desc_t x, y, w, wt, b, dy, dyt, dx, dw, x16, wt16, dy16, w16, dyt16;
    TRY(plain(&x, N, in, in, 1));
    TRY(plain(&y, N, out, out, 1));
    TRY(plain(&w, out, in, in, 1));
    TRY(plain(&wt, in, out, 1, in));
    TRY(plain(&b, 1, out, out, 1));
    TRY(plain(&dy, N, out, out, 1));
    TRY(plain(&dyt, out, N, 1, out));
    TRY(plain(&dx, N, in, in, 1));
    TRY(plain(&dw, out, in, in, 1));
    TRY(any16(&x16, N, in));
    TRY(any16(&wt16, in, out));
    TRY(any16(&dy16, N, out));
    TRY(any16(&w16, out, in));
    TRY(any16(&dyt16, out, N));
    dnnl_memory_t *mems[9] = {&p->x, &p->y, &p->w, &p->wt, &p->b, &p->dy, &p->dyt, &p->dx, &p->dw};
    const dnnl_memory_desc_t *mds[9] = {&x, &y, &w, &wt, &b, &dy, &dyt, &dx, &dw};
    for (int i = 0; i < 9; i++) TRY(dnnl_memory_create(mems[i], mds[i], engine, DNNL_MEMORY_NONE));
    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    TRY(dnnl_primitive_attr_create(&fattr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(fattr, dnnl_scratchpad_mode_user));
    if (n->relu_out) {
        TRY(dnnl_post_ops_create(&relu));
        TRY(dnnl_post_ops_append_eltwise(relu, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
        TRY(dnnl_primitive_attr_set_post_ops(fattr, relu));
    }
    /* y = x W^T + b; dX = dY W; dW = dY^T x */
    TRY(dt_dnnl_matmul(&p->fwd, fattr, &x16, p->x, &wt16, p->wt, p->bias ? p->b : NULL, p->y, p->impl, sizeof p->impl));
    TRY(dt_dnnl_matmul(&p->bwd_data, attr, &dy16, p->dy, &w16, p->w, NULL, p->dx, p->impl, sizeof p->impl));
    TRY(dt_dnnl_matmul(&p->bwd_weights, attr, &dyt16, p->dyt, &x16, p->x, NULL, p->dw, p->impl, sizeof p->impl));
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_attr_destroy(fattr);
    if (relu) dnnl_post_ops_destroy(relu);
    return p;
fail:
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (fattr) dnnl_primitive_attr_destroy(fattr);
    if (relu) dnnl_post_ops_destroy(relu);
    dt_linear_dnnl_free(p);
    return NULL;
}

void dt_linear_dnnl_free(dt_linear_dnnl *p) {
    if (!p) return;
    dt_dnnl_op_free(&p->fwd);
    dt_dnnl_op_free(&p->bwd_data);
    dt_dnnl_op_free(&p->bwd_weights);
    dnnl_memory_t mems[9] = {p->x, p->y, p->w, p->wt, p->b, p->dy, p->dyt, p->dx, p->dw};
    for (int i = 0; i < 9; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(p);
}

const char *dt_linear_dnnl_impl(const dt_linear_dnnl *p) { return p ? p->impl : ""; }

dt_status dt_linear_dnnl_forward(dt_linear_dnnl *p, const float *x, const float *w, const float *b, float *y) {
    dnnl_status_t s = dt_dnnl_set(p->x, x);
    if (s == dnnl_success) s = dt_dnnl_set(p->wt, w);
    if (s == dnnl_success && p->bias) s = dt_dnnl_set(p->b, b);
    if (s == dnnl_success) s = dt_dnnl_set(p->y, y);
    if (s == dnnl_success) s = dt_dnnl_op_run(&p->fwd, 0);
    return s == dnnl_success ? DT_OK : dt_fail(DT_ERR_STATE, "oneDNN linear forward failed (status %d)", (int)s);
}

dt_status dt_linear_dnnl_backward(dt_linear_dnnl *p, const float *x, const float *w, const float *dy, float *dx,
                                  int dx_acc, float *dw) {
    /* dX added to (another consumer wrote it first: not in the zoo, where a linear layer's input
     * is one layer's): the plan only writes, that case stays the layer's own */
    if (dx && dx_acc) return dt_fail(DT_ERR_ARG, "oneDNN linear: dX to add to");
    dnnl_status_t s = dt_dnnl_set(p->x, x);
    if (s == dnnl_success) s = dt_dnnl_set(p->dyt, dy);
    if (s == dnnl_success) s = dt_dnnl_set(p->dw, dw);
    if (s == dnnl_success) s = dt_dnnl_op_run(&p->bwd_weights, 0);
    if (s == dnnl_success && dx) {
        s = dt_dnnl_set(p->dy, dy);
        if (s == dnnl_success) s = dt_dnnl_set(p->w, w);
        if (s == dnnl_success) s = dt_dnnl_set(p->dx, dx);
        if (s == dnnl_success) s = dt_dnnl_op_run(&p->bwd_data, 0);
    }
    return s == dnnl_success ? DT_OK : dt_fail(DT_ERR_STATE, "oneDNN linear backward failed (status %d)", (int)s);
}

int dt_linear_dnnl_wanted(const dt_node *n) {
    if (!dt_dnnl_bf16_hw()) return 0;
    const char *e = getenv("DTRAIN_ENGINE");
    if (e && *e && strcmp(e, "auto") != 0) return strcmp(e, "onednn") == 0;
    return n->kernel == DT_KERNEL_ONEDNN_BF16; /* a plan's choice; the rule: the fp32 GEMM */
}

unsigned dt_linear_dnnl_kernels(const dt_node *n, int bf16) {
    (void)n;
    return dt_dnnl_bf16_kernels(bf16);
}

static void *make_plan(const dt_node *n, int batch, int mode) {
    (void)mode;
    return dt_linear_dnnl_plan(n, batch);
}
static void free_plan(void *p) { dt_linear_dnnl_free(p); }

dt_linear_dnnl *dt_linear_dnnl_get(dt_node *n, int batch) {
    return dt_linear_dnnl_wanted(n) ? dt_dnnl_node_plan(n, batch, 1, make_plan) : NULL;
}

void dt_linear_dnnl_release(dt_node *n) { dt_dnnl_node_release(n, free_plan); }

dt_status dt_linear_dnnl_prepare(dt_node *n, int batch, int bf16) {
    if (bf16) dt_linear_dnnl_get(n, batch); /* NULL: the fp32 GEMM (said once), not an error */
    return DT_OK;
}

/* (fp32 linear layers are always OpenBLAS's: not named) */
const char *dt_linear_dnnl_engine(const dt_node *n, int bf16) {
    return !bf16 ? NULL : dt_linear_dnnl_wanted(n) ? "oneDNN-bf16" : "own";
}
