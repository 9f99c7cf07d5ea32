/* Model graph: build, allocate, forward, loss, backward. */
#include "models/model.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/sim.h"
#include "models/loss.h"
#include "models/precision.h"

/* DTRAIN_LAYER_TIMES=1: per-node forward/backward wall time, printed to stderr at free
 * (profiling aid for bench work; off by default, costs two clock reads per node when on). */
static int layer_times_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DTRAIN_LAYER_TIMES");
        on = e && *e && strcmp(e, "0") != 0;
    }
    return on;
}


static void print_layer_times(const dt_model *m) {
    double tf = 0, tb = 0;
    for (int i = 0; i < m->nn; i++) { tf += m->t_fwd[i]; tb += m->t_bwd[i]; }
    fprintf(stderr, "%-24s %-10s %10s %10s %6s\n", "layer", "kind", "fwd ms", "bwd ms", "%");
    for (int i = 0; i < m->nn; i++)
        fprintf(stderr, "%-24s %-10s %10.1f %10.1f %6.1f\n", m->nodes[i].name, m->nodes[i].ops->kind,
                1e3 * m->t_fwd[i], 1e3 * m->t_bwd[i],
                100.0 * (m->t_fwd[i] + m->t_bwd[i]) / (tf + tb > 0 ? tf + tb : 1));
    fprintf(stderr, "%-24s %-10s %10.1f %10.1f\n", "total", "", 1e3 * tf, 1e3 * tb);
}

static void set_view(dt_tensor_view *v, const char *node, const dt_ptensor *t, size_t off) {
    snprintf(v->name, sizeof v->name, "%s.%s", node, t->suffix);
    v->offset = off;
    v->numel = dt_ptensor_numel(t);
    v->ndim = t->ndim;
    for (int i = 0; i < 4; i++) v->shape[i] = i < t->ndim ? t->shape[i] : 0;
}

void dt_model_free(dt_model *m) {
    if (!m) return;
    if (m->t_fwd && layer_times_on()) print_layer_times(m);
    free(m->t_fwd);
    for (int i = 0; i < m->nn; i++)
        if (m->nodes[i].ops->release) m->nodes[i].ops->release(&m->nodes[i]);
    free(m->nodes); free(m->params); free(m->grads); free(m->state);
    free(m->views); free(m->sviews); free(m->dx_acc);
    free(m->work); free(m->act_block); free(m->stage); free(m->targets);
    free(m);
}

/* ReLU fusion: a relu that is the only consumer of a producer that can apply it itself */
static void fuse_relus(dt_node *nodes, int nn, const int *uses) {
    for (int i = 0; i < nn; i++) {
        dt_node *r = &nodes[i];
        int src = r->in[0];
        if (r->ops == &dt_layer_relu && src >= 0 && uses[src + 1] == 1 &&
            nodes[src].ops->can_fuse_relu && !nodes[src].relu_out) {
            nodes[src].relu_out = 1;
            r->relu_fused = 1;
        }
    }
}

/* Every node's shape (dt_model_shape_node), then the checks of the whole graph: its size and
 * that every output but the last is read; counts the parameters, state and views for m. */
