/* GELU in GPT-2's tanh form (PyTorch's F.gelu(x, approximate='tanh')), element-wise on any
 * shape. Backward recomputes tanh from the input (vectorised exp: vmath.h) rather than keep it. */
#include "layers/layer.h"
#include "layers/vmath.h"

static dt_status gelu_setup(dt_node *n) {
    n->oc = n->ic; n->oh = n->ih; n->ow = n->iw;
    /* per value: x^3 (2), its scale and sum (2), tanh's argument (1), tanh (1), 1 + t and x/2
     * times it (3): what one counts for relu as 1 */
    n->flops = 9.0 * dt_node_in_size(n);
    return DT_OK;
}

static void gelu_forward(dt_node *n, const dt_pass *p) {
    dt_vgelu(n->y, p->x[0], (size_t)p->batch * dt_node_out_size(n));
}

static void gelu_backward(dt_node *n, const dt_pass *p) {
    if (p->dx[0]) dt_vgelu_grad(p->dx[0], p->x[0], n->dy, (size_t)p->batch * dt_node_out_size(n), p->dx_acc[0]);
}

const dt_layer_ops dt_layer_gelu = {
    .kind = "gelu", .auto_prefix = "gelu", .ninputs = 1, .setup = gelu_setup, .forward = gelu_forward,
    .backward = gelu_backward, .bwd_skips = DT_SKIPS_Y, .seq = DT_SEQ_ANY,
};
