/* A model graph's shapes: each node's input from its producers, its setup, and the checks around it. */
#include "models/model.h"

#include <stdio.h>
#include <string.h>

/* The checks of sequences and tied weights that need more than one node: a layer's kind
 * against what its input is (dt_layer_ops.seq), and a tie=NAME against the layer it names. */
static dt_status check_seq(const dt_node *n) {
    if (n->iseq && n->ops->seq == DT_SEQ_NO)
        return dt_fail(DT_ERR_ARG, "%s takes an image, not a sequence (%d positions of %d features): it has no "
                       "meaning per position", n->ops->kind, n->ih, n->ic);
    if (!n->iseq && n->ops->seq == DT_SEQ_ONLY)
        return dt_fail(DT_ERR_ARG, "%s takes a sequence ('input seq=T' and the layers after it), not an image of "
                       "%dx%dx%d", n->ops->kind, n->ic, n->ih, n->iw);
    return DT_OK;
}

static dt_status check_tie(dt_node *nodes, int i) {
    dt_node *n = &nodes[i], *e = &nodes[n->tie - 1];
    if (e->ops != &dt_layer_embed)
        return dt_fail(DT_ERR_ARG, "tie=%s: '%s' is a %s layer; only an embed's weight can be shared", e->name,
                       e->name, e->ops->kind);
    if (e->gacc) return dt_fail(DT_ERR_ARG, "tie=%s: its weight is already shared by another layer", e->name);
    if (n->nparam < 1 || e->ptens[0].ndim != n->ptens[0].ndim ||
        memcmp(e->ptens[0].shape, n->ptens[0].shape, sizeof e->ptens[0].shape) != 0)
        return dt_fail(DT_ERR_ARG, "tie=%s: its weight is [%d, %d], this layer's would be [%d, %d] (out=%d, "
                       "%d inputs)", e->name, e->ptens[0].shape[0], e->ptens[0].shape[1], n->ptens[0].shape[0],
                       n->ptens[0].shape[1], n->out, n->ptens[0].shape[1]);
    e->gacc = 1; /* backward runs from the last node: n writes the gradient first, e adds */
    return DT_OK;
}

/* Node i's input shape from its producers (or the model's input), its setup, and the checks
 * around it: dt_model_build's step for each node, in topological order. */
dt_status dt_model_shape_node(dt_node *nodes, int i, int in_c, int in_h, int in_w, int in_seq, const char *origin) {
    dt_node *n = &nodes[i];
    const int src = n->in[0];
    if (src < 0) { n->ic = in_c; n->ih = in_h; n->iw = in_w; n->iseq = in_seq; }
    else { n->ic = nodes[src].oc; n->ih = nodes[src].oh; n->iw = nodes[src].ow; n->iseq = nodes[src].seq; }
    n->seq = n->iseq; /* a layer that changes it says so in its setup */
    if (n->ops->ninputs == 2) {
        int s1 = n->in[1];
        int c1 = s1 < 0 ? in_c : nodes[s1].oc, h1 = s1 < 0 ? in_h : nodes[s1].oh,
            w1 = s1 < 0 ? in_w : nodes[s1].ow, q1 = s1 < 0 ? in_seq : nodes[s1].seq;
        if (c1 != n->ic || h1 != n->ih || w1 != n->iw || q1 != n->iseq)
            return dt_fail(DT_ERR_FORMAT, "%s: layer '%s': inputs have shapes %dx%dx%d and %dx%dx%d, expected equal",
                           origin, n->name, n->ic, n->ih, n->iw, c1, h1, w1);
    }
    /* shapes are ints in the layers: sizes are checked in 64 bits before and after each
     * setup, so no product of them can overflow (a 46341x46341 input once did in flatten) */
    if (dt_node_in_size(n) > DT_MAX_VALUES)
        return dt_fail(DT_ERR_FORMAT, "%s: layer '%s': its input of %dx%dx%d = %zu values per image is more than "
                       "dtrain handles (%zu)", origin, n->name, n->ic, n->ih, n->iw, dt_node_in_size(n),
                       (size_t)DT_MAX_VALUES);
    dt_status st = check_seq(n);
    if (st == DT_OK) st = n->ops->setup(n);
    if (st == DT_OK && n->tie) st = check_tie(nodes, i);
    for (int t = 0; st == DT_OK && t < n->nparam; t++)
        if (dt_ptensor_numel(&n->ptens[t]) > DT_MAX_VALUES)
            st = dt_fail(DT_ERR_ARG, "its %s has %zu values, more than dtrain handles (%zu)", n->ptens[t].suffix,
                         dt_ptensor_numel(&n->ptens[t]), (size_t)DT_MAX_VALUES);
    if (st == DT_OK && (n->oc < 1 || n->oh < 1 || n->ow < 1 ||
                        (size_t)n->oc * (size_t)n->oh * (size_t)n->ow > DT_MAX_VALUES))
        st = dt_fail(DT_ERR_ARG, "its output of %dx%dx%d values per image is empty or more than dtrain handles (%zu)",
                     n->oc, n->oh, n->ow, (size_t)DT_MAX_VALUES);
    if (st != DT_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        st = dt_fail(DT_ERR_FORMAT, "%s: layer '%s' (input %dx%dx%d): %s", origin, n->name, n->ic, n->ih,
                     n->iw, msg);
    }
    return st;
}
