/* allreduce's PowerSGD transport (--compress powersgd:R): MPI sums the low-rank factors of
 * each gradient matrix (powersgd.h) in the plain transport's buckets, from --powersgd-start
 * on; the steps before it are the plain transport's. Even with --bucket-kb 0 the factors go
 * as one bucket after backward (PowerSGD's first allreduce is a started one). */
#include <stdlib.h>

#include "core/alloc.h"
#include "schemes/allreduce_transport.h"
#include "schemes/powersgd.h"

typedef struct {
    dt_powersgd *p;
    long start; /* --powersgd-start */
} psgd_state;

/* this step sums PowerSGD's factors (its plain steps are over) */
static int psgd_on(const psgd_state *p, const dt_step_ctx *c) { return c->step >= p->start; }

static int psgd_takes(const dt_scheme *s, const dt_step_ctx *c) {
    (void)c;
    return s->codec.kind == DT_CODEC_POWERSGD;
}

static dt_status psgd_create(const dt_scheme *s, dt_step_ctx *c, void **out) {
    psgd_state *p;
    const dt_status made = dt_calloc(p, 1, "allreduce's PowerSGD state");
    *out = p;
    if (made != DT_OK) return made;
    p->start = ((const dt_allreduce_opts *)s->opts)->powersgd_start;
    return dt_powersgd_create(c->model, s->codec.rank, &p->p);
}

static void psgd_free(void *t) {
    psgd_state *p = t;
    if (!p) return;
    dt_powersgd_free(p->p);
    free(p);
}

static dt_status psgd_start_bucket(void *t, dt_step_ctx *c, size_t from, size_t to, MPI_Request *req) {
    psgd_state *p = t;
    if (!psgd_on(p, c)) return dt_allreduce_via_plain.start_bucket(NULL, c, from, to, req);
    return dt_powersgd_start(p->p, c->comm, dt_model_grads(c->model), from, to, req);
}

static dt_status psgd_finish(void *t, dt_step_ctx *c, dt_status st) {
    psgd_state *p = t;
    if (st == DT_OK && psgd_on(p, c)) return dt_powersgd_finish(p->p, c->comm, dt_model_grads(c->model));
    return dt_allreduce_via_plain.finish(NULL, c, st);
}

/* checkpoints: the error feedback and the warm-started Q's */
static dt_status psgd_save(void *t, dt_records *out) { return dt_powersgd_save(((psgd_state *)t)->p, out); }

static dt_status psgd_load(void *t, const dt_tfile *f, const char *path) {
    return dt_powersgd_load(((psgd_state *)t)->p, f, path);
}

const dt_allreduce_transport dt_allreduce_via_psgd = {
    .takes = psgd_takes, .create = psgd_create, .start_bucket = psgd_start_bucket, .finish = psgd_finish,
    .save = psgd_save, .load = psgd_load, .destroy = psgd_free,
};
