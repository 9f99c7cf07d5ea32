/* eventgrad: event-triggered decentralized SGD (docs/algorithms.md).
 * Each step, after the local gradient at x(k): every tensor whose norm moved by at least its
 * threshold since it was last sent (the sender rule of trigger.h) is written into every
 * neighbour's window (gossip.h: one-sided, the receiver takes no part); then the rank mixes
 * its parameters with the last values it received from each neighbour (--mix: as the paper,
 * only what arrived, or by a consensus step between the copies), and the trainer applies the
 * local gradient step. --sync makes it lock-step (deterministic: with const:0 it
 * is dpsgd bit for bit); without it nobody waits. --compress needs --sync (gossip.h).
 *
 * --mix sum is asynchronous SGD without a server: what a rank sends, on the same trigger, is the
 * running sum of its own updates u = x - base (base: the starting weights plus every neighbour's
 * sum applied so far), and a rank adds what each neighbour's sum gained to x, in full, as a
 * parameter server adds each worker's step. So every rank's model is the starting weights plus
 * every rank's updates that have arrived; sums, unlike parameters, lose nothing when a slot's
 * newer value replaces an older one. Every rank must hear every rank (a complete graph), and at
 * the end every tensor goes once more, so all ranks end with all updates.
 *
 * The remedies for drift of drift.h: quasi-global momentum, an outer step every H steps (not
 * with --mix sum, whose sums would not survive an average). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/topology.h"
#include "core/alloc.h"
#include "schemes/drift.h"
#include "schemes/trigger.h"

typedef struct {
    dt_gossip *g;   /* first, then drift: the shared hooks find them there (dt_gossip_head) */
    dt_drift *drift;
    int sync;
    int mix;        /* --mix: MIX_EVERY, MIX_FRESH or MIX_CONSENSUS (auto resolved) */
    float gamma;    /* --gamma, for --mix consensus */
    dt_trigger trig;
    int *send_list; /* tensors triggered this step */
    float *u;       /* --mix sum: this rank's own updates, x - base (what it sends) */
    float *base;    /* --mix sum: the starting weights plus the neighbours' sums applied */
    float *applied; /* --mix sum: the sum of the neighbours' sums applied so far */
} eg_impl;

enum { MIX_AUTO, MIX_EVERY, MIX_FRESH, MIX_CONSENSUS, MIX_SUM };
static const char *const mix_words[] = {"auto", "every", "fresh", "consensus", "sum", NULL};

typedef struct {
    int topology;          /* dt_topology_kinds */
    dt_trigger_opts trig;  /* the sender rule's flags */
    int sync, mix, max_lag;
    float gamma;
    dt_drift_opts drift;
} eg_opts;

static const dt_flag eg_flags[] = {
    {"topology", DT_AT_CHOICE(eg_opts, topology, dt_topology_kinds), .def = "ring",
     .help = "ring | torus | exponential | complete"},
    {"threshold", DT_AT_CUSTOM(eg_opts, trig.threshold, dt_threshold, dt_threshold_parse, dt_threshold_format),
     .def = "adaptive", .help = "adaptive | const:C"},
    {"horizon", DT_AT_FLOAT(eg_opts, trig.horizon), .def = "2", .min = 0, .max = 1e9, .min_open = 1,
     .help = "the threshold is horizon x the mean slope"},
    {"history", DT_AT_INT(eg_opts, trig.history), .def = "2", .min = 1, .max = 1000,
     .help = "adaptive thresholds: slopes averaged"},
    {"threshold-decay", DT_AT_FLOAT(eg_opts, trig.decay), .def = "1", .min = 0, .max = 1, .min_open = 1,
     .help = "threshold factor per step without a send, (0, 1]"},
    {"warmup-steps", DT_AT_INT(eg_opts, trig.warmup), .def = "30", .min = 0, .max = 1e9,
     .help = "always send during the first N steps",
     .reach = DT_REACH_START_STEPS, .unreached = "the trigger never holds a send back, as in dpsgd"},
    {"sync", DT_AT_SWITCH(eg_opts, sync), .def = "0", .help = "lock-step, deterministic"},
    {"mix", DT_AT_CHOICE(eg_opts, mix, mix_words), .def = "auto",
     .help = "every: every tensor every step, with the last copies (the paper) | fresh: only tensors of which something "
             "new arrived | consensus: those, by a consensus step of --gamma | sum: send the sum of the own updates and add the "
             "neighbours' in full (asynchronous SGD without a server; --topology complete) | auto: consensus without "
             "--sync"},
    {"gamma", DT_AT_FLOAT(eg_opts, gamma), .def = "0.5", .min = 0, .max = 1, .min_open = 1, .zero = "",
     .help = "consensus step size, (0, 1] (eventgrad: of --mix consensus) [" DT_GAMMA_DEFAULT_HELP "]"},
    {"max-lag", DT_AT_INT(eg_opts, max_lag), .def = "6", .min = 0, .max = 1000,
     .help = "asynchronous: steps a round of sends may be on its way while the next ones compute (0: each send waits "
             "for the link)"},
    DT_DRIFT_FLAGS(eg_opts, drift),
};

