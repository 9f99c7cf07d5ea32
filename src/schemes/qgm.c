/* Quasi-global momentum (qgm.h). */
#include "schemes/qgm.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

const char *const dt_momentum_kinds[] = {"auto", "local", "qgm", NULL};

struct dt_qgm {
    size_t np;
    float mu;
    float *mhat;   /* the quasi-global buffer */
    float *x_prev; /* the model at the step's start */
};

dt_status dt_qgm_create(const dt_optim *opt, size_t np, dt_qgm **out) {
    *out = NULL;
    if (opt->cfg.kind != DT_OPTIM_SGD)
        return dt_fail(DT_ERR_ARG, "--momentum-kind qgm: quasi-global momentum replaces SGD's momentum buffer; "
                       "use it with --optim sgd");
    if (opt->cfg.momentum == 0) return DT_OK; /* the buffer is never read */
    dt_qgm *q;
    DT_TRY(dt_calloc(q, 1, "quasi-global momentum"));
    q->np = np;
    q->mu = opt->cfg.momentum;
    dt_status st;
    if ((st = dt_calloc(q->mhat, np, "the quasi-global momentum of %zu parameters", np)) != DT_OK ||
        (st = dt_malloc(q->x_prev, np, "a copy of %zu parameters", np)) != DT_OK) {
        dt_qgm_free(q);
        return st;
    }
    *out = q;
    return DT_OK;
}

void dt_qgm_free(dt_qgm *q) {
    if (q) dt_free_all(q->mhat, q->x_prev, q);
}

void dt_qgm_begin_step(dt_qgm *q, dt_step_ctx *c) {
    if (!q) return;
    memcpy(q->x_prev, dt_model_params(c->model), q->np * sizeof(float));
    /* SGD's first step starts its buffer at the gradient, which is mu * 0 + g: mhat is 0 then */
    memcpy(c->opt->m, q->mhat, q->np * sizeof(float));
}

void dt_qgm_end_step(dt_qgm *q, dt_step_ctx *c) {
    /* a step at lr 0 (a schedule's end) moved x by mixing alone: no gradient direction to learn */
    if (!q || c->lr == 0) return;
    const float *x = dt_model_params(c->model);
    const float inv_lr = 1.0f / c->lr, mu = q->mu, one_minus = 1.0f - q->mu;
    for (size_t i = 0; i < q->np; i++) q->mhat[i] = mu * q->mhat[i] + one_minus * ((q->x_prev[i] - x[i]) * inv_lr);
}

dt_status dt_qgm_save(const dt_qgm *q, dt_records *out) {
    return q ? dt_records_add(out, "qgm_momentum", q->mhat, q->np) : DT_OK;
}

dt_status dt_qgm_load(dt_qgm *q, const dt_tfile *f, const char *path) {
    const int saved = dt_tfile_find(f, "qgm_momentum") != NULL;
    if (saved && !q)
        return dt_fail(DT_ERR_ARG, "--momentum-kind: %s was saved with quasi-global momentum (qgm, --momentum > 0); "
                       "this run has none", path);
    if (!q) return DT_OK;
    if (!saved)
        return dt_fail(DT_ERR_ARG, "--momentum-kind qgm: %s was saved without quasi-global momentum", path);
    return dt_tfile_take(f, path, "qgm_momentum", q->mhat, q->np * sizeof(float));
}
