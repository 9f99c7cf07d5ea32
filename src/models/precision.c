/* --precision bf16: mixed precision at the graph, not in each layer.
 *
 * Every node's output and output gradient are stored as bf16 (y16, dy16: half the bytes of
 * the activations). While a node runs, its inputs, output and output gradient are converted
 * into fp32 staging buffers and the layer computes on those exactly as in fp32; what it
 * produces is rounded to bf16 on the way back. Convolutions and linear layers (ops->gemm_params)
 * see their weights and biases rounded to bf16, so each of their GEMMs multiplies bf16 operands
 * and accumulates in fp32: the products of two bf16 values are exact in fp32, so an fp32 GEMM
 * on rounded operands computes what a bf16 GEMM with fp32 accumulation does (PyTorch's bf16
 * autocast, oneDNN's bf16 convolutions), up to the order of the sums. Master weights, their
 * gradients (written in fp32 by the layers), optimiser state, the loss and checkpoints stay
 * fp32.
 *
 * Why here and not a bf16 form of each layer: one place holds the precision rules, every
 * layer (and a user's own spec) gets them, and fp32 stays the code it was. The cost is two
 * conversion passes per node through memory. So the layers where those passes cost most
 * against their work take the stored bf16 values themselves (ops->bf16_io, takes_bf16):
 * convolutions on oneDNN's bf16 kernels, and batch-norm, ReLU, add, flatten, max-pooling and
 * dropout, whose bf16 forms convert in cache (a row or a plane at a time, or in registers) and
 * compute exactly what they compute here, bit for bit (test_bf16 holds them to it;
 * DTRAIN_BF16_FORMS=0 turns the forms off). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/bf16_array.h"
#include "layers/bf16_kernels.h"
#include "layers/kernels.h"
#include "models/loss.h"
#include "models/model_struct.h"
#include "models/precision.h"

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* fp32 staging buffers a node needs at once: forward its inputs and output; backward the
 * inputs and output it reads (ops->bwd_skips), its output gradient and its input gradients. */
static int slots_of(const dt_node *n) {
    const int k = n->ops->ninputs, skips = n->ops->bwd_skips;
    const int fwd = k + 1, bwd = (skips & DT_SKIPS_X ? 0 : k) + (skips & DT_SKIPS_Y ? 0 : 1) + 1 + k;
    return fwd > bwd ? fwd : bwd;
}

/* The number of slots, the largest activation (or model input) of a batch, the most parameters
 * of a GEMM node and the logits, in floats rounded up to 64-byte pieces. */
static void sizes(const dt_model *m, int batch, int *slots, size_t *act, size_t *wts, size_t *logits) {
    size_t a = (size_t)batch * m->in_c * m->in_h * m->in_w, w = 0;
    int s = 0;
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        a = max_size(a, (size_t)batch * dt_node_out_size(n));
        if (slots_of(n) > s) s = slots_of(n);
        if (n->ops->gemm_params) {
            size_t k = 0;
            for (int t = 0; t < n->nparam; t++) k += dt_ptensor_numel(&n->ptens[t]);
            w = max_size(w, k);
        }
    }
    *slots = s;
    *act = (a + 15) & ~(size_t)15;
    *wts = (w + 15) & ~(size_t)15;
    *logits = ((size_t)batch * dt_node_out_size(&m->nodes[m->nn - 1]) + 15) & ~(size_t)15;
}

size_t dt_bf16_stage_floats(const dt_model *m, int batch) {
    int slots;
    size_t act, wts, logits;
    sizes(m, batch, &slots, &act, &wts, &logits);
    return (size_t)slots * act + wts + logits;
}

void dt_bf16_stage_carve(dt_model *m, int batch) {
    int slots;
    size_t act, wts, logits;
    sizes(m, batch, &slots, &act, &wts, &logits);
    assert(slots <= DT_STAGE_SLOTS);
    const char *forms = getenv("DTRAIN_BF16_FORMS");
    m->bf16_forms = !(forms && strcmp(forms, "0") == 0);
    for (int k = 0; k < slots; k++) m->slot[k] = m->stage + (size_t)k * act;
    m->sw = m->stage + (size_t)slots * act;
    m->slogits = m->sw + wts;
}

