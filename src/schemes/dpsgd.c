/* dpsgd: decentralized neighbour averaging every step (Lian et al. 2017). Every tensor goes
 * to every neighbour every step through the one-sided windows of gossip.h, in lock-step, and
 * step k mixes the neighbours' x_j(k) before the local gradient step. It is EventGraD in
 * lock-step with threshold 0 and the same --momentum-kind, and the tests hold the two equal bit
 * for bit (--momentum-kind auto: quasi-global momentum here, drift.h; local in eventgrad).
 * --compress: parameter payloads against copies (gossip.h). The remedies for drift of drift.h:
 * quasi-global momentum, an outer step every H steps. */
#include <stdlib.h>

#include "comm/topology.h"
#include "core/alloc.h"
#include "schemes/drift.h"

typedef struct {
    dt_gossip *g;   /* first, then drift: the shared hooks find them there (dt_gossip_head) */
    dt_drift *drift;
    int *all;     /* every tensor index */
    int T;
} dpsgd_impl;

typedef struct {
    int topology; /* dt_topology_kinds */
    dt_drift_opts drift;
} dpsgd_opts;

static const dt_flag dpsgd_flags[] = {
    {"topology", DT_AT_CHOICE(dpsgd_opts, topology, dt_topology_kinds), .def = "ring",
     .help = "ring | torus | exponential | complete"},
    DT_DRIFT_FLAGS(dpsgd_opts, drift),
};

static dt_status dpsgd_start(dt_scheme *s, dt_step_ctx *c) {
    dpsgd_impl *d = s->impl;
    d->T = dt_model_num_tensors(c->model);
    DT_TRY(dt_malloc(d->all, (size_t)d->T, "dpsgd's list of %d tensors", d->T));
    for (int i = 0; i < d->T; i++) d->all[i] = i;
    const dpsgd_opts *o = s->opts;
    dt_status st = dt_gossip_create(c, dt_topology_kinds[o->topology], &s->codec, &d->g);
    const dt_drift_gossip gossip = {d->g, dt_topology_kinds[o->topology], &s->codec, NULL, 1};
    return st == DT_OK ? dt_drift_create(&o->drift, c, &gossip, &d->drift) : st;
}

static dt_status dpsgd_after_backward(dt_scheme *s, dt_step_ctx *c) {
    dpsgd_impl *d = s->impl;
    float *x = dt_model_params(c->model);
    dt_drift_begin_step(d->drift, c);
    dt_status st = dt_gossip_send(d->g, c->comm, d->all, d->T, x);
    if (st == DT_OK) st = dt_gossip_receive_sync(d->g, c->comm);
    if (st == DT_OK) st = dt_drift_track(d->drift, c, 1);
    if (st == DT_OK) dt_gossip_mix(d->g, x); /* x(k+1) before the gradient step */
    return st;
}

static dt_status dpsgd_end_step(dt_scheme *s, dt_step_ctx *c) {
    dpsgd_impl *d = s->impl;
    return dt_drift_end_step(d->drift, c);
}

static void dpsgd_destroy(dt_scheme *s) {
    dt_drift_head_free(s);
    dt_free_all(((dpsgd_impl *)s->impl)->all, s->impl);
}

static const dt_scheme_ops dpsgd_ops = {
    .start = dpsgd_start,
    .after_backward = dpsgd_after_backward,
    .end_step = dpsgd_end_step,
    DT_DRIFT_HOOKS,
    .destroy = dpsgd_destroy,
};

static dt_status dpsgd_create(dt_scheme *s) {
    dpsgd_impl *d;
    /* own baseline: it sends less than every tensor every step */
    return dt_scheme_new(s, d, &dpsgd_ops, DT_SCHEME_DECENTRALIZED | DT_SCHEME_OWN_BASELINE);
}

const dt_scheme_def dt_scheme_dpsgd = {
    .name = "dpsgd", .summary = "average with the graph neighbours every step (one-sided, lock-step)",
    DT_SCHEME_FLAGS(dpsgd_flags, dpsgd_opts), .compress = DT_COMPRESS_YES, .create = dpsgd_create,
};
