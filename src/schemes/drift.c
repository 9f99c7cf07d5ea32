/* Remedies for drift in the gossip schemes (drift.h). */
#include "schemes/drift.h"

#include <stdlib.h>

#include "core/alloc.h"

struct dt_drift {
    dt_drift_opts opts;
    dt_gossip *g;
    dt_tracking *track; /* NULL: no --tracking */
    dt_qgm *qgm;      /* NULL: local momentum (or none) */
    dt_outer *outer;  /* NULL: none, or the plain average (opts.outer_every says which) */
    float *buf;       /* outer_every: [x | state] summed */
    double saved_every; /* the "outer_every" record (records keep pointers until written) */
};

dt_status dt_drift_create(const dt_drift_opts *o, dt_step_ctx *c, const dt_drift_gossip *gossip, dt_drift **out) {
    *out = NULL;
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model);
    dt_qgm *q = NULL;
    /* auto: QGM where it won on data split by class and lost nothing on the random split
     * (dpsgd), and only for SGD (AdamW keeps its moments; an explicit qgm is refused there) */
    const int qgm = o->momentum_kind == DT_MOMENTUM_QGM ||
                    (o->momentum_kind == DT_MOMENTUM_AUTO && gossip->qgm_by_default && c->opt->cfg.kind == DT_OPTIM_SGD);
    if (qgm) {
        dt_status st = dt_qgm_create(c->opt, np, &q);
        if (st != DT_OK) return st;
    }
    if (!q && o->outer_every == 0 && !o->tracking) return DT_OK;
    dt_drift *d;
    if (dt_calloc(d, 1, "the drift remedies") != DT_OK) {
        dt_qgm_free(q);
        return dt_allocated(d);
    }
    d->opts = *o;
    d->g = gossip->g;
    d->qgm = q;
    *out = d;
    dt_status st = o->tracking ? dt_tracking_create(c, gossip->topology, gossip->codec, gossip->trig, &d->track) : DT_OK;
    if (st != DT_OK || o->outer_every == 0) return st;
    /* the master starts at the starting model, the same on every rank */
    st = dt_outer_create(&o->outer, dt_model_params(c->model), np, &d->outer);
    if (st == DT_OK) st = dt_malloc(d->buf, np + ns, "the exact average of %zu values", np + ns);
    return st;
}

void dt_drift_free(dt_drift *d) {
    if (!d) return;
    dt_tracking_free(d->track);
    dt_qgm_free(d->qgm);
    dt_outer_free(d->outer);
    dt_free_all(d->buf, d);
}

void dt_drift_begin_step(dt_drift *d, dt_step_ctx *c) {
    if (d) dt_qgm_begin_step(d->qgm, c);
}

dt_status dt_drift_track(dt_drift *d, dt_step_ctx *c, int sync) {
    return d && d->track ? dt_tracking_step(d->track, c, sync) : DT_OK;
}

dt_status dt_drift_finish(dt_drift *d, dt_step_ctx *c) {
    return d && d->track ? dt_tracking_finish(d->track, c) : DT_OK;
}

void dt_drift_abandon(dt_drift *d) {
    if (d) dt_tracking_abandon(d->track);
}

/* One counted allreduce of [x | state]: every rank takes the mean; the outer optimizer steps on
 * master - mean; every copy of every rank's model is then that model. */
static dt_status average_exactly(dt_drift *d, dt_step_ctx *c) {
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model);
    float *x = dt_model_params(c->model), *state = dt_model_state(c->model);
    for (size_t i = 0; i < np; i++) d->buf[i] = x[i];
    for (size_t i = 0; i < ns; i++) d->buf[np + i] = state[i];
    dt_status st = dt_allreduce_sum(c->comm, d->buf, np + ns);
    if (st != DT_OK) return st;
    const float inv = 1.0f / (float)c->comm->size;
    for (size_t i = 0; i < np; i++) x[i] = d->buf[i] * inv;
    for (size_t i = 0; i < ns; i++) state[i] = d->buf[np + i] * inv;
    if (d->outer) {
        dt_outer_pseudo_gradient(d->outer, x);
        dt_outer_step(d->outer, x);
    }
    dt_gossip_agree(d->g, x);
    return DT_OK;
}

dt_status dt_drift_end_step(dt_drift *d, dt_step_ctx *c) {
    if (!d) return DT_OK;
    dt_qgm_end_step(d->qgm, c);
    if (d->opts.outer_every == 0 || (c->step + 1) % d->opts.outer_every != 0) return DT_OK;
    return average_exactly(d, c);
}

dt_status dt_drift_save(dt_drift *d, dt_records *out) {
    if (!d) return DT_OK;
    dt_status st = d->track ? dt_tracking_save(d->track, out) : DT_OK;
    if (st == DT_OK) st = dt_qgm_save(d->qgm, out);
    if (st != DT_OK || d->opts.outer_every == 0) return st;
    d->saved_every = (double)d->opts.outer_every;
    st = dt_records_add_raw(out, "outer_every", &d->saved_every, sizeof d->saved_every);
    return st == DT_OK ? dt_outer_save(d->outer, &d->opts.outer, out) : st;
}

dt_status dt_drift_load(dt_drift *d, const dt_tfile *f, const char *path) {
    const int tracked = dt_tfile_find(f, "tracker") != NULL, tracking = d && d->track;
    if (tracked != tracking)
        return dt_fail(DT_ERR_ARG, "--tracking: %s was saved by a run %s gradient tracking, this run has %s", path,
                       tracked ? "with" : "without", tracking ? "it" : "none");
    if (tracking) {
        dt_status st = dt_tracking_load(d->track, f, path);
        if (st != DT_OK) return st;
    }
    double every = 0;
    if (dt_tfile_find(f, "outer_every")) {
        dt_status st = dt_tfile_take(f, path, "outer_every", &every, sizeof every);
        if (st != DT_OK) return st;
    }
    const long mine = d ? d->opts.outer_every : 0;
    if (every != (double)mine)
        return dt_fail(DT_ERR_ARG, "--outer-every: %s was saved by a run with --outer-every %g, this run has %ld", path,
                       every, mine);
    dt_status st = dt_qgm_load(d ? d->qgm : NULL, f, path);
    if (st == DT_OK && mine) st = dt_outer_load(d->outer, &d->opts.outer, "a gossip scheme", f, path);
    return st;
}

dt_status dt_drift_hook_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    dt_status st = dt_gossip_hook_save(s, c, out);
    return st == DT_OK ? dt_drift_save(((dt_gossip_head *)s->impl)->drift, out) : st;
}

dt_status dt_drift_hook_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    dt_status st = dt_gossip_hook_load(s, c, f, path);
    return st == DT_OK ? dt_drift_load(((dt_gossip_head *)s->impl)->drift, f, path) : st;
}

dt_status dt_drift_hook_finish(dt_scheme *s, dt_step_ctx *c) {
    dt_status st = dt_gossip_hook_finish(s, c);
    dt_status st2 = dt_drift_finish(((dt_gossip_head *)s->impl)->drift, c); /* collective: even after a failure */
    return st == DT_OK ? st2 : st;
}

void dt_drift_hook_abandon(dt_scheme *s, dt_step_ctx *c) {
    dt_gossip_hook_abandon(s, c);
    dt_drift_abandon(((dt_gossip_head *)s->impl)->drift);
}

void dt_drift_head_free(dt_scheme *s) {
    dt_gossip_head *h = s->impl;
    dt_gossip_free(h->g);
    dt_drift_free(h->drift);
}
