/* Convolutions through oneDNN (conv_dnnl.h): the primitives, their memories and reorders,
 * checked against dtrain's own path (tests/test_conv_dnnl.c); which layers take this path is
 * dt_conv_dnnl_wanted's rule (bench/dnnl-conv measures it per layer). */
#include "layers/conv_dnnl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "layers/dnnl_op.h"

#define op dt_dnnl_op
#define TRY DT_DNNL_TRY

struct dt_conv_dnnl {
    op fwd, bwd_data, bwd_weights;
    int mode; /* DT_CONV_FP32, DT_CONV_BF16 (fp32 user memories), DT_CONV_BF16_IO (bf16 ones) */
    int dy_once; /* the backward ops share dY's reorder (dt_dnnl_op_shares_first) */
    dnnl_memory_t x, y, w, b, dy, dx, dw, db; /* the user's, handles set at each call */
    int bias;
    char impl[256];
};

/* A 3x3 stride-1 layer, for which fp32 plans ask for oneDNN's Winograd (unless DTRAIN_WINOGRAD=0) */
static int winograd_shape(const dt_node *n) {
    const char *we = getenv("DTRAIN_WINOGRAD");
    return n->k == 3 && n->stride == 1 && !(we && strcmp(we, "0") == 0);
}

/* The backward ops' attributes and the forward's, which carries the ReLU the graph fused into
 * this node; scratchpads are the user's (dt_dnnl_op) */