static dt_status shape_graph(dt_model *m, const char *origin) {
    dt_node *nodes = m->nodes;
    const int nn = m->nn;
    dt_status st;
    int *uses;
    if ((st = dt_calloc(uses, (size_t)nn + 1, "the uses of %d layers", nn)) != DT_OK) return st;
    for (int i = 0; i < nn; i++) {
        dt_node *n = &nodes[i];
        for (int j = 0; j < n->ops->ninputs; j++) {
            assert(n->in[j] >= -1 && n->in[j] < i);
            uses[n->in[j] + 1]++;
        }
        st = dt_model_shape_node(nodes, i, m->in_c, m->in_h, m->in_w, m->in_seq, origin);
        if (st != DT_OK) { free(uses); return st; }
        for (int t = 0; t < n->nparam; t++)
            if (dt_node_owns(n, t)) { m->nviews++; m->np += dt_ptensor_numel(&n->ptens[t]); }
        m->nsviews += n->nstate;
        for (int t = 0; t < n->nstate; t++) m->ns += dt_ptensor_numel(&n->stens[t]);
    }
    /* The whole model is limited as well as each tensor: a few bytes of spec asking for
     * several 1 GiB layers (each within DT_MAX_VALUES) took gigabytes and minutes to build and
     * initialise, which no fuzzer (or user) should have to wait for. */
    if (m->np > DT_MAX_PARAMS) {
        st = dt_fail(DT_ERR_FORMAT, "%s: the model has %zu parameters, more than dtrain handles (%zu)", origin, m->np,
                     (size_t)DT_MAX_PARAMS);
        free(uses); return st;
    }
    fuse_relus(nodes, nn, uses);
    for (int i = 0; i < nn - 1; i++)
        if (!uses[i + 1]) {
            st = dt_fail(DT_ERR_FORMAT, "%s: output of layer '%s' is never used (only the last layer may be unused)",
                         origin, nodes[i].name);
            free(uses); return st;
        }
    free(uses);
    return DT_OK;
}

/* One buffer each for parameters, gradients, state; views into them, and each node's
 * pointers (a tied weight: the embed's, an earlier node's, so set already) */
static dt_status place_tensors(dt_model *m) {
    dt_node *nodes = m->nodes;
    m->params = calloc(m->np ? m->np : 1, sizeof(float));
    m->grads = calloc(m->np ? m->np : 1, sizeof(float));
    m->state = calloc(m->ns ? m->ns : 1, sizeof(float));
    m->views = calloc((size_t)m->nviews + 1, sizeof *m->views);
    m->sviews = calloc((size_t)m->nsviews + 1, sizeof *m->sviews);
    m->dx_acc = calloc((size_t)m->nn, sizeof *m->dx_acc);
    if (!m->params || !m->grads || !m->state || !m->views || !m->sviews || !m->dx_acc)
        return dt_nomem("%zu parameters", m->np);
    size_t po = 0, so = 0;
    int vi = 0, si = 0;
    for (int i = 0; i < m->nn; i++) {
        dt_node *n = &nodes[i];
        for (int t = 0; t < n->nparam; t++) {
            if (!dt_node_owns(n, t)) {
                n->w[t] = nodes[n->tie - 1].w[0];
                n->g[t] = nodes[n->tie - 1].g[0];
                continue;
            }
            set_view(&m->views[vi++], n->name, &n->ptens[t], po);
            n->w[t] = m->params + po;
            n->g[t] = m->grads + po;
            po += dt_ptensor_numel(&n->ptens[t]);
        }
        for (int t = 0; t < n->nstate; t++) {
            set_view(&m->sviews[si++], n->name, &n->stens[t], so);
            n->s[t] = m->state + so;
            so += dt_ptensor_numel(&n->stens[t]);
        }
    }
    return DT_OK;
}

/* Backward plan: walking backwards, the first consumer to reach a producer overwrites its
 * gradient, later ones add to it, so no gradient buffer needs zeroing. */
static dt_status plan_backward(dt_model *m) {
    int *written;
    dt_status st;
    if ((st = dt_calloc(written, (size_t)m->nn + 1, "the backward plan of %d layers", m->nn)) != DT_OK) return st;
    for (int i = m->nn - 1; i >= 0; i--)
        for (int j = 0; j < m->nodes[i].ops->ninputs; j++) {
            int src = m->nodes[i].in[j];
            m->dx_acc[i][j] = written[src + 1];
            written[src + 1] = 1;
        }
    free(written);
    return DT_OK;
}