/* Points a GEMM node's parameters at bf16-rounded copies (undone by unround_params); but
 * for a node that takes bf16 activations (its weights go into its bf16 kernels, which round
 * them on the way in, to nearest even as here) the first tensor, the weight, stays. */
static void round_params(dt_model *m, dt_node *n, const dt_pass *p, float *saved[DT_MAX_PTENSORS]) {
    if (!n->ops->gemm_params) return;
    float *w = m->sw;
    for (int t = 0; t < n->nparam; t++) {
        saved[t] = n->w[t];
        if (t == 0 && p->x16[0]) continue;
        const size_t k = dt_ptensor_numel(&n->ptens[t]);
        dt_bf16_round(w, n->w[t], k);
        n->w[t] = w;
        w += k;
    }
}

static void unround_params(dt_node *n, float *const saved[DT_MAX_PTENSORS]) {
    if (!n->ops->gemm_params) return;
    for (int t = 0; t < n->nparam; t++) n->w[t] = saved[t];
}

/* Runs node i's forward or backward with its GEMM parameters rounded. (Its time, when the
 * layers are timed, is taken around the whole node by the callers: the conversions into and
 * out of fp32 copies are part of what a node costs under bf16, and a plan weighs them.) */
static void run_node(dt_model *m, int i, const dt_pass *p, int bwd) {
    dt_node *n = &m->nodes[i];
    float *saved[DT_MAX_PTENSORS];
    round_params(m, n, p, saved);
    if (bwd) n->ops->backward(n, p);
    else n->ops->forward(n, p);
    unround_params(n, saved);
}

static double clock_start(const double *times) { return times ? dt_now() : 0; }
static void clock_stop(double *times, int i, double t0) {
    if (times) times[i] += dt_now() - t0;
}

/* Input j of node n in fp32, in buf: a producer's stored bf16 output, or the model input
 * rounded (as autocast casts a convolution's input); token ids (an embed's input) as they are:
 * bf16 holds integers exactly only up to 256, and an embedding takes no arithmetic from them. */
static const float *stage_input(dt_model *m, const dt_node *n, int j, int batch, float *buf) {
    const int src = n->in[j];
    if (src < 0 && n->ops->ids_input) return m->input;
    if (src < 0) {
        dt_bf16_round(buf, m->input, (size_t)batch * m->in_c * m->in_h * m->in_w);
    } else {
        const dt_node *s = &m->nodes[src];
        dt_bf16_load(buf, s->y16, (size_t)batch * dt_node_out_size(s));
    }
    return buf;
}

/* Does node n take its bf16 activations as they are stored (ops->bf16_io: conv on oneDNN's
 * bf16 kernels; the bf16 forms of the other layers that have one), its inputs being other
 * nodes' outputs? Then no fp32 copies are made for it. */
static int takes_bf16(const dt_model *m, dt_node *n, int batch) {
    if (!n->ops->bf16_io || (!m->bf16_forms && !n->ops->gemm_params)) return 0;
    for (int j = 0; j < n->ops->ninputs; j++)
        if (n->in[j] < 0) return 0;
    return n->ops->bf16_io(n, batch);
}

