/* eventgrad: event-triggered decentralized SGD (docs/algorithms.md).
 * Each step, after the local gradient at x(k): every tensor whose norm moved by at least its
 * threshold since it was last sent (the sender rule of trigger.h) is written into every
 * neighbour's window (gossip.h: one-sided, the receiver takes no part); then the rank mixes
 * its parameters with the last values it received from each neighbour, and the trainer
 * applies the local gradient step. --sync makes it lock-step (deterministic: with const:0 it
 * is dpsgd bit for bit); without it nobody waits. --compress needs --sync (gossip.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/gossip.h"
#include "algorithms/trigger.h"
#include "comm/topology.h"

typedef struct {
    dt_gossip *g;   /* first: gossip.h's shared hooks find it there */
    int sync;
    int mix_fresh;  /* --mix */
    dt_trigger trig;
    int *send_list; /* tensors triggered this step */
} eg_impl;

static const dt_flag eg_flags[] = {
    {"topology", DT_FLAG_TEXT, "ring", 0, 0, 0, "ring | torus | exponential | complete", 0},
    {"threshold", DT_FLAG_TEXT, "adaptive", 0, 0, 0, "adaptive | const:C", 0},
    {"horizon", DT_FLAG_FLOAT, "1", 0, 1e9, 1, "the threshold is horizon x the mean slope", 0},
    {"history", DT_FLAG_INT, "2", 1, 1000, 0, "adaptive thresholds: slopes averaged", 0},
    {"threshold-decay", DT_FLAG_FLOAT, "1", 0, 1, 1, "threshold factor per step without a send, (0, 1]", 0},
    {"warmup-steps", DT_FLAG_INT, "30", 0, 1e9, 0, "always send during the first N steps", 0},
    {"sync", DT_FLAG_SWITCH, "0", 0, 1, 0, "lock-step, deterministic", 0},
    {"mix", DT_FLAG_TEXT, "auto", 0, 0, 0,
     "every: mix every tensor every step with the last copies (the paper) | fresh: only tensors of which something new arrived | auto: fresh without --sync", 0},
    {"max-lag", DT_FLAG_INT, "6", 0, 1000, 0,
     "asynchronous: steps a round of sends may be on its way while the next ones compute (0: each send waits for the link)", 0},
};

static dt_status eg_start(dt_strategy *s, dt_step_ctx *c) {
    eg_impl *e = s->impl;
    const int T = dt_model_num_tensors(c->model);
    dt_status st = dt_trigger_init(&e->trig, T, dt_algo_text(s, "threshold"), (float)dt_algo_float(s, "horizon"),
                                   (int)dt_algo_int(s, "history"), (float)dt_algo_float(s, "threshold-decay"),
                                   dt_algo_int(s, "warmup-steps"));
    if (st != DT_OK) return st;
    if (!(e->send_list = malloc((size_t)(T ? T : 1) * sizeof *e->send_list))) return dt_fail(DT_ERR_NOMEM, "out of memory");
    st = dt_gossip_create(c, dt_algo_text(s, "topology"), &s->codec, &e->g);
    /* without --sync nobody waits for anyone, the link included: sends overlap the next steps */
    const int max_lag = (int)dt_algo_int(s, "max-lag");
    if (st == DT_OK && !e->sync && max_lag > 0) st = dt_gossip_overlap(e->g, max_lag);
    return st;
}

