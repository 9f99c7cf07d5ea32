/* signsgd: signSGD with majority vote (Bernstein et al. 2018), as a worked example of adding
 * a scheme: this one file plus the line DT_SCHEME(signsgd) in src/schemes/schemes.def.
 * tests/cli_new_scheme.sh copies the sources, adds both, builds and trains with it; it is
 * not part of the dtrain build itself.
 *
 * Every step each rank takes the sign of its gradient, the signs are summed over the ranks
 * (one allreduce) and every rank steps along scale x sign(sum): the majority's direction. */
#include <math.h>
#include <stdlib.h>

#include "schemes/registry.h"

typedef struct {
    float scale;
} signsgd_impl;

/* the flags, declared once over the options struct: the CLI's parser and --help, the
 * defaults and the log's configuration line come from here */
typedef struct {
    float sign_scale;
} signsgd_opts;

static const dt_flag signsgd_flags[] = {
    {"sign-scale", DT_AT_FLOAT(signsgd_opts, sign_scale), .def = "0.02", .min = 0, .max = 1e6, .min_open = 1,
     .help = "step length of each coordinate, times --lr"},
};

/* after backward, before the optimiser: replace the gradient by the majority's signs */
static dt_status signsgd_after_backward(dt_scheme *s, dt_step_ctx *c) {
    const signsgd_impl *p = s->impl;
    float *g = dt_model_grads(c->model);
    const size_t n = dt_model_num_params(c->model);
    for (size_t i = 0; i < n; i++) g[i] = (float)((g[i] > 0) - (g[i] < 0));
    /* it sends every step: its baseline is what it sent (the trainer's default) */
    dt_status st = dt_allreduce_sum(c->comm, g, n);
    for (size_t i = 0; i < n; i++) g[i] = p->scale * (float)((g[i] > 0) - (g[i] < 0));
    return st;
}

static void signsgd_destroy(dt_scheme *s) { free(s->impl); }

static const dt_scheme_ops signsgd_ops = {
    .after_backward = signsgd_after_backward,
    .destroy = signsgd_destroy,
};

static dt_status signsgd_create(dt_scheme *s) {
    signsgd_impl *p = calloc(1, sizeof *p);
    if (!p) return dt_fail(DT_ERR_NOMEM, "out of memory");
    p->scale = ((const signsgd_opts *)s->opts)->sign_scale;
    s->impl = p;
    s->ops = &signsgd_ops;
    return DT_OK;
}

const dt_scheme_def dt_scheme_signsgd = {
    .name = "signsgd", .summary = "signSGD with majority vote: step along the sign of the summed gradient signs",
    DT_SCHEME_FLAGS(signsgd_flags, signsgd_opts), .compress = DT_COMPRESS_NO, .create = signsgd_create,
};
