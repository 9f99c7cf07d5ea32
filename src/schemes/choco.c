/* choco: decentralized SGD with compressed gossip and a consensus step size (CHOCO-SGD,
 * Koloskova, Stich and Jaggi 2019), with the event trigger and local steps of SPARQ-SGD
 * (Singh et al. 2019) as options.
 *
 * Every rank keeps public copies: xhat_self, the copy of its own parameters that all its
 * neighbours hold, and xhat_j for each neighbour j. After the local step x - lr g (end_step),
 * on a communication step (every --gossip-every steps):
 *     q = C(x - xhat_self) per tensor, sent to every neighbour; xhat_self += q, xhat_j += q_j
 *     x += gamma W sum_j (xhat_j - xhat_self)
 * and between two communication steps plain local steps.
 * C is --compress (topk, int8, ...; none sends x). What C leaves out stays in x - xhat_self
 * and goes with a later write (error feedback by construction), so nothing is lost, only
 * delayed; gamma < 1 keeps the lossy copies from pulling too hard (with top-k a smaller one by
 * default: choco_adjust). The copies change only by
 * what was sent, identically on both sides, so a write must be read exactly once: lock-step
 * (gossip.h's packed transport: one two-sided message per neighbour and step). With
 * --trigger R a tensor is written only when x - xhat_self moved past R times the norm of
 * xhat_self (SPARQ's event, relative per tensor); the consensus step still runs at every
 * communication step on the copies held. --trigger 0 --gossip-every 1 is CHOCO-SGD. The remedies
 * for drift of drift.h: quasi-global momentum, an outer step every H steps. */
#include <math.h>
#include <stdlib.h>

#include "comm/topology.h"
#include "core/alloc.h"
#include "schemes/drift.h"

typedef struct {
    dt_gossip *g;  /* first, then drift: the shared hooks find them there (dt_gossip_head) */
    dt_drift *drift;
    int T, *send_list;
    float gamma, trigger;
    int local_steps;
} choco_impl;

typedef struct {
    int topology; /* dt_topology_kinds */
    float gamma, trigger;
    int gamma_given;
    long local_steps;
    int transport; /* transports[] */
    dt_drift_opts drift;
} choco_opts;

static const char *const transports[] = {"packed", "window", NULL};

static const dt_flag choco_flags[] = {
    {"topology", DT_AT_CHOICE(choco_opts, topology, dt_topology_kinds), .def = "ring",
     .help = "ring | torus | exponential | complete"},
    {"gamma", DT_AT_FLOAT(choco_opts, gamma), DT_GIVEN(choco_opts, gamma_given), .def = "0.5", .min = 0, .max = 1,
     .min_open = 1, .zero = "", .help = "consensus step size, (0, 1] [" DT_GAMMA_DEFAULT_HELP "]"},
    {"trigger", DT_AT_FLOAT(choco_opts, trigger), .def = "0", .min = 0, .max = 1e9,
     .help = "send a tensor only when |x - copy| > R |copy| (0: every communication step)"},
    {"gossip-every", DT_AT_INT(choco_opts, local_steps), .def = "1", .min = 1, .max = 1e6,
     .help = "communicate every N steps (SPARQ's local steps)",
     .reach = DT_REACH_EVERY_STEPS, .unreached = "the ranks never gossip and train alone"},
    {"transport", DT_AT_CHOICE(choco_opts, transport, transports), .def = "packed", .hidden = 1,
     .help = "(tests) packed: a message per neighbour and step | window: dpsgd's one-sided puts and tokens"},
    DT_DRIFT_FLAGS(choco_opts, drift),
};

/* --gamma's default with --compress topk:F: 0.5 sqrt(F) (0.5 at F = 1, as uncompressed; 0.158 at
 * topk:0.1, 0.05 at topk:0.01). CHOCO's theory asks gamma to shrink with the compression: its
 * bound is linear in the quality (F for top-k) and far below what works (0.002 for topk:0.1 on
 * a ring of 4). Measured (cnn1, 4 ranks, ring, docs/results.md), the largest stable gamma
 * grows like sqrt(F): 0.1 held and 0.2 diverged at topk:0.01, 0.3 held and 0.5 drifted apart
 * at topk:0.1; 0.5 sqrt(F) stays at half of that. fp16, bf16 and int8 lose too little to matter
 * (0.5 held); a --gamma given is kept. */
static void choco_adjust(void *opts, const dt_codec_spec *codec) {
    choco_opts *o = opts;
    if (!o->gamma_given && codec->kind == DT_CODEC_TOPK) o->gamma = (float)(0.5 * sqrt(codec->frac));
}

