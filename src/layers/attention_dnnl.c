/* Attention's products in oneDNN's bf16 matmul (attention_dnnl.h); checked against the layer's
 * own fp32 products on the same bf16 values in tests/test_conv_dnnl.c. */
#include "layers/attention_dnnl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "layers/dnnl_op.h"

#define TRY DT_DNNL_TRY

enum { M_Q, M_K, M_V, M_KT, M_VT, M_Y, M_DY, M_DQ, M_DK, M_DV, M_P, M_PT, M_DS, M_DST, NMEM };

struct dt_attn_dnnl {
    dt_dnnl_op scores, mix, dp, dq, dk, dv;
    dnnl_memory_t mem[NMEM]; /* the user's fp32 views (handles set at each call) */
    float *dP;               /* [b][h][T][T]: dP, then dS in place */
    int C;
    char impl[256];
};

/* An fp32 view [B][H][rows][cols] with these strides */
static dnnl_status_t view(dnnl_memory_desc_t *md, dnnl_dim_t B, dnnl_dim_t H, dnnl_dim_t rows, dnnl_dim_t cols, dnnl_dim_t sb,
                          dnnl_dim_t sh, dnnl_dim_t sr, dnnl_dim_t sc) {
    const dnnl_dims_t d = {B, H, rows, cols}, s = {sb, sh, sr, sc};
    return dnnl_memory_desc_init_by_strides(md, 4, d, dnnl_f32, s);
}

/* dst = scale * src x wei, per (example, head): bf16 operands (oneDNN's choice of layout),
 * the fp32 dst the user's */
static dnnl_status_t product(dt_dnnl_op *o, float scale, dnnl_memory_t src, dnnl_memory_t wei, dnnl_memory_t dst,
                             char *impl, size_t cap) {
    const dnnl_memory_desc_t *us, *uw;
    dnnl_memory_desc_t s16, w16;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t s = dnnl_memory_get_memory_desc(src, &us);
    if (s == dnnl_success) s = dnnl_memory_get_memory_desc(wei, &uw);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&s16, 4, us->dims, dnnl_bf16, dnnl_format_tag_any);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&w16, 4, uw->dims, dnnl_bf16, dnnl_format_tag_any);
    if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && scale != 1.0f) s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale);
    if (s == dnnl_success) s = dt_dnnl_matmul(o, attr, &s16, src, &w16, wei, NULL, dst, impl, cap);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s;
}

static void attn_dnnl_free(dt_attn_dnnl *a) {
    if (!a) return;
    dt_dnnl_op *ops[6] = {&a->scores, &a->mix, &a->dp, &a->dq, &a->dk, &a->dv};
    for (int i = 0; i < 6; i++) dt_dnnl_op_free(ops[i]);
    for (int i = 0; i < NMEM; i++)
        if (a->mem[i]) dnnl_memory_destroy(a->mem[i]);
    free(a->dP);
    free(a);
}

static dt_attn_dnnl *attn_dnnl_plan(const dt_node *n, int batch) {
    const dnnl_engine_t engine = dt_dnnl_engine();
    if (!engine) return NULL;
    dt_attn_dnnl *a = calloc(1, sizeof *a);
    if (!a) { dt_nomem("a oneDNN attention plan"); return NULL; }
    const dnnl_dim_t B = batch, T = n->ih, C = n->oc, H = n->heads, D = C / H, C3 = 3 * C;
    a->C = (int)C;
    const size_t tt = (size_t)batch * H * T * T;
    a->dP = malloc(tt * sizeof *a->dP);
    if (!a->dP) { dt_nomem("oneDNN attention's dP of %zu floats", tt); attn_dnnl_free(a); return NULL; }
    dnnl_memory_desc_t md[NMEM];
    /* Q, K, V (and their gradients) in place in [b][T][3C]: head h's D features at h*D */
    TRY(view(&md[M_Q], B, H, T, D, T * C3, D, C3, 1));
    md[M_K] = md[M_V] = md[M_DQ] = md[M_DK] = md[M_DV] = md[M_Q];
    TRY(view(&md[M_KT], B, H, D, T, T * C3, D, 1, C3));
    md[M_VT] = md[M_KT];
    TRY(view(&md[M_Y], B, H, T, D, T * C, D, C, 1));
    md[M_DY] = md[M_Y];
    TRY(view(&md[M_P], B, H, T, T, H * T * T, T * T, T, 1));
    md[M_DS] = md[M_P];
    TRY(view(&md[M_PT], B, H, T, T, H * T * T, T * T, 1, T));
    md[M_DST] = md[M_PT];
    for (int i = 0; i < NMEM; i++) TRY(dnnl_memory_create(&a->mem[i], &md[i], engine, DNNL_MEMORY_NONE));
    const float scale = 1.0f / sqrtf((float)D);
    dnnl_memory_t *m = a->mem;
    TRY(product(&a->scores, scale, m[M_Q], m[M_KT], m[M_P], a->impl, sizeof a->impl));
    TRY(product(&a->mix, 1.0f, m[M_P], m[M_V], m[M_Y], a->impl, sizeof a->impl));
    TRY(product(&a->dp, 1.0f, m[M_DY], m[M_VT], m[M_DS], a->impl, sizeof a->impl));
    TRY(product(&a->dq, scale, m[M_DS], m[M_K], m[M_DQ], a->impl, sizeof a->impl));
    TRY(product(&a->dk, scale, m[M_DST], m[M_Q], m[M_DK], a->impl, sizeof a->impl));
    TRY(product(&a->dv, 1.0f, m[M_PT], m[M_DY], m[M_DV], a->impl, sizeof a->impl));
    return a;
fail:
    attn_dnnl_free(a);
    return NULL;
}