dt_status dt_model_build(dt_node *nodes, int nn, int in_c, int in_h, int in_w, int in_seq, const char *origin,
                         dt_model **out) {
    *out = NULL;
    dt_status st = DT_OK;
    dt_model *m = calloc(1, sizeof *m);
    if (!m) { free(nodes); return dt_nomem("a model of %d layers", nn); }
    m->nodes = nodes; m->nn = nn;
    m->in_c = in_c; m->in_h = in_h; m->in_w = in_w; m->in_seq = in_seq;
    if (nn < 1) { st = dt_fail(DT_ERR_FORMAT, "%s: the model has no layers", origin); goto fail; }
    if ((st = shape_graph(m, origin)) != DT_OK) goto fail;
    if ((st = place_tensors(m)) != DT_OK) goto fail;
    if ((st = plan_backward(m)) != DT_OK) goto fail;
    if (layer_times_on()) {
        m->t_fwd = calloc(2 * (size_t)nn, sizeof *m->t_fwd);
        if (m->t_fwd) m->t_bwd = m->t_fwd + nn;
    }
    dt_rng_seed(&m->rng, 0);
    dt_model_init(m, 0);
    *out = m;
    return DT_OK;
fail:
    dt_model_free(m);
    return st;
}

dt_status dt_model_time_layers(dt_model *m) {
    if (!m->t_fwd) {
        dt_status st = dt_calloc(m->t_fwd, 2 * (size_t)m->nn, "the layer times of %d layers", m->nn);
        if (st != DT_OK) return st;
        m->t_bwd = m->t_fwd + m->nn;
    }
    memset(m->t_fwd, 0, 2 * (size_t)m->nn * sizeof *m->t_fwd);
    return DT_OK;
}

double dt_model_layer_seconds(const dt_model *m, int i) { return m->t_fwd ? m->t_fwd[i] + m->t_bwd[i] : 0; }

void dt_model_init(dt_model *m, uint64_t seed) {
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (int i = 0; i < m->nn; i++)
        if (m->nodes[i].ops->init) m->nodes[i].ops->init(&m->nodes[i], &r);
}

void dt_model_set_seed(dt_model *m, uint64_t seed) { dt_rng_seed(&m->rng, seed); }

dt_rng *dt_model_rng(dt_model *m) { return &m->rng; }

