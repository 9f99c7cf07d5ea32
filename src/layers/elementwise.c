/* Shape-preserving layers without parameters: ReLU, residual add, flatten. */
#include "layers/layer.h"

#include <string.h>

#include "layers/bf16_array.h"

static dt_status same_shape(dt_node *n) {
    n->oc = n->ic; n->oh = n->ih; n->ow = n->iw;
    n->flops = (double)dt_node_in_size(n);
    return DT_OK;
}

/* Under --precision bf16 these layers take their activations as stored (bf16_io, p->x16):
 * the bf16 forms give the bits the fp32 code gives on fp32 copies (bf16_array.h), without the
 * copies (models/precision.c). */
static int always_bf16(dt_node *n, int batch) {
    (void)n; (void)batch;
    return 1;
}

static void relu_forward(dt_node *n, const dt_pass *p) {
    const size_t len = (size_t)p->batch * dt_node_out_size(n);
    if (p->x16[0]) { dt_bf16_relu(n->y16, p->x16[0], len); return; }
    const float *x = p->x[0];
    float *y = n->y;
    for (size_t i = 0; i < len; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void relu_backward(dt_node *n, const dt_pass *p) {
    const size_t len = (size_t)p->batch * dt_node_out_size(n);
    if (p->x16[0]) {
        if (p->dx16[0]) dt_bf16_relu_grad(p->dx16[0], n->y16, n->dy16, len, p->dx_acc[0]);
        return;
    }
    if (!p->dx[0]) return;
    const float *y = n->y, *dy = n->dy;
    float *dx = p->dx[0];
    /* dy[i] read unconditionally: a load only where y > 0 vectorises only with masked loads
     * (AVX-512), and the portable build's scalar branch on y's sign mispredicted (25% of
     * downpour-cnn's time) */
    if (p->dx_acc[0])
        for (size_t i = 0; i < len; i++) { const float g = dy[i]; dx[i] += y[i] > 0.0f ? g : 0.0f; }
    else
        for (size_t i = 0; i < len; i++) { const float g = dy[i]; dx[i] = y[i] > 0.0f ? g : 0.0f; }
}

/* The graph checks that both inputs have the same shape. */
static void add_forward(dt_node *n, const dt_pass *p) {
    const size_t len = (size_t)p->batch * dt_node_out_size(n);
    if (p->x16[0]) { dt_bf16_add(n->y16, p->x16[0], p->x16[1], len); return; }
    const float *a = p->x[0], *b = p->x[1];
    for (size_t i = 0; i < len; i++) n->y[i] = a[i] + b[i];
}

static void add_backward(dt_node *n, const dt_pass *p) {
    const size_t len = (size_t)p->batch * dt_node_out_size(n);
    for (int j = 0; j < 2; j++)
        if (p->x16[0] && p->dx16[j]) dt_bf16_pass_grad(p->dx16[j], n->dy16, len, p->dx_acc[j]);
        else if (p->dx[j]) dt_store(p->dx[j], n->dy, len, p->dx_acc[j]);
}

/* a sequence's [T][C] becomes T*C features, position-major (PyTorch's flatten(1) of [B, T, C]) */
static dt_status flatten_setup(dt_node *n) {
    n->oc = (int)dt_node_in_size(n); n->oh = 1; n->ow = 1;
    n->seq = 0;
    n->flops = 0;
    return DT_OK;
}

static void copy_forward(dt_node *n, const dt_pass *p) {
    if (p->x16[0]) { dt_bf16_pass_grad(n->y16, p->x16[0], (size_t)p->batch * dt_node_out_size(n), 0); return; }
    memcpy(n->y, p->x[0], (size_t)p->batch * dt_node_out_size(n) * sizeof(float));
}

static void copy_backward(dt_node *n, const dt_pass *p) {
    if (p->x16[0] && p->dx16[0]) dt_bf16_pass_grad(p->dx16[0], n->dy16, (size_t)p->batch * dt_node_out_size(n), p->dx_acc[0]);
    else if (p->dx[0]) dt_store(p->dx[0], n->dy, (size_t)p->batch * dt_node_out_size(n), p->dx_acc[0]);
}

const dt_layer_ops dt_layer_relu = {
    .kind = "relu", .auto_prefix = "relu", .ninputs = 1, .setup = same_shape,
    .forward = relu_forward, .backward = relu_backward, .bwd_skips = DT_SKIPS_X, .bf16_io = always_bf16,
    .seq = DT_SEQ_ANY,
};
const dt_layer_ops dt_layer_add = {
    .kind = "add", .auto_prefix = "add", .ninputs = 2, .setup = same_shape,
    .forward = add_forward, .backward = add_backward, .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y, .bf16_io = always_bf16,
    .seq = DT_SEQ_ANY,
};
const dt_layer_ops dt_layer_flatten = {
    .kind = "flatten", .auto_prefix = "flatten", .ninputs = 1, .setup = flatten_setup,
    .forward = copy_forward, .backward = copy_backward, .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y, .bf16_io = always_bf16,
    .seq = DT_SEQ_ANY,
};