/* --mix sum: a neighbour's sum starts at zero; base at this rank's starting weights */
static dt_status start_sums(eg_impl *e, dt_step_ctx *c) {
    if (dt_gossip_num_neighbours(e->g) != c->comm->size - 1)
        return dt_fail(DT_ERR_ARG, "--mix sum: every rank must hear every other (%d neighbours of %d ranks); use "
                       "--topology complete", dt_gossip_num_neighbours(e->g), c->comm->size);
    /* one block, u's: destroy frees it as one */
    const size_t np = dt_model_num_params(c->model), n1 = np ? np : 1;
    DT_TRY(dt_calloc(e->u, 3 * n1, "3 copies of %zu parameters", np));
    e->base = e->u + n1;
    e->applied = e->base + n1;
    memcpy(e->base, dt_model_params(c->model), np * sizeof(float));
    dt_gossip_zero_copies(e->g);
    return DT_OK;
}

static dt_status eg_start(dt_scheme *s, dt_step_ctx *c) {
    eg_impl *e = s->impl;
    const eg_opts *o = s->opts;
    const int T = dt_model_num_tensors(c->model);
    dt_status st = dt_trigger_init(&e->trig, T, &o->trig);
    if (st != DT_OK) return st;
    DT_TRY(dt_malloc(e->send_list, (size_t)T, "eventgrad's send list of %d tensors", T));
    st = dt_gossip_create(c, dt_topology_kinds[o->topology], &s->codec, &e->g);
    /* without --sync nobody waits for anyone, the link included: sends overlap the next steps */
    if (st == DT_OK && !e->sync && o->max_lag > 0) st = dt_gossip_overlap(e->g, o->max_lag);
    if (st == DT_OK && e->mix == MIX_CONSENSUS) st = dt_gossip_keep_own_copy(e->g, dt_model_params(c->model));
    if (st == DT_OK && e->mix == MIX_SUM) st = start_sums(e, c);
    const dt_drift_gossip gossip = {e->g, dt_topology_kinds[o->topology], &s->codec, &o->trig, 0};
    if (st == DT_OK) st = dt_drift_create(&o->drift, c, &gossip, &e->drift);
    return st;
}

static double tensor_norm(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

static dt_status eg_grads_ready(dt_scheme *s, dt_step_ctx *c, size_t from) {
    eg_impl *e = s->impl;
    (void)c;
    (void)from;
    return e->sync ? DT_OK : dt_gossip_progress(e->g);
}

/* The tensors of v whose norm moved past their thresholds, to every neighbour (one flush
 * round), and what arrived */
static dt_status send_triggered(eg_impl *e, dt_step_ctx *c, const float *v) {
    int nsend = 0;
    for (int i = 0; i < e->trig.T; i++) {
        const dt_tensor_view *t = dt_model_tensor(c->model, i);
        if (dt_trigger_decide(&e->trig, i, c->step, tensor_norm(v + t->offset, t->numel))) e->send_list[nsend++] = i;
    }
    dt_status st = dt_gossip_send(e->g, c->comm, e->send_list, nsend, v);
    if (st == DT_OK) st = e->sync ? dt_gossip_receive_sync(e->g, c->comm) : dt_gossip_receive(e->g, c->comm);
    /* the tracker, on the same rule (not with --mix sum: refused) */
    if (st == DT_OK && e->mix != MIX_SUM) st = dt_drift_track(e->drift, c, e->sync);
    return st;
}

static dt_status eg_after_backward(dt_scheme *s, dt_step_ctx *c) {
    eg_impl *e = s->impl;
    dt_drift_begin_step(e->drift, c);
    if (e->mix == MIX_SUM) return DT_OK; /* end_step: the sums include this step's update */
    float *x = dt_model_params(c->model);
    dt_status st = send_triggered(e, c, x);
    if (st == DT_OK) { /* x(k+1) before the gradient step */
        if (e->mix == MIX_CONSENSUS) dt_gossip_mix_consensus_fresh(e->g, x, e->gamma);
        else if (e->mix == MIX_FRESH) dt_gossip_mix_fresh(e->g, x);
        else dt_gossip_mix(e->g, x);
    }
    return st;
}

/* u = x - base */
static void own_updates(eg_impl *e, const float *x, size_t np) {
    for (size_t p = 0; p < np; p++) e->u[p] = x[p] - e->base[p];
}

/* --mix sum, after the gradient step: the own sum out, the neighbours' gains in */
static dt_status eg_end_step(dt_scheme *s, dt_step_ctx *c) {
    eg_impl *e = s->impl;
    if (e->mix != MIX_SUM) return dt_drift_end_step(e->drift, c);
    float *x = dt_model_params(c->model);
    own_updates(e, x, dt_model_num_params(c->model));
    dt_status st = send_triggered(e, c, e->u);
    if (st == DT_OK) dt_gossip_apply_sums_fresh(e->g, x, e->applied, e->base);
    return st == DT_OK ? dt_drift_end_step(e->drift, c) : st;
}

/* --mix sum: every tensor once more, so what the trigger held back reaches every rank; then
 * the drain (gossip.h) and what it brought */
static dt_status eg_finish(dt_scheme *s, dt_step_ctx *c) {
    eg_impl *e = s->impl;
    if (e->mix != MIX_SUM) return dt_drift_hook_finish(s, c);
    float *x = dt_model_params(c->model);
    own_updates(e, x, dt_model_num_params(c->model));
    for (int i = 0; i < e->trig.T; i++) e->send_list[i] = i;
    dt_status st = dt_gossip_send(e->g, c->comm, e->send_list, e->trig.T, e->u);
    dt_status st2 = dt_gossip_drain(e->g, c->comm); /* collective: even after a failed send */
    if (st == DT_OK) st = st2;
    if (st == DT_OK) dt_gossip_apply_sums_fresh(e->g, x, e->applied, e->base);
    return st;
}

/* Checkpoints: the sender rule's state per tensor and the gossip state; --history shapes
 * the saved slopes, so it is part of the graph record */
/* What the graph record says is kept beside the neighbours' copies: consensus keeps the own
 * copy (1), sum its base and what it applied (2) */
static int state_kept(const eg_impl *e) { return e->mix == MIX_CONSENSUS ? 1 : e->mix == MIX_SUM ? 2 : 0; }

static dt_status eg_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    eg_impl *e = s->impl;
    const int shape[2] = {e->trig.history, state_kept(e)};
    dt_status st = dt_gossip_save(e->g, shape, 2, out);
    const size_t bytes = dt_model_num_params(c->model) * sizeof(float);
    if (st == DT_OK && e->mix == MIX_SUM) st = dt_records_add_raw(out, "sum_base", e->base, bytes);
    if (st == DT_OK && e->mix == MIX_SUM) st = dt_records_add_raw(out, "sum_applied", e->applied, bytes);
    if (st == DT_OK) st = dt_drift_save(e->drift, out);
    return st == DT_OK ? dt_trigger_save(&e->trig, out) : st;
}

