/* Token embedding (nn.Embedding): the model input's T token ids -> [T][C], row id of the weight
 * [vocab, C] at each position. It reads the model input itself (token ids: exact integers in
 * floats), so it is the first layer of a language model; an id that is not an integer in
 * [0, vocab) gives a row of NaN, which the trainer stops on as a diverged run, rather than
 * another token's row (the data sets refuse such ids before). The weight may be shared with a
 * later linear layer (tie=), which writes the gradient first: gacc. */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

static dt_status embed_setup(dt_node *n) {
    if (n->vocab < 1) return dt_fail(DT_ERR_ARG, "embed needs vocab=V with V >= 1");
    if (n->out < 1) return dt_fail(DT_ERR_ARG, "embed needs out=C with C >= 1");
    if (n->in[0] != -1)
        return dt_fail(DT_ERR_ARG, "embed reads the model input (token ids), not another layer's output: put it "
                       "first (or in=input)");
    if (n->ic != 1)
        return dt_fail(DT_ERR_ARG, "embed takes token ids, one per position ('input seq=T'), not %d features", n->ic);
    n->oc = n->out; n->oh = n->ih; n->ow = 1; n->seq = 1;
    n->nparam = 1;
    n->ptens[0] = (dt_ptensor){"weight", 2, {n->vocab, n->out, 0, 0}};
    n->flops = 0; /* a gather: no arithmetic */
    return DT_OK;
}

/* PyTorch's nn.Embedding draws N(0, 1); nanoGPT's models say std=0.02 */
static void embed_init(dt_node *n, dt_rng *rng) {
    dt_init_normal(n->w[0], dt_ptensor_numel(&n->ptens[0]), n->std > 0 ? n->std : 1.0f, rng);
}

/* The row of an id, or -1 */
static int row_of(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab && id == floorf(id) ? (int)id : -1;
}

static void embed_forward(dt_node *n, const dt_pass *p) {
    const int C = n->out;
    const size_t rows = (size_t)p->batch * n->ih;
    for (size_t r = 0; r < rows; r++) {
        const int id = row_of(p->x[0][r], n->vocab);
        float *y = n->y + r * C;
        if (id >= 0) memcpy(y, n->w[0] + (size_t)id * C, (size_t)C * sizeof(float));
        else
            for (int c = 0; c < C; c++) y[c] = NAN;
    }
}

static void embed_backward(dt_node *n, const dt_pass *p) {
    const int C = n->out;
    const size_t rows = (size_t)p->batch * n->ih;
    if (!n->gacc) memset(n->g[0], 0, dt_ptensor_numel(&n->ptens[0]) * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        const int id = row_of(p->x[0][r], n->vocab);
        if (id < 0) continue;
        float *g = n->g[0] + (size_t)id * C;
        const float *dy = n->dy + r * C;
        for (int c = 0; c < C; c++) g[c] += dy[c];
    }
    /* token ids have no gradient: a caller asking for the input's (tests) gets zeros */
    if (p->dx[0] && !p->dx_acc[0]) memset(p->dx[0], 0, rows * sizeof(float));
}

const dt_layer_ops dt_layer_embed = {
    .kind = "embed", .auto_prefix = "embed", .ninputs = 1, .setup = embed_setup, .init = embed_init,
    .forward = embed_forward, .backward = embed_backward, .bwd_skips = DT_SKIPS_Y, .seq = DT_SEQ_ONLY,
    .ids_input = 1,
};