static dt_status done(dnnl_status_t s, const char *what) {
    return s == dnnl_success ? DT_OK : dt_fail(DT_ERR_STATE, "oneDNN attention: %s failed (status %d)", what, (int)s);
}

dt_status dt_attn_dnnl_scores(dt_attn_dnnl *a, const float *x, float *P) {
    dnnl_status_t s = dt_dnnl_set(a->mem[M_Q], x);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_KT], x + a->C);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_P], P);
    if (s == dnnl_success) s = dt_dnnl_op_run(&a->scores, 0);
    return done(s, "Q K^T");
}

dt_status dt_attn_dnnl_mix(dt_attn_dnnl *a, const float *P, const float *x, float *y) {
    dnnl_status_t s = dt_dnnl_set(a->mem[M_P], P);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_V], x + 2 * a->C);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_Y], y);
    if (s == dnnl_success) s = dt_dnnl_op_run(&a->mix, 0);
    return done(s, "P V");
}

float *dt_attn_dnnl_dP(dt_attn_dnnl *a, const float *dy, const float *x) {
    dnnl_status_t s = dt_dnnl_set(a->mem[M_DY], dy);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_VT], x + 2 * a->C);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_DS], a->dP);
    if (s == dnnl_success) s = dt_dnnl_op_run(&a->dp, 0);
    return done(s, "dY V^T") == DT_OK ? a->dP : NULL;
}

dt_status dt_attn_dnnl_grads(dt_attn_dnnl *a, const float *P, const float *x, const float *dy, float *dx) {
    const int C = a->C;
    dnnl_status_t s = dt_dnnl_set(a->mem[M_DS], a->dP);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_K], x + C);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_DQ], dx);
    if (s == dnnl_success) s = dt_dnnl_op_run(&a->dq, 0);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_DST], a->dP);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_Q], x);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_DK], dx + C);
    if (s == dnnl_success) s = dt_dnnl_op_run(&a->dk, 0);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_PT], P);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_DY], dy);
    if (s == dnnl_success) s = dt_dnnl_set(a->mem[M_DV], dx + 2 * C);
    if (s == dnnl_success) s = dt_dnnl_op_run(&a->dv, 0);
    return done(s, "dQ, dK, dV");
}

const char *dt_attn_dnnl_impl(const dt_attn_dnnl *a) { return a ? a->impl : ""; }

/* A plan's choice only: no rule picks it (on a Zen 5 with AVX512_BF16, no AMX, its full products
 * took 19.2 ms a step of gpt-small's attention layer at batch 8, OpenBLAS's fp32 ones over the
 * causal blocks 15.3; gpt-tiny 3.0 and 2.4), and DTRAIN_ENGINE does not: rounding P and dS to
 * bf16 computes other values than the rule's fp32 products (test_oracle's bf16 oracle) */
static int wanted(const dt_node *n) { return n->kernel == DT_KERNEL_ONEDNN_BF16 && dt_dnnl_bf16_hw(); }

unsigned dt_attn_dnnl_kernels(const dt_node *n, int bf16) {
    (void)n;
    return dt_dnnl_bf16_kernels(bf16);
}

const char *dt_attn_dnnl_engine(const dt_node *n, int bf16) { return !bf16 ? NULL : wanted(n) ? "oneDNN-bf16" : "own"; }

static void *make_plan(const dt_node *n, int batch, int mode) {
    (void)mode;
    return attn_dnnl_plan(n, batch);
}
static void free_plan(void *p) { attn_dnnl_free(p); }

dt_attn_dnnl *dt_attn_dnnl_get(dt_node *n, int batch, int bf16) {
    return bf16 && wanted(n) ? dt_dnnl_node_plan(n, batch, 1, make_plan) : NULL;
}

/* made at dt_model_reserve, so the steps allocate nothing (NULL: the own products, said once) */
dt_status dt_attn_dnnl_prepare(dt_node *n, int batch, int bf16) {
    dt_attn_dnnl_get(n, batch, bf16);
    return DT_OK;
}

void dt_attn_dnnl_release(dt_node *n) { dt_dnnl_node_release(n, free_plan); }