static dt_status choco_start(dt_scheme *s, dt_step_ctx *c) {
    choco_impl *k = s->impl;
    const choco_opts *o = s->opts;
    k->T = dt_model_num_tensors(c->model);
    DT_TRY(dt_malloc(k->send_list, (size_t)k->T, "choco's send list of %d tensors", k->T));
    /* lock-step by nature: the packed transport, one message per neighbour and step */
    const char *topology = dt_topology_kinds[o->topology];
    dt_status st = o->transport == 0 ? dt_gossip_create_packed(c, topology, &s->codec, &k->g)
                                     : dt_gossip_create(c, topology, &s->codec, &k->g);
    if (st == DT_OK) st = dt_gossip_keep_own_copy(k->g, dt_model_params(c->model));
    const dt_drift_gossip gossip = {k->g, topology, &s->codec, NULL, 0};
    return st == DT_OK ? dt_drift_create(&o->drift, c, &gossip, &k->drift) : st;
}

static dt_status choco_after_backward(dt_scheme *s, dt_step_ctx *c) {
    choco_impl *k = s->impl;
    dt_drift_begin_step(k->drift, c);
    return DT_OK;
}

static double dist2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return s;
}

static double norm2(const float *a, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * a[i];
    return s;
}

/* after the optimiser's step: CHOCO's x(t + 1/2) */
static dt_status choco_gossip(dt_scheme *s, dt_step_ctx *c) {
    choco_impl *k = s->impl;
    float *x = dt_model_params(c->model);
    const float *own = dt_gossip_own_copy(k->g);
    if ((c->step + 1) % k->local_steps != 0) {
        /* a local step (SPARQ): no consensus either, or the same pull would be added again at
         * every step between two exchanges; the every-step version would have sent every
         * tensor to every neighbour */
        dt_count_baseline(c->comm, (uint64_t)dt_gossip_num_neighbours(k->g) * (uint64_t)k->T);
        return DT_OK;
    }
    int n = 0;
    const double r2 = (double)k->trigger * k->trigger;
    for (int i = 0; i < k->T; i++) {
        const dt_tensor_view *v = dt_model_tensor(c->model, i);
        if (k->trigger == 0 || dist2(x + v->offset, own + v->offset, v->numel) > r2 * norm2(own + v->offset, v->numel))
            k->send_list[n++] = i;
    }
    dt_status st = dt_gossip_send(k->g, c->comm, k->send_list, n, x);
    if (st == DT_OK) st = dt_gossip_receive_sync(k->g, c->comm);
    if (st == DT_OK) dt_gossip_mix_consensus(k->g, x, k->gamma);
    return st;
}

static dt_status choco_end_step(dt_scheme *s, dt_step_ctx *c) {
    choco_impl *k = s->impl;
    dt_status st = choco_gossip(s, c);
    return st == DT_OK ? dt_drift_end_step(k->drift, c) : st;
}

static void choco_destroy(dt_scheme *s) {
    dt_drift_head_free(s);
    dt_free_all(((choco_impl *)s->impl)->send_list, s->impl);
}

static const dt_scheme_ops choco_ops = {
    .start = choco_start,
    .after_backward = choco_after_backward,
    .end_step = choco_end_step,
    DT_DRIFT_HOOKS, /* choco refuses --tracking: its finish and abandon are gossip's */
    .destroy = choco_destroy,
};

static dt_status choco_create(dt_scheme *s) {
    const choco_opts *o = s->opts;
    if (o->drift.tracking)
        return dt_fail(DT_ERR_ARG, "--tracking: gradient tracking is dpsgd's and eventgrad's (choco's copies move by "
                       "compressed differences, a tracker would need its own consensus step)");
    choco_impl *k;
    /* own baseline: it sends less than every tensor every step */
    DT_TRY(dt_scheme_new(s, k, &choco_ops, DT_SCHEME_DECENTRALIZED | DT_SCHEME_OWN_BASELINE));
    k->gamma = o->gamma;
    k->trigger = o->trigger;
    k->local_steps = (int)o->local_steps;
    return DT_OK;
}

const dt_scheme_def dt_scheme_choco = {
    .name = "choco", .summary = "compressed gossip with a consensus step size (CHOCO-SGD; SPARQ's trigger and local steps)",
    DT_SCHEME_FLAGS(choco_flags, choco_opts), .compress = DT_COMPRESS_YES, .create = choco_create,
    .adjust = choco_adjust,
};