void dt_bf16_forward(dt_model *m, int batch, int train) {
    for (int i = 0; i < m->nn; i++) {
        dt_node *n = &m->nodes[i];
        if (n->relu_fused) continue; /* its producer stored ReLU(output) in the shared y16 */
        dt_pass p = {.batch = batch, .train = train, .work = m->work, .rng = &m->rng, .bf16 = 1};
        const double t0 = clock_start(m->t_fwd);
        if (takes_bf16(m, n, batch)) {
            for (int j = 0; j < n->ops->ninputs; j++) p.x16[j] = m->nodes[n->in[j]].y16;
            n->y = NULL;
            run_node(m, i, &p, 0);
            clock_stop(m->t_fwd, i, t0);
            continue;
        }
        int k = 0;
        for (int j = 0; j < n->ops->ninputs; j++) p.x[j] = stage_input(m, n, j, batch, m->slot[k++]);
        n->y = m->slot[k++];
        run_node(m, i, &p, 0);
        dt_bf16_store(n->y16, n->y, (size_t)batch * dt_node_out_size(n));
        clock_stop(m->t_fwd, i, t0);
    }
    /* the logits as stored (bf16), in fp32 for the loss, as autocast's loss casts them */
    const dt_node *last = &m->nodes[m->nn - 1];
    dt_bf16_load(m->slogits, last->y16, (size_t)batch * dt_node_out_size(last));
    m->logits = m->slogits;
}

float dt_bf16_backward(dt_model *m, const uint16_t *targets, int *correct, float *dx_out) {
    const int batch = m->batch;
    dt_node *last = &m->nodes[m->nn - 1];
    const int rows = batch * dt_model_positions(m), classes = dt_model_num_classes(m);
    float *dlogits = m->slot[0];
    float loss = dt_softmax_xent(m->slogits, targets, rows, classes, dlogits, correct);
    dt_bf16_store(last->dy16, dlogits, (size_t)rows * classes);
    size_t ready = m->np;
    for (int i = m->nn - 1; i >= 0; i--) {
        dt_node *n = &m->nodes[i];
        const int skips = n->ops->bwd_skips;
        const size_t out = (size_t)batch * dt_node_out_size(n);
        dt_pass p = {.batch = batch, .train = m->last_train, .work = m->work, .rng = &m->rng, .bf16 = 1};
        const double t0 = clock_start(m->t_bwd);
        if (takes_bf16(m, n, batch)) {
            for (int j = 0; j < n->ops->ninputs; j++) {
                p.x16[j] = m->nodes[n->in[j]].y16;
                p.dx16[j] = m->nodes[n->in[j]].dy16;
                p.dx_acc[j] = m->dx_acc[i][j];
            }
            n->y = n->dy = NULL;
            run_node(m, i, &p, 1);
            clock_stop(m->t_bwd, i, t0);
            ready = dt_model_ready_after(m, n, ready);
            if (m->grads_ready) m->grads_ready(m->grads_ready_arg, ready);
            continue;
        }
        int k = 0;
        for (int j = 0; j < n->ops->ninputs; j++)
            p.x[j] = skips & DT_SKIPS_X ? NULL : stage_input(m, n, j, batch, m->slot[k++]);
        n->y = NULL;
        if (!(skips & DT_SKIPS_Y)) {
            n->y = m->slot[k++];
            dt_bf16_load(n->y, n->y16, out);
        }
        n->dy = m->slot[k++];
        dt_bf16_load(n->dy, n->dy16, out);
        for (int j = 0; j < n->ops->ninputs; j++) {
            p.dx[j] = n->in[j] < 0 && !dx_out ? NULL : m->slot[k];
            k++;
            p.dx_acc[j] = 0; /* accumulation happens when storing, below */
        }
        run_node(m, i, &p, 1);
        for (int j = 0; j < n->ops->ninputs; j++) {
            const int src = n->in[j];
            const int acc = m->dx_acc[i][j];
            if (!p.dx[j]) continue;
            if (src < 0) {
                dt_store(dx_out, p.dx[j], (size_t)batch * m->in_c * m->in_h * m->in_w, acc);
                continue;
            }
            const size_t len = (size_t)batch * dt_node_out_size(&m->nodes[src]);
            if (acc) dt_bf16_store_add(m->nodes[src].dy16, p.dx[j], len);
            else dt_bf16_store(m->nodes[src].dy16, p.dx[j], len);
        }
        clock_stop(m->t_bwd, i, t0);
        ready = dt_model_ready_after(m, n, ready);
        if (m->grads_ready) m->grads_ready(m->grads_ready_arg, ready);
    }
    return loss;
}

const char *dt_bf16_fallback_reason(void) { return dt_bf16_kernels_missing(); }
