/* dtrain info's table of a model (dt_model_print): each layer's kind, output, parameters and
 * forward FLOPs. An image's shape is C x H x W; a sequence's T x C (positions x features),
 * marked "seq". */
#include <stdio.h>

#include "models/model_struct.h"

static void shape_of(char *buf, size_t cap, int c, int h, int w, int seq) {
    if (seq) snprintf(buf, cap, "%dx%d seq", h, c);
    else snprintf(buf, cap, "%dx%dx%d", c, h, w);
}

void dt_model_print(const dt_model *m, void *file) {
    FILE *f = file;
    fprintf(f, "%-30s %-10s %-14s %10s %12s\n", "layer", "kind", "output", "params", "MFLOPs/ex");
    char shape[48];
    shape_of(shape, sizeof shape, m->in_c, m->in_h, m->in_w, m->in_seq);
    fprintf(f, "%-30s %-10s %-14s\n", "input", "input", shape);
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        size_t np = 0;
        for (int t = 0; t < n->nparam; t++)
            if (dt_node_owns(n, t)) np += dt_ptensor_numel(&n->ptens[t]);
        shape_of(shape, sizeof shape, n->oc, n->oh, n->ow, n->seq);
        char src[160] = "";
        if (n->ops->ninputs == 2)
            snprintf(src, sizeof src, "  <- %s + %s", n->in[0] < 0 ? "input" : m->nodes[n->in[0]].name,
                     n->in[1] < 0 ? "input" : m->nodes[n->in[1]].name);
        else if (n->in[0] != i - 1)
            snprintf(src, sizeof src, "  <- %s", n->in[0] < 0 ? "input" : m->nodes[n->in[0]].name);
        if (n->tie)
            snprintf(src, sizeof src, "  weight: %s's (tied)", m->nodes[n->tie - 1].name);
        fprintf(f, "%-30s %-10s %-14s %10zu %12.3f%s\n", n->name, n->ops->kind, shape, np, n->flops / 1e6, src);
    }
    fprintf(f, "parameters: %zu (%zu tensors)\n", m->np, (size_t)m->nviews);
    fprintf(f, "forward FLOPs per example: %.0f (%.3f MFLOP; multiply-add = 2%s)\n", dt_model_flops(m),
            dt_model_flops(m) / 1e6,
            m->in_seq ? "; attention's QK^T and PV as full T x T products" : "");
}
