/* Learned position embedding: adds a weight [T, C] to every example's sequence [T][C] (GPT-2's
 * wpe: nanoGPT's tok_emb + pos_emb, with the model's whole context as T). */
#include "layers/layer.h"

#include <string.h>

static dt_status posembed_setup(dt_node *n) {
    n->oc = n->ic; n->oh = n->ih; n->ow = 1;
    n->nparam = 1;
    n->ptens[0] = (dt_ptensor){"weight", 2, {n->ih, n->ic, 0, 0}};
    n->flops = (double)n->ih * n->ic;
    return DT_OK;
}

/* as nn.Embedding: N(0, 1) unless std= says otherwise (nanoGPT: 0.02) */
static void posembed_init(dt_node *n, dt_rng *rng) {
    dt_init_normal(n->w[0], dt_ptensor_numel(&n->ptens[0]), n->std > 0 ? n->std : 1.0f, rng);
}

static void posembed_forward(dt_node *n, const dt_pass *p) {
    const size_t len = dt_node_out_size(n);
    const float *w = n->w[0];
    for (int b = 0; b < p->batch; b++) {
        const float *x = p->x[0] + b * len;
        float *y = n->y + b * len;
        for (size_t i = 0; i < len; i++) y[i] = x[i] + w[i];
    }
}

static void posembed_backward(dt_node *n, const dt_pass *p) {
    const size_t len = dt_node_out_size(n);
    float *g = n->g[0];
    memcpy(g, n->dy, len * sizeof(float));
    for (int b = 1; b < p->batch; b++) {
        const float *dy = n->dy + b * len;
        for (size_t i = 0; i < len; i++) g[i] += dy[i];
    }
    if (p->dx[0]) dt_store(p->dx[0], n->dy, (size_t)p->batch * len, p->dx_acc[0]);
}

const dt_layer_ops dt_layer_posembed = {
    .kind = "posembed", .auto_prefix = "posembed", .ninputs = 1, .setup = posembed_setup, .init = posembed_init,
    .forward = posembed_forward, .backward = posembed_backward, .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y,
    .seq = DT_SEQ_ONLY,
};
