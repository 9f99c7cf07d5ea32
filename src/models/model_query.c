/* What a built model says of itself (its tensors, shapes, sizes): read-only queries of
 * model_struct.h, below both the passes that run it (model.c, precision.c) and its printers. */
#include <assert.h>
#include <string.h>

#include "models/model_struct.h"

size_t dt_model_num_params(const dt_model *m) { return m->np; }
float *dt_model_params(dt_model *m) { return m->params; }
float *dt_model_grads(dt_model *m) { return m->grads; }
int dt_model_num_tensors(const dt_model *m) { return m->nviews; }
const dt_tensor_view *dt_model_tensor(const dt_model *m, int i) {
    assert(i >= 0 && i < m->nviews);
    return &m->views[i];
}
/* Decided by the layer's kind (its parameters are GEMM operands) and the tensor's own name and
 * shape, not by a list of kinds: a layer kind added later is right by construction (an
 * embedding's table is no GEMM operand, a norm's scale and every bias have one dimension). */
int dt_model_tensor_decays(const dt_model *m, int i) {
    assert(i >= 0 && i < m->nviews);
    /* views are in node order, a node's own tensors together (a tied head owns none) */
    for (int k = 0, v = 0; k < m->nn; k++)
        for (int j = 0; j < m->nodes[k].nparam; j++) {
            const dt_node *n = &m->nodes[k];
            if (!dt_node_owns(n, j) || v++ != i) continue;
            const dt_ptensor *t = &n->ptens[j];
            const size_t len = strlen(t->suffix);
            return n->ops->gemm_params && t->ndim >= 2 && len >= 6 && !strcmp(t->suffix + len - 6, "weight");
        }
    return 0;
}

const char *dt_model_tensor_kind(const dt_model *m, int i) {
    assert(i >= 0 && i < m->nviews);
    /* views are in node order, a node's own tensors together */
    for (int k = 0, v = 0; k < m->nn; k++)
        for (int t = 0; t < m->nodes[k].nparam; t++)
            if (dt_node_owns(&m->nodes[k], t) && v++ == i) return m->nodes[k].ops->kind;
    return "?";
}
size_t dt_model_num_state(const dt_model *m) { return m->ns; }
float *dt_model_state(dt_model *m) { return m->state; }
int dt_model_num_state_tensors(const dt_model *m) { return m->nsviews; }
const dt_tensor_view *dt_model_state_tensor(const dt_model *m, int i) {
    assert(i >= 0 && i < m->nsviews);
    return &m->sviews[i];
}
void dt_model_input_shape(const dt_model *m, int *c, int *h, int *w) {
    *c = m->in_c; *h = m->in_h; *w = m->in_w;
}
int dt_model_positions(const dt_model *m) {
    const dt_node *last = &m->nodes[m->nn - 1];
    return last->seq ? last->oh : 1;
}
int dt_model_num_classes(const dt_model *m) {
    const dt_node *last = &m->nodes[m->nn - 1];
    return last->seq ? last->oc : (int)dt_node_out_size(last);
}
int dt_model_vocab(const dt_model *m) {
    for (int i = 0; i < m->nn; i++)
        if (m->nodes[i].ops->ids_input && m->nodes[i].in[0] < 0) return m->nodes[i].vocab;
    return 0;
}
double dt_model_flops(const dt_model *m) {
    double f = 0;
    for (int i = 0; i < m->nn; i++) f += m->nodes[i].flops;
    return f;
}

/* Where the gradients are final from, once node n's backward has run: its first own parameter
 * tensor (the lowest offset of its tensors); a tied weight is not final until the embed that
 * owns it, an earlier node, has added its share. */
size_t dt_model_ready_after(const dt_model *m, const dt_node *n, size_t ready) {
    for (int t = 0; t < n->nparam; t++)
        if (dt_node_owns(n, t)) return (size_t)(n->g[t] - m->grads);
    return ready;
}
