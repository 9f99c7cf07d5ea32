/* Dropout: element-wise (dropout) or whole channels (dropout2d), inverted scaling 1/(1-p)
 * in training, identity at evaluation. The mask is kept as the scale of each element. */
#include "layers/layer.h"

#include <stdint.h>
#include <string.h>

#include "layers/bf16_array.h"

/* Under --precision bf16 dropout takes the stored bf16 values (bf16_io: x16, y16, dy16, dx16),
 * each converted, scaled as in fp32 and rounded once: the bits of the fp32 code on fp32 copies
 * (models/precision.c), the same draws in the same order. */
static int dropout_bf16_io(dt_node *n, int batch) {
    (void)n; (void)batch;
    return 1;
}

static dt_status dropout_setup(dt_node *n) {
    if (!(n->p >= 0.0f && n->p < 1.0f))
        return dt_fail(DT_ERR_ARG, "dropout p=%g must be in [0, 1)", (double)n->p);
    n->oc = n->ic; n->oh = n->ih; n->ow = n->iw;
    n->flops = (double)dt_node_in_size(n);
    return DT_OK;
}

static size_t dropout_aux(const dt_node *n, int batch) {
    return (size_t)batch * dt_node_out_size(n) * sizeof(float);
}

/* Elements per mask draw: 1 for dropout, the spatial plane for dropout2d. */
static size_t group_size(const dt_node *n) {
    return n->ops == &dt_layer_dropout2d ? (size_t)n->ih * n->iw : 1;
}

static void dropout_forward(dt_node *n, const dt_pass *p) {
    const size_t len = (size_t)p->batch * dt_node_out_size(n);
    float *mask = n->aux;
    const uint16_t *x16 = p->x16[0];
    if (!p->train || n->p == 0.0f) {
        if (x16) dt_bf16_pass_grad(n->y16, x16, len, 0); /* bf16(float(x)): as the copies' round trip */
        else memcpy(n->y, p->x[0], len * sizeof(float));
        for (size_t i = 0; i < len; i++) mask[i] = 1.0f;
        return;
    }
    const size_t gsz = group_size(n);
    const float scale = 1.0f / (1.0f - n->p);
    const float *x = p->x[0];
    float *y = n->y;
    /* dt_rng_uniform(r) < p, inlined (the same xoroshiro128+ step and the same stream): a call
     * per element cost ~5% of downpour-cnn's step. u = k / 2^24 exactly, so u < p <=> k < p*2^24. */
    const float thr = n->p * 16777216.0f;
    uint64_t s0 = p->rng->s[0], s1 = p->rng->s[1];
    for (size_t g = 0; g < len; g += gsz) {
        const uint64_t r = s0 + s1;
        s1 ^= s0;
        s0 = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
        s1 = (s1 << 37) | (s1 >> 27);
        const float m = (float)(r >> 40) < thr ? 0.0f : scale;
        if (x16)
            for (size_t i = g; i < g + gsz; i++) {
                mask[i] = m;
                n->y16[i] = dt_f32_to_bf16(dt_bf16_to_f32(x16[i]) * m);
            }
        else
            for (size_t i = g; i < g + gsz; i++) {
                mask[i] = m;
                y[i] = x[i] * m;
            }
    }
    p->rng->s[0] = s0;
    p->rng->s[1] = s1;
}

static void dropout_backward(dt_node *n, const dt_pass *p) {
    const size_t len = (size_t)p->batch * dt_node_out_size(n);
    const float *mask = n->aux;
    if (p->x16[0]) {
        uint16_t *dx = p->dx16[0];
        if (!dx) return;
        for (size_t i = 0; i < len; i++) {
            const float g = dt_bf16_to_f32(n->dy16[i]) * mask[i];
            dx[i] = dt_f32_to_bf16(p->dx_acc[0] ? dt_bf16_to_f32(dx[i]) + g : g);
        }
        return;
    }
    if (!p->dx[0]) return;
    float *dx = p->dx[0];
    if (p->dx_acc[0])
        for (size_t i = 0; i < len; i++) dx[i] += n->dy[i] * mask[i];
    else
        for (size_t i = 0; i < len; i++) dx[i] = n->dy[i] * mask[i];
}

const dt_layer_ops dt_layer_dropout = {
    .kind = "dropout", .auto_prefix = "dropout", .ninputs = 1, .setup = dropout_setup,
    .forward = dropout_forward, .backward = dropout_backward, .aux_bytes = dropout_aux,
    .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y, .bf16_io = dropout_bf16_io,
    .seq = DT_SEQ_ANY,
};
const dt_layer_ops dt_layer_dropout2d = {
    .kind = "dropout2d", .auto_prefix = "dropout", .ninputs = 1, .setup = dropout_setup,
    .forward = dropout_forward, .backward = dropout_backward, .aux_bytes = dropout_aux,
    .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y, .bf16_io = dropout_bf16_io,
};