static double tensor_norm(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

static dt_status eg_grads_ready(dt_strategy *s, dt_step_ctx *c, size_t from) {
    eg_impl *e = s->impl;
    (void)c;
    (void)from;
    return e->sync ? DT_OK : dt_gossip_progress(e->g);
}

static dt_status eg_after_backward(dt_strategy *s, dt_step_ctx *c) {
    eg_impl *e = s->impl;
    float *x = dt_model_params(c->model);
    int nsend = 0;
    for (int i = 0; i < e->trig.T; i++) {
        const dt_tensor_view *v = dt_model_tensor(c->model, i);
        if (dt_trigger_decide(&e->trig, i, c->step, tensor_norm(x + v->offset, v->numel))) e->send_list[nsend++] = i;
    }
    /* all triggered tensors to all neighbours: one flush round per step */
    dt_status st = dt_gossip_send(e->g, c->comm, e->send_list, nsend, x);
    if (st == DT_OK) st = e->sync ? dt_gossip_receive_sync(e->g, c->comm) : dt_gossip_receive(e->g, c->comm);
    if (st == DT_OK) { /* x(k+1) before the gradient step */
        if (e->mix_fresh) dt_gossip_mix_fresh(e->g, x);
        else dt_gossip_mix(e->g, x);
    }
    return st;
}

/* Checkpoints: the sender rule's state per tensor and the gossip state; --history shapes
 * the saved slopes, so it is part of the graph record */
static dt_status eg_save(dt_strategy *s, dt_step_ctx *c, dt_records *out) {
    eg_impl *e = s->impl;
    (void)c;
    dt_status st = dt_gossip_save(e->g, "eventgrad", &e->trig.history, 1, out);
    return st == DT_OK ? dt_trigger_save(&e->trig, "eventgrad", out) : st;
}

static dt_status eg_load(dt_strategy *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    eg_impl *e = s->impl;
    dt_status st = dt_gossip_load(e->g, c->comm, "eventgrad", &e->trig.history, 1, "--topology or --history", f, path);
    return st == DT_OK ? dt_trigger_load(&e->trig, "eventgrad", f, path) : st;
}

static void eg_destroy(dt_strategy *s) {
    eg_impl *e = s->impl;
    if (!e) return;
    dt_gossip_free(e->g);
    dt_trigger_free(&e->trig);
    free(e->send_list);
    free(e);
}

static const dt_strategy_ops eg_ops = {
    .start = eg_start,
    .grads_ready = eg_grads_ready,
    .after_backward = eg_after_backward,
    .end_epoch = dt_gossip_hook_end_epoch,
    .finish = dt_gossip_hook_finish,
    .save_state = eg_save,
    .load_state = eg_load,
    .abandon = dt_gossip_hook_abandon,
    .destroy = eg_destroy,
};

static dt_status eg_create(dt_strategy *s) {
    const int sync = dt_algo_switch(s, "sync");
    const char *topo = dt_algo_text(s, "topology");
    /* the threshold's words are checked here, before any rank starts */
    dt_trigger probe;
    dt_status st = dt_trigger_init(&probe, 0, dt_algo_text(s, "threshold"), 1.0f, 1, 1.0f, 0);
    if (st != DT_OK) return st;
    dt_trigger_free(&probe);
    if (s->codec.kind != DT_CODEC_NONE && !sync)
        return dt_fail(DT_ERR_ARG, "--compress %s: eventgrad needs --sync (a one-sided slot keeps only the newest "
                       "write, so a change could be overwritten before it is read)", s->cfg->compress);
    const char *mix = dt_algo_text(s, "mix");
    if (strcmp(mix, "auto") && strcmp(mix, "every") && strcmp(mix, "fresh"))
        return dt_fail(DT_ERR_ARG, "--mix %s: expected auto, every or fresh", mix);
    if (!dt_topology_known(topo))
        return dt_fail(DT_ERR_ARG, "--topology %s: expected ring, torus, exponential or complete", topo);
    eg_impl *e = calloc(1, sizeof *e);
    if (!e) return dt_fail(DT_ERR_NOMEM, "out of memory");
    e->sync = sync;
    e->mix_fresh = !strcmp(mix, "fresh") || (!strcmp(mix, "auto") && !sync);
    s->impl = e;
    s->ops = &eg_ops;
    s->decentralized = 1;
    return DT_OK;
}

const dt_scheme dt_scheme_eventgrad = {
    .name = "eventgrad", .summary = "send a tensor to the neighbours only when its norm moved past a threshold",
    DT_FLAG_TABLE(eg_flags), .compress = DT_COMPRESS_WITH_SYNC, .create = eg_create,
};
