/* ps: a synchronous parameter server on rank 0 (which also trains).
 * grad:   the ranks' gradients are summed on rank 0, averaged, one optimiser step is applied
 *         there, and the new weights are broadcast (gather + broadcast);
 * weight: every rank applies its own gradient, rank 0 averages the weights (and batch-norm
 *         statistics) and broadcasts them. Both are deterministic; grad equals allreduce. */
#include <stdlib.h>
#include <string.h>

#include "algorithms/strategy.h"
#include "trainer/trainer.h"

typedef struct { int weight_mode; float *sum; size_t cap; } ps_impl;

static dt_status reserve(ps_impl *p, size_t n) {
    if (n <= p->cap) return DT_OK;
    float *nb = realloc(p->sum, n * sizeof(float));
    if (!nb) return dt_fail(DT_ERR_NOMEM, "out of memory");
    p->sum = nb;
    p->cap = n;
    return DT_OK;
}

/* grad mode: rank 0 averages the gradients and steps; everyone receives the weights */
static dt_status ps_grad_step(dt_strategy *s, dt_trainer *t, float lr) {
    ps_impl *p = s->impl;
    const size_t n = dt_model_num_params(t->model);
    uint64_t before = t->comm.c.msgs_sent;
    dt_status st = reserve(p, n);
    if (st == DT_OK) st = dt_reduce_sum(&t->comm, dt_model_grads(t->model), p->sum, n);
    if (st != DT_OK) return st;
    if (t->comm.rank == 0) {
        const float inv = 1.0f / (float)t->comm.size;
        for (size_t i = 0; i < n; i++) p->sum[i] *= inv;
        dt_sgd_step(&t->opt, dt_model_params(t->model), p->sum, lr);
    }
    st = dt_bcast(&t->comm, dt_model_params(t->model), n, 0);
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before;
    return st;
}

/* weight mode: after the local steps, rank 0 averages weights and state and broadcasts */
static dt_status ps_weight_end_step(dt_strategy *s, dt_trainer *t) {
    ps_impl *p = s->impl;
    const size_t np = dt_model_num_params(t->model), ns = dt_model_num_state(t->model);
    uint64_t before = t->comm.c.msgs_sent;
    float *x = dt_model_params(t->model), *state = dt_model_state(t->model);
    dt_status st = reserve(p, np > ns ? np : ns);
    const float inv = 1.0f / (float)t->comm.size;
    if (st == DT_OK) st = dt_reduce_sum(&t->comm, x, p->sum, np);
    if (st == DT_OK && t->comm.rank == 0)
        for (size_t i = 0; i < np; i++) x[i] = p->sum[i] * inv;
    if (st == DT_OK) st = dt_bcast(&t->comm, x, np, 0);
    if (st == DT_OK && ns) {
        st = dt_reduce_sum(&t->comm, state, p->sum, ns);
        if (st == DT_OK && t->comm.rank == 0)
            for (size_t i = 0; i < ns; i++) state[i] = p->sum[i] * inv;
        if (st == DT_OK) st = dt_bcast(&t->comm, state, ns, 0);
    }
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before;
    return st;
}

static void ps_destroy(dt_strategy *s) {
    ps_impl *p = s->impl;
    if (p) free(p->sum);
    free(p);
}

dt_status dt_ps_create(dt_strategy *s) {
    const char *mode = s->opt->ps_mode ? s->opt->ps_mode : "grad";
    if (strcmp(mode, "grad") && strcmp(mode, "weight"))
        return dt_fail(DT_ERR_ARG, "--ps-mode %s: expected grad or weight", mode);
    ps_impl *p = calloc(1, sizeof *p);
    if (!p) return dt_fail(DT_ERR_NOMEM, "out of memory");
    p->weight_mode = !strcmp(mode, "weight");
    s->impl = p;
    s->destroy = ps_destroy;
    if (p->weight_mode) s->end_step = ps_weight_end_step;
    else s->optimizer_step = ps_grad_step;
    return DT_OK;
}
