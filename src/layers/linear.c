/* Fully connected layer y = x W^T + b, weight [out, in] (PyTorch layout). An image is read as
 * flat features; a sequence position by position ([T][C] -> [T][out], nn.Linear on the last
 * dimension), all batch x T rows in one GEMM. tie=NAME takes an embed's weight [V, C] as its
 * own (a language model's head: out=V, C inputs): the graph points w[0] and g[0] at the embed's,
 * and this layer, running backward first, writes the gradient the embed then adds to. */
#include "layers/gemm.h"
#include "layers/layer.h"
#include "layers/linear_dnnl.h"

#include <math.h>
#include <string.h>

static dt_status linear_setup(dt_node *n) {
    if (n->out < 1) return dt_fail(DT_ERR_ARG, "linear needs out=N with N >= 1");
    const int in = dt_node_row_len(n), rows = dt_node_rows(n);
    n->oc = n->out; n->oh = rows; n->ow = 1; /* n->seq stays n->iseq */
    n->nparam = n->bias ? 2 : 1;
    n->ptens[0] = (dt_ptensor){"weight", 2, {n->out, in, 0, 0}};
    n->ptens[1] = (dt_ptensor){"bias", 1, {n->out, 0, 0, 0}};
    n->flops = (double)rows * (2.0 * in * n->out + (n->bias ? n->out : 0));
    return DT_OK;
}

/* PyTorch's default (uniform in +-1/sqrt(in)), or with std= nanoGPT's: N(0, std^2), bias 0. A
 * tied weight is the embed's, drawn by it. */
static void linear_init(dt_node *n, dt_rng *rng) {
    const float bound = 1.0f / sqrtf((float)dt_node_row_len(n));
    if (!n->tie && n->std > 0) dt_init_normal(n->w[0], dt_ptensor_numel(&n->ptens[0]), n->std, rng);
    else if (!n->tie) dt_init_uniform(n->w[0], dt_ptensor_numel(&n->ptens[0]), bound, rng);
    if (n->bias && n->std > 0) memset(n->w[1], 0, (size_t)n->out * sizeof(float));
    else if (n->bias) dt_init_uniform(n->w[1], (size_t)n->out, bound, rng);
}

/* oneDNN's bf16 matmul where it is chosen (linear_dnnl.h; never in a build without it) */
static void linear_forward(dt_node *n, const dt_pass *p) {
    dt_linear_dnnl *plan = p->bf16 ? dt_linear_dnnl_get(n, p->batch) : NULL;
    if (plan && dt_linear_dnnl_forward(plan, p->x[0], n->w[0], n->bias ? n->w[1] : NULL, n->y) == DT_OK) return;
    const int in = dt_node_row_len(n), out = n->out, N = p->batch * dt_node_rows(n);
    if (n->bias)
        for (int b = 0; b < N; b++) memcpy(n->y + (size_t)b * out, n->w[1], out * sizeof(float));
    dt_sgemm(0, 1, N, out, in, 1.0f, p->x[0], in, n->w[0], in, n->bias ? 1.0f : 0.0f, n->y, out);
    if (n->relu_out) /* fused ReLU (the output is still in cache) */
        for (size_t i = 0; i < (size_t)N * out; i++) n->y[i] = n->y[i] > 0.0f ? n->y[i] : 0.0f;
}

static void linear_backward(dt_node *n, const dt_pass *p) {
    const int in = dt_node_row_len(n), out = n->out, N = p->batch * dt_node_rows(n);
    dt_linear_dnnl *plan = p->bf16 && !(p->dx[0] && p->dx_acc[0]) ? dt_linear_dnnl_get(n, p->batch) : NULL;
    const int done = plan && dt_linear_dnnl_backward(plan, p->x[0], n->w[0], n->dy, p->dx[0], 0, n->g[0]) == DT_OK;
    if (!done) dt_sgemm(1, 0, out, in, N, 1.0f, n->dy, out, p->x[0], in, 0.0f, n->g[0], in);
    if (n->bias) {
        memset(n->g[1], 0, out * sizeof(float));
        for (int b = 0; b < N; b++) {
            const float *d = n->dy + (size_t)b * out;
            for (int o = 0; o < out; o++) n->g[1][o] += d[o];
        }
    }
    if (p->dx[0] && !done)
        dt_sgemm(0, 0, N, in, out, 1.0f, n->dy, out, n->w[0], in, p->dx_acc[0] ? 1.0f : 0.0f,
                 p->dx[0], in);
}

const dt_layer_ops dt_layer_linear = {
    .kind = "linear", .auto_prefix = "fc", .ninputs = 1,
    .setup = linear_setup, .init = linear_init, .forward = linear_forward,
    .backward = linear_backward, .can_fuse_relu = 1, .gemm_params = 1, .bwd_skips = DT_SKIPS_Y, .seq = DT_SEQ_ANY,
    .prepare = dt_linear_dnnl_prepare, .engine = dt_linear_dnnl_engine, .release = dt_linear_dnnl_release,
    .kernels = dt_linear_dnnl_kernels,
};