static dt_status eg_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    eg_impl *e = s->impl;
    const int shape[2] = {e->trig.history, state_kept(e)};
    dt_status st = dt_gossip_load(e->g, c->comm, shape, 2, "--topology, --history or --mix", f, path);
    const size_t bytes = dt_model_num_params(c->model) * sizeof(float);
    if (st == DT_OK && e->mix == MIX_SUM) st = dt_tfile_take(f, path, "sum_base", e->base, bytes);
    if (st == DT_OK && e->mix == MIX_SUM) st = dt_tfile_take(f, path, "sum_applied", e->applied, bytes);
    if (st == DT_OK) st = dt_drift_load(e->drift, f, path);
    return st == DT_OK ? dt_trigger_load(&e->trig, f, path) : st;
}

static void eg_destroy(dt_scheme *s) {
    eg_impl *e = s->impl;
    dt_drift_head_free(s);
    dt_trigger_free(&e->trig);
    dt_free_all(e->send_list, e->u, e); /* u: base and applied too */
}

static const dt_scheme_ops eg_ops = {
    .start = eg_start,
    .grads_ready = eg_grads_ready,
    .after_backward = eg_after_backward,
    .end_step = eg_end_step,
    .end_epoch = dt_gossip_hook_end_epoch,
    .finish = eg_finish,
    .save_state = eg_save,
    .load_state = eg_load,
    .abandon = dt_drift_hook_abandon,
    .destroy = eg_destroy,
};

static dt_status eg_create(dt_scheme *s) {
    const eg_opts *o = s->opts;
    char codec[32];
    if (s->codec.kind != DT_CODEC_NONE && !o->sync)
        return dt_fail(DT_ERR_ARG, "--compress %s: eventgrad needs --sync (a one-sided slot keeps only the newest "
                       "write, so a change could be overwritten before it is read)",
                       dt_codec_spec_str(&s->codec, codec, sizeof codec));
    if (o->drift.tracking && o->mix == MIX_SUM)
        return dt_fail(DT_ERR_ARG, "--tracking with --mix sum: the sums are of updates, not parameters, and take no "
                       "tracker; use --mix every, fresh or consensus");
    if (o->drift.outer_every > 0 && o->mix == MIX_SUM)
        return dt_fail(DT_ERR_ARG, "--outer-every %ld with --mix sum: the sums of the own updates would not survive an "
                       "average; use --mix every, fresh or consensus", o->drift.outer_every);
    eg_impl *e;
    /* own baseline: it sends less than every tensor every step */
    DT_TRY(dt_scheme_new(s, e, &eg_ops, DT_SCHEME_DECENTRALIZED | DT_SCHEME_OWN_BASELINE));
    e->sync = o->sync;
    e->mix = o->mix != MIX_AUTO ? o->mix : o->sync ? MIX_EVERY : MIX_CONSENSUS;
    e->gamma = o->gamma;
    return DT_OK;
}

const dt_scheme_def dt_scheme_eventgrad = {
    .name = "eventgrad", .summary = "send a tensor to the neighbours only when its norm moved past a threshold",
    DT_SCHEME_FLAGS(eg_flags, eg_opts), .compress = DT_COMPRESS_WITH_SYNC, .create = eg_create,
};