dt_status dt_model_reserve(dt_model *m, int max_batch) {
    assert(max_batch >= 1);
    if (max_batch <= m->max_batch) return DT_OK;
    /* bf16 stores each activation in 2 bytes and computes in fp32 staging buffers */
    const int bf16 = m->precision == DT_PRECISION_BF16;
    const size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float);
    const size_t stage = bf16 ? dt_bf16_stage_floats(m, max_batch) : 0;
    size_t total = 0, work = 0;
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        size_t act = (size_t)max_batch * dt_node_out_size(n) * elem;
        size_t aux = n->ops->aux_bytes ? n->ops->aux_bytes(n, max_batch) : 0;
        total += (n->relu_fused ? 1 : 2) * ((act + 63) & ~(size_t)63) + ((aux + 63) & ~(size_t)63);
        size_t w = n->ops->workspace ? n->ops->workspace(n, max_batch) : 0;
        if (w > work) work = w;
    }
    void *block = NULL;
    float *wbuf = NULL, *sbuf = NULL;
    /* the uint8 labels' uint16 copy (dt_model_backward): made here, not in a step */
    uint16_t *targets = malloc((size_t)max_batch * dt_model_positions(m) * sizeof *targets);
    if (!targets || posix_memalign(&block, 64, total ? total : 64) != 0 ||
        posix_memalign((void **)&wbuf, 64, (work ? work : 1) * sizeof(float)) != 0 ||
        (stage && posix_memalign((void **)&sbuf, 64, stage * sizeof(float)) != 0)) {
        free(block); free(wbuf); free(targets);
        return dt_nomem("the activations of batch %d (%.1f MB)",
                       max_batch, (total + (work + stage) * sizeof(float)) / 1e6);
    }
    free(m->act_block);
    free(m->work);
    free(m->stage);
    free(m->targets);
    m->targets = targets;
    m->act_block = block;
    m->work = wbuf;
    m->work_floats = work;
    m->stage = sbuf;
    m->act_bytes = total + (work + stage) * sizeof(float);
    char *cur = block;
    for (int i = 0; i < m->nn; i++) {
        dt_node *n = &m->nodes[i];
        size_t act = (size_t)max_batch * dt_node_out_size(n) * elem;
        size_t aux = n->ops->aux_bytes ? n->ops->aux_bytes(n, max_batch) : 0;
        char *y = cur, *dy;
        if (n->relu_fused)
            y = bf16 ? (char *)m->nodes[n->in[0]].y16 : (char *)m->nodes[n->in[0]].y; /* the producer wrote ReLU(its output) there */
        else
            cur += (act + 63) & ~(size_t)63;
        dy = cur; cur += (act + 63) & ~(size_t)63;
        n->y = bf16 ? NULL : (float *)y;
        n->dy = bf16 ? NULL : (float *)dy;
        n->y16 = bf16 ? (uint16_t *)y : NULL;
        n->dy16 = bf16 ? (uint16_t *)dy : NULL;
        n->aux = aux ? cur : NULL; cur += (aux + 63) & ~(size_t)63;
    }
    if (bf16) dt_bf16_stage_carve(m, max_batch);
    m->max_batch = max_batch;
    /* the layers' other engines made ready for this batch now, not in the first step */
    for (int i = 0; i < m->nn; i++) {
        dt_node *n = &m->nodes[i];
        dt_status st = n->ops->prepare ? n->ops->prepare(n, max_batch, bf16) : DT_OK;
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

const char *const dt_precision_names[] = {"fp32", "bf16", NULL};
const char *dt_precision_name(dt_precision p) { return dt_precision_names[p == DT_PRECISION_BF16]; }

dt_status dt_model_set_precision(dt_model *m, dt_precision p) {
    if (p != DT_PRECISION_FP32 && p != DT_PRECISION_BF16)
        return dt_fail(DT_ERR_ARG, "precision %d: expected fp32 or bf16", (int)p);
    if ((int)p == m->precision) return DT_OK;
    m->precision = p;
    const int batch = m->max_batch;
    m->max_batch = 0; /* the buffers change size and type: reserve again */
    return batch ? dt_model_reserve(m, batch) : DT_OK;
}

dt_precision dt_model_precision(const dt_model *m) { return (dt_precision)m->precision; }
size_t dt_model_activation_bytes(const dt_model *m) { return m->max_batch ? m->act_bytes : 0; }

static const float *node_input(const dt_model *m, int src) {
    return src < 0 ? m->input : m->nodes[src].y;
}

const float *dt_model_forward(dt_model *m, const float *x, int batch, int train) {
    assert(batch >= 1 && batch <= m->max_batch && "call dt_model_reserve first");
    m->input = x;
    m->batch = batch;
    m->last_train = train;
    /* a replay (dtrain sim --replay): the time of the forward pass, none of its numbers */
    const int calculate = !dt_sim_replay();
    if (m->precision == DT_PRECISION_BF16) {
        dt_sim_compute(dt_model_flops(m) * batch);
        if (calculate) dt_bf16_forward(m, batch, train);
        else m->logits = m->slogits;
        return m->logits;
    }
    for (int i = 0; i < m->nn; i++) {
        dt_node *n = &m->nodes[i];
        dt_pass p = {.batch = batch, .train = train, .work = m->work, .rng = &m->rng};
        for (int j = 0; j < n->ops->ninputs; j++) p.x[j] = node_input(m, n->in[j]);
        if (n->relu_fused) continue; /* done by its producer (relu_out) */
        double t0 = m->t_fwd ? dt_now() : 0;
        if (calculate) n->ops->forward(n, &p);
        if (m->t_fwd) m->t_fwd[i] += dt_now() - t0;
        dt_sim_compute(n->flops * batch); /* simulation, modelled compute: this layer's time */
    }
    m->logits = m->nodes[m->nn - 1].y;
    return m->logits;
}

/* The uint8 labels of a classifier (or of a sequence model with fewer than 257 classes) as the
 * uint16 targets the loss takes, in the buffer dt_model_reserve made. */
static const uint16_t *widen(const dt_model *m, const uint8_t *labels) {
    const size_t rows = (size_t)m->batch * dt_model_positions(m);
    for (size_t i = 0; i < rows; i++) m->targets[i] = labels[i];
    return m->targets;
}

float dt_model_loss_targets(const dt_model *m, const uint16_t *targets, int *correct) {
    return dt_softmax_xent(m->logits, targets, m->batch * dt_model_positions(m), dt_model_num_classes(m), NULL,
                           correct);
}

float dt_model_loss(const dt_model *m, const uint8_t *labels, int *correct) {
    return dt_model_loss_targets(m, widen(m, labels), correct);
}

/* A replay's backward pass: each layer's time charged as the calculating pass charges it (per
 * layer, or bf16's all at once before), and the gradients said ready layer by layer, so that a
 * scheme's sums start when they would; nothing calculated. */
static void replay_backward(dt_model *m, int charge_per_layer, int *correct) {
    size_t ready = m->np;
    for (int i = m->nn - 1; i >= 0; i--) {
        dt_node *n = &m->nodes[i];
        if (charge_per_layer) dt_sim_compute(2 * n->flops * m->batch);
        ready = dt_model_ready_after(m, n, ready);
        if (m->grads_ready) m->grads_ready(m->grads_ready_arg, ready);
    }
    if (correct) *correct = 0;
}

static float backward(dt_model *m, const uint16_t *targets, int *correct, float *dx_out) {
    /* a replay: the time of the backward pass; the gradients stay as allocated (zeros), the
     * loss is the log's (trainer/replay.c) */
    const int calculate = !dt_sim_replay();
    if (m->precision == DT_PRECISION_BF16) {
        dt_sim_compute(2 * dt_model_flops(m) * m->batch);
        if (calculate) return dt_bf16_backward(m, targets, correct, dx_out);
        replay_backward(m, 0, correct);
        return 0;
    }
    if (!calculate) {
        replay_backward(m, 1, correct);
        return 0;
    }
    dt_node *last = &m->nodes[m->nn - 1];
    float loss = dt_softmax_xent(last->y, targets, m->batch * dt_model_positions(m), dt_model_num_classes(m),
                                 last->dy, correct);
    size_t ready = m->np;
    for (int i = m->nn - 1; i >= 0; i--) {
        dt_node *n = &m->nodes[i];
        dt_pass p = {.batch = m->batch, .train = m->last_train, .work = m->work, .rng = &m->rng};
        for (int j = 0; j < n->ops->ninputs; j++) {
            int src = n->in[j];
            p.x[j] = node_input(m, src);
            p.dx[j] = src < 0 ? dx_out : m->nodes[src].dy;
            p.dx_acc[j] = m->dx_acc[i][j];
        }
        double t0 = m->t_bwd ? dt_now() : 0;
        n->ops->backward(n, &p);
        if (m->t_bwd) m->t_bwd[i] += dt_now() - t0;
        /* backward: the gradients of the input and of the weights, twice forward's FLOPs */
        dt_sim_compute(2 * n->flops * m->batch);
        ready = dt_model_ready_after(m, n, ready);
        if (m->grads_ready) m->grads_ready(m->grads_ready_arg, ready);
    }
    return loss;
}

float dt_model_backward_input(dt_model *m, const uint8_t *labels, int *correct, float *dx_out) {
    return backward(m, widen(m, labels), correct, dx_out);
}

float dt_model_backward_targets(dt_model *m, const uint16_t *targets, int *correct) {
    return backward(m, targets, correct, NULL);
}

void dt_model_set_grads_ready(dt_model *m, dt_grads_ready_fn fn, void *arg) {
    m->grads_ready = fn;
    m->grads_ready_arg = arg;
}

float dt_model_backward(dt_model *m, const uint8_t *labels, int *correct) {
    return dt_model_backward_input(m, labels, correct, NULL);
}