static int create_attrs(const dt_node *n, dnnl_primitive_attr_t *attr_, dnnl_primitive_attr_t *fattr_,
                        dnnl_post_ops_t *relu_) {
    dnnl_primitive_attr_t attr = NULL, fattr = NULL;
    dnnl_post_ops_t relu = NULL;
    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    TRY(dnnl_primitive_attr_create(&fattr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(fattr, dnnl_scratchpad_mode_user));
    if (n->relu_out) { /* the ReLU the graph fused into this node, as oneDNN's post-op */
        TRY(dnnl_post_ops_create(&relu));
        TRY(dnnl_post_ops_append_eltwise(relu, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
        TRY(dnnl_primitive_attr_set_post_ops(fattr, relu));
    }
    *attr_ = attr; *fattr_ = fattr; *relu_ = relu;
    return 1;
fail: /* the caller destroys what was made */
    *attr_ = attr; *fattr_ = fattr; *relu_ = relu;
    return 0;
}

/* The forward, backward-data and backward-weights primitive descriptors, Winograd first where
 * wino: each pass keeps the first algorithm oneDNN has for it (a NULL one: none at all) */
static int create_pds(int wino, int bias, const dnnl_memory_desc_t *xa, const dnnl_memory_desc_t *wa,
                      const dnnl_memory_desc_t *dwa, const dnnl_memory_desc_t *ba, const dnnl_memory_desc_t *ya,
                      const dnnl_dims_t st, const dnnl_dims_t pl, const dnnl_dims_t pr, dnnl_primitive_attr_t attr,
                      dnnl_primitive_attr_t fattr, dnnl_engine_t engine, dnnl_primitive_desc_t *fpd_,
                      dnnl_primitive_desc_t *bdpd_, dnnl_primitive_desc_t *bwpd_) {
    dnnl_primitive_desc_t fpd = NULL, bdpd = NULL, bwpd = NULL;
    dnnl_convolution_desc_t fd, bdd, bwd;
    for (int alg = wino; alg >= 0; alg--) {
        const dnnl_alg_kind_t a = alg ? dnnl_convolution_winograd : dnnl_convolution_direct;
        TRY(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, a, xa, wa, bias ? ba : NULL, ya, st,
                                               pl, pr));
        if (!fpd && dnnl_primitive_desc_create(&fpd, &fd, fattr, engine, NULL) != dnnl_success) fpd = NULL;
        TRY(dnnl_convolution_backward_data_desc_init(&bdd, a, xa, wa, ya, st, pl, pr));
        if (fpd && !bdpd && dnnl_primitive_desc_create(&bdpd, &bdd, attr, engine, fpd) != dnnl_success) bdpd = NULL;
        TRY(dnnl_convolution_backward_weights_desc_init(&bwd, a, xa, dwa, bias ? ba : NULL, ya, st, pl, pr));
        if (fpd && !bwpd && dnnl_primitive_desc_create(&bwpd, &bwd, attr, engine, fpd) != dnnl_success) bwpd = NULL;
    }
    *fpd_ = fpd; *bdpd_ = bdpd; *bwpd_ = bwpd;
    return 1;
fail: /* the caller destroys what was made */
    *fpd_ = fpd; *bdpd_ = bdpd; *bwpd_ = bwpd;
    return 0;
}

/* The user's memories (handles set at each call) and each op's arguments over them */
static int bind_memories(dt_conv_dnnl *p, dnnl_engine_t engine, const_dnnl_primitive_desc_t fpd,
                         const_dnnl_primitive_desc_t bdpd, const_dnnl_primitive_desc_t bwpd,
                         const dnnl_memory_desc_t *xu, const dnnl_memory_desc_t *yu, const dnnl_memory_desc_t *wu,
                         const dnnl_memory_desc_t *bu) {
    dnnl_memory_t *mems[8] = {&p->x, &p->y, &p->w, &p->b, &p->dy, &p->dx, &p->dw, &p->db};
    const dnnl_memory_desc_t *mds[8] = {xu, yu, wu, bu, yu, xu, wu, bu};
    for (int i = 0; i < 8; i++) TRY(dnnl_memory_create(mems[i], mds[i], engine, DNNL_MEMORY_NONE));
    TRY(dt_dnnl_op_arg(&p->fwd, fpd, dnnl_query_src_md, 0, DNNL_ARG_SRC, p->x, 0, 0));
    TRY(dt_dnnl_op_arg(&p->fwd, fpd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, p->w, 0, 0));
    if (p->bias) TRY(dt_dnnl_op_arg(&p->fwd, fpd, dnnl_query_weights_md, 1, DNNL_ARG_BIAS, p->b, 0, 0));
    TRY(dt_dnnl_op_arg(&p->fwd, fpd, dnnl_query_dst_md, 0, DNNL_ARG_DST, p->y, 1, 0));
    TRY(dt_dnnl_op_arg(&p->bwd_data, bdpd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, p->dy, 0, 0));
    TRY(dt_dnnl_op_arg(&p->bwd_data, bdpd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, p->w, 0, 0));
    /* dX may be added to (a second consumer's gradient): on its way out of oneDNN's layout, or
     * from oneDNN's own memory where that is the caller's layout */
    TRY(dt_dnnl_op_arg(&p->bwd_data, bdpd, dnnl_query_diff_src_md, 0, DNNL_ARG_DIFF_SRC, p->dx, 1, 1));
    /* dY first in both backward ops: reordered once for both where they want one layout */
    TRY(dt_dnnl_op_arg(&p->bwd_weights, bwpd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, p->dy, 0, 0));
    TRY(dt_dnnl_op_arg(&p->bwd_weights, bwpd, dnnl_query_src_md, 0, DNNL_ARG_SRC, p->x, 0, 0));
    TRY(dt_dnnl_op_arg(&p->bwd_weights, bwpd, dnnl_query_diff_weights_md, 0, DNNL_ARG_DIFF_WEIGHTS, p->dw, 1, 0));
    if (p->bias) TRY(dt_dnnl_op_arg(&p->bwd_weights, bwpd, dnnl_query_diff_weights_md, 1, DNNL_ARG_DIFF_BIAS, p->db, 1, 0));
    return 1;
fail:
    return 0;
}

dt_conv_dnnl *dt_conv_dnnl_plan(const dt_node *n, int batch, int mode) {
    const int bf16 = mode == DT_CONV_BF16 || mode == DT_CONV_BF16_IO, io16 = mode == DT_CONV_BF16_IO;
    const dnnl_engine_t engine = dt_dnnl_engine();
    if (!engine) return NULL;
    dt_conv_dnnl *p = calloc(1, sizeof *p);
    if (!p) { dt_nomem("a oneDNN convolution plan"); return NULL; }
    dnnl_primitive_desc_t fpd = NULL, bdpd = NULL, bwpd = NULL;
    dnnl_primitive_attr_t attr = NULL, fattr = NULL;
    dnnl_post_ops_t relu = NULL;
    p->bias = n->bias;
    p->mode = mode;
    const dnnl_dims_t xs = {batch, n->ic, n->ih, n->iw}, ys = {batch, n->oc, n->oh, n->ow},
                      ws = {n->oc, n->ic, n->k, n->k}, bs = {n->oc}, st = {n->stride, n->stride},
                      pl = {n->pad, n->pad},
                      /* the padding on the far side that makes oneDNN's output size dtrain's */
                      pr = {(n->oh - 1) * n->stride + n->k - n->ih - n->pad, (n->ow - 1) * n->stride + n->k - n->iw - n->pad};
    /* bf16: the activations, their gradients and the weights in bf16 inside, the weight and
     * bias gradients fp32 (oneDNN sums in fp32); the user's activations and their gradients
     * bf16 (DT_CONV_BF16_IO: the model's stored ones) or fp32, its parameters fp32 */
    const dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32, ut = io16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t xu, yu, wu, bu, xa, ya, wa, dwa, ba;
    TRY(dnnl_memory_desc_init_by_tag(&xu, 4, xs, ut, dnnl_nchw));
    TRY(dnnl_memory_desc_init_by_tag(&yu, 4, ys, ut, dnnl_nchw));
    TRY(dnnl_memory_desc_init_by_tag(&wu, 4, ws, dnnl_f32, dnnl_oihw));
    TRY(dnnl_memory_desc_init_by_tag(&bu, 1, bs, dnnl_f32, dnnl_x));
    TRY(dnnl_memory_desc_init_by_tag(&xa, 4, xs, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&ya, 4, ys, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&wa, 4, ws, dt, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&dwa, 4, ws, dnnl_f32, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&ba, 1, bs, dnnl_f32, dnnl_format_tag_any));
    if (!create_attrs(n, &attr, &fattr, &relu)) goto fail;
    /* oneDNN's Winograd F(4x4, 3x3) for fp32 3x3 stride-1 layers, where it has one (AVX-512; each
     * pass falls back to direct where it has none): 1.4x resnet18-cifar's and 1.8x alexnet-cifar's
     * training steps here (docs/results.md, issue 32); DTRAIN_WINOGRAD=0 turns it off. */
    const int wino = !bf16 && mode != DT_CONV_FP32_DIRECT && winograd_shape(n);
    if (!create_pds(wino, p->bias, &xa, &wa, &dwa, &ba, &ya, st, pl, pr, attr, fattr, engine, &fpd, &bdpd, &bwpd))
        goto fail;
    if (!fpd || !bdpd || !bwpd) {
        dt_fail(DT_ERR_STATE, "oneDNN: no convolution for %s (batch %d)", n->name, batch);
        goto fail;
    }
    TRY(dt_dnnl_op_make(&p->fwd, fpd));
    TRY(dt_dnnl_op_make(&p->bwd_data, bdpd));
    TRY(dt_dnnl_op_make(&p->bwd_weights, bwpd));
    if (!bind_memories(p, engine, fpd, bdpd, bwpd, &xu, &yu, &wu, &bu)) goto fail;
    if (!dt_dnnl_op_fit(&p->fwd) || !dt_dnnl_op_fit(&p->bwd_data) || !dt_dnnl_op_fit(&p->bwd_weights)) {
        dt_nomem("a oneDNN convolution's memories");
        goto fail;
    }
    p->dy_once = dt_dnnl_op_shares_first(&p->bwd_data, &p->bwd_weights);
    snprintf(p->impl, sizeof p->impl, "%s / %s / %s", dt_dnnl_impl(fpd), dt_dnnl_impl(bdpd), dt_dnnl_impl(bwpd));
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bdpd);
    dnnl_primitive_desc_destroy(bwpd);
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_attr_destroy(fattr);
    if (relu) dnnl_post_ops_destroy(relu);
    return p;
fail:
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bdpd) dnnl_primitive_desc_destroy(bdpd);
    if (bwpd) dnnl_primitive_desc_destroy(bwpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (fattr) dnnl_primitive_attr_destroy(fattr);
    if (relu) dnnl_post_ops_destroy(relu);
    dt_conv_dnnl_free(p);
    return NULL;
}

void dt_conv_dnnl_free(dt_conv_dnnl *p) {
    if (!p) return;
    dt_dnnl_op_free(&p->fwd);
    dt_dnnl_op_free(&p->bwd_data);
    dt_dnnl_op_free(&p->bwd_weights);
    dnnl_memory_t mems[8] = {p->x, p->y, p->w, p->b, p->dy, p->dx, p->dw, p->db};
    for (int i = 0; i < 8; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(p);
}

const char *dt_conv_dnnl_impl(const dt_conv_dnnl *p) { return p ? p->impl : ""; }

/* The forward and backward passes on the user's memories, fp32 or bf16 by the plan's mode
 * (oneDNN takes every handle as void *: the inputs are only read). */
static dt_status forward(dt_conv_dnnl *p, int io16, const void *x, const float *w, const float *b, void *y) {
    if (io16 != (p->mode == DT_CONV_BF16_IO))
        return dt_fail(DT_ERR_ARG, "oneDNN convolution: a plan %s bf16 activations", io16 ? "without" : "with");
    dnnl_status_t s = dnnl_memory_set_data_handle(p->x, (void *)x);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle(p->w, (void *)w);
    if (s == dnnl_success && p->bias) s = dnnl_memory_set_data_handle(p->b, (void *)b);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle(p->y, y);
    if (s == dnnl_success) s = dt_dnnl_op_run(&p->fwd, 0);
    return s == dnnl_success ? DT_OK : dt_fail(DT_ERR_STATE, "oneDNN convolution forward failed (status %d)", (int)s);
}

static dt_status backward(dt_conv_dnnl *p, int io16, const void *x, const float *w, const void *dy, void *dx,
                          int dx_acc, float *dw, float *db) {
    if (io16 != (p->mode == DT_CONV_BF16_IO))
        return dt_fail(DT_ERR_ARG, "oneDNN convolution: a plan %s bf16 activations", io16 ? "without" : "with");
    dnnl_status_t s = dnnl_memory_set_data_handle(p->x, (void *)x);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle(p->w, (void *)w);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle(p->dy, (void *)dy);
    if (s == dnnl_success) s = dnnl_memory_set_data_handle(p->dw, dw);
    if (s == dnnl_success && p->bias) s = dnnl_memory_set_data_handle(p->db, db);
    if (s == dnnl_success && dx) s = dnnl_memory_set_data_handle(p->dx, dx);
    if (s == dnnl_success && dx && p->dy_once) {
        s = dt_dnnl_op_run_pair(&p->bwd_data, dx_acc, &p->bwd_weights);
    } else {
        if (s == dnnl_success) s = dt_dnnl_op_run(&p->bwd_weights, 0);
        if (s == dnnl_success && dx) s = dt_dnnl_op_run(&p->bwd_data, dx_acc);
    }
    return s == dnnl_success ? DT_OK : dt_fail(DT_ERR_STATE, "oneDNN convolution backward failed (status %d)", (int)s);
}

dt_status dt_conv_dnnl_forward(dt_conv_dnnl *p, const float *x, const float *w, const float *b, float *y) {
    return forward(p, 0, x, w, b, y);
}

dt_status dt_conv_dnnl_backward(dt_conv_dnnl *p, const float *x, const float *w, const float *dy, float *dx,
                                int dx_acc, float *dw, float *db) {
    return backward(p, 0, x, w, dy, dx, dx_acc, dw, db);
}

dt_status dt_conv_dnnl_forward16(dt_conv_dnnl *p, const uint16_t *x, const float *w, const float *b, uint16_t *y) {
    return forward(p, 1, x, w, b, y);
}

dt_status dt_conv_dnnl_backward16(dt_conv_dnnl *p, const uint16_t *x, const float *w, const uint16_t *dy, uint16_t *dx,
                                  int dx_acc, float *dw, float *db) {
    return backward(p, 1, x, w, dy, dx, dx_acc, dw, db);
}

/* DTRAIN_ENGINE: "own", "onednn" or "auto" (the rule; also when unset). Read at each
 * call (a conv's work dwarfs a getenv), so that a program may switch it between models. */
static int engine_setting(void) {
    const char *e = getenv("DTRAIN_ENGINE");
    const int setting = !e || !*e || strcmp(e, "auto") == 0 ? DT_CONV_AUTO
                        : strcmp(e, "own") == 0             ? DT_CONV_OWN
                        : strcmp(e, "onednn") == 0          ? DT_CONV_ONEDNN
                                                            : DT_CONV_BAD;
    static int warned;
    if (setting == DT_CONV_BAD && !warned++)
        fprintf(stderr, "dtrain: warning: DTRAIN_ENGINE=%s: expected own, onednn or auto; auto\n", e);
    return setting == DT_CONV_BAD ? DT_CONV_AUTO : setting;
}

int dt_conv_dnnl_wanted(const dt_node *n, int bf16) {
    switch (engine_setting()) {
    case DT_CONV_OWN: return 0;
    case DT_CONV_ONEDNN: return 1;
    default:
        /* The rule, from bench/dnnl-conv (docs/results.md): oneDNN's direct convolutions win
         * from 64 input channels on (every resnet18-cifar and alexnet-cifar layer after the
         * first); below, its reorders and blocking cost more than they save and dtrain's own
         * (im2col + GEMM, Winograd) wins (cnn1, downpour-cnn, the first layers). Under bf16 on
         * a CPU with bf16 arithmetic oneDNN's bf16 kernels do half the work per value: every
         * layer with 16 input channels or more. Where oneDNN has its Winograd (AVX-512) for a
         * 3x3 stride-1 layer, from 32 input channels: downpour-cnn's conv2 (32 -> 64) 1.66x
         * dtrain's own there, on the Intel Xeon of issue 32's second part (its first layers,
         * 1 and 3 channels, 0.2-0.4x). A rule of the shape, not a timing: every rank, every
         * restart and every run choose alike, so the results are the same bit for bit. */
        if (bf16 && dt_dnnl_bf16_hw()) return n->ic >= 16;
        return n->ic >= (winograd_shape(n) && dt_dnnl_winograd_hw() ? 32 : 64);
    }
}

static void *make_plan(const dt_node *n, int batch, int mode) { return dt_conv_dnnl_plan(n, batch, mode); }
static void free_plan(void *p) { dt_conv_dnnl_free(p); }

int dt_conv_dnnl_kernel(const dt_node *n, int bf16) {
    const int hw = bf16 && dt_dnnl_bf16_hw();
    switch (engine_setting()) {
    case DT_CONV_OWN: return DT_KERNEL_OWN;
    case DT_CONV_ONEDNN: return hw ? DT_KERNEL_ONEDNN_BF16 : DT_KERNEL_ONEDNN;
    default:
        if (n->kernel == DT_KERNEL_ONEDNN_BF16 && !hw) return DT_KERNEL_ONEDNN;
        if (n->kernel != DT_KERNEL_RULE) return n->kernel;
        return !dt_conv_dnnl_wanted(n, bf16) ? DT_KERNEL_OWN : hw ? DT_KERNEL_ONEDNN_BF16 : DT_KERNEL_ONEDNN;
    }
}

dt_conv_dnnl *dt_conv_dnnl_get(dt_node *n, int batch, int mode) {
    switch (dt_conv_dnnl_kernel(n, mode != DT_CONV_FP32)) {
    case DT_KERNEL_ONEDNN:
        if (mode == DT_CONV_BF16_IO) return NULL;
        mode = DT_CONV_FP32; /* under bf16: fp32 kernels on the bf16-rounded values */
        break;
    case DT_KERNEL_ONEDNN_DIRECT:
        if (mode == DT_CONV_BF16_IO) return NULL;
        mode = DT_CONV_FP32_DIRECT;
        break;
    case DT_KERNEL_ONEDNN_BF16: break;
    default: return NULL;
    }
    return dt_dnnl_node_plan(n, batch, mode, make_plan);
}

unsigned dt_conv_dnnl_kernels(const dt_node *n, int bf16) {
    if (!dt_dnnl_engine()) return 0;
    /* onednn-direct: where onednn is its Winograd */
    return 1u << DT_KERNEL_ONEDNN | (bf16 && dt_dnnl_bf16_hw() ? 1u << DT_KERNEL_ONEDNN_BF16 : 0) |
           (winograd_shape(n) && dt_dnnl_winograd_hw() ? 1u << DT_KERNEL_ONEDNN_DIRECT : 0);
}

void dt_conv_dnnl_release(dt_node *n) { dt_dnnl_node_release(n, free_plan); }

int dt_conv_dnnl_bf16_io(dt_node *n, int batch) {
    return n->in[0] >= 0 && dt_conv_dnnl_get(n, batch, DT_CONV_BF16_IO) != NULL;
}

dt_status dt_conv_dnnl_prepare(dt_node *n, int batch, int bf16) {
    /* NULL: the own path (said once), not an error */
    if (!bf16 || !dt_conv_dnnl_bf16_io(n, batch)) dt_conv_dnnl_get(n, batch, bf16 ? DT_CONV_BF16 : DT_CONV_FP32);
    return DT_OK;
}

const char *dt_conv_dnnl_engine(const dt_node *n, int bf16) {
    const int k = dt_conv_dnnl_kernel(n, bf16);
    if (k == DT_KERNEL_ONEDNN_BF16) return "oneDNN-bf16";
    return k == DT_KERNEL_ONEDNN || k == DT_KERNEL_ONEDNN_DIRECT ? "oneDNN" : "own";
}
