/* my_scheme: a training scheme of one's own, outside dtrain's tree: the worked example of
 * include/dtrain/scheme.h, whose opening comment is the contract (C1-C13, each marked below
 * where the code meets it). Gradients are averaged over the ranks every K-th step
 * (--reduce-every K); in between each rank steps on its own gradient.
 *
 * Built against the installed library (docs/library.md, "Install"):
 *     cc -std=c11 my_scheme.c $(pkg-config --cflags --libs dtrain) -o my_scheme
 * and run as dtrain is, with every flag of dtrain train:
 *     mpiexec -n 2 ./my_scheme train --algo every-k --reduce-every 4 --epochs 1 --log l.jsonl
 *     ./my_scheme run -n 2 --algo every-k ...       (run's ranks are ./my_scheme again)
 * tests/cli_install.sh builds it with pkg-config and with find_package(dtrain), runs it under
 * mpiexec -n 2 and checks that the code below is the header's example, word for word. */

#include <stdio.h>
#include <stdlib.h>

#include <dtrain/scheme.h>

typedef struct {                                                             // C3
    long every;                       // --reduce-every
} every_k_opts;

static const dt_flag every_k_flags[] = {
    {"reduce-every", DT_AT_INT(every_k_opts, every), .def = "4", .min = 1, .max = 1e6,
     .help = "every-k: average the gradients every N steps"},
};

typedef struct {
    long reduced;                     // steps that averaged, for the summary
} every_k;

// after backward, before the optimiser step: every K-th step the gradients are averaged
static dt_status every_k_after_backward(dt_scheme *s, dt_step_ctx *c) {
    const every_k_opts *o = s->opts;
    every_k *k = s->impl;
    dt_count_baseline(c->comm, dt_allreduce_msgs(c->comm));                  // C7
    if ((c->step + 1) % o->every) return DT_OK;
    k->reduced++;
    return dt_allreduce_mean(c->comm, dt_model_grads(c->model), dt_model_num_params(c->model)); // C6
}

static void every_k_summary(dt_scheme *s, dt_json *line) {                      // C11
    dt_json_int(line, "reduced_steps", ((every_k *)s->impl)->reduced);
}

static void every_k_destroy(dt_scheme *s) { free(s->impl); }

static const dt_scheme_ops every_k_ops = {
    .after_backward = every_k_after_backward,
    .summary = every_k_summary,
    .destroy = every_k_destroy,
};

static dt_status every_k_create(dt_scheme *s) {                                 // C2
    if (!(s->impl = calloc(1, sizeof(every_k)))) return dt_fail(DT_ERR_NOMEM, "out of memory");
    s->ops = &every_k_ops;
    s->decentralized = 1;                                                     // C9
    s->own_baseline = 1;                                                      // C7
    return DT_OK;
}

static const dt_scheme_def every_k_scheme = {                                 // C1
    .name = "every-k",
    .summary = "average the gradients every K steps, each rank's own in between",
    DT_SCHEME_FLAGS(every_k_flags, every_k_opts),
    .create = every_k_create,
};

int main(int argc, char **argv) {                                             // C13
    if (dt_scheme_register(&every_k_scheme) != DT_OK) {
        fprintf(stderr, "my_scheme: %s\n", dt_last_error());
        return 2;
    }
    return dt_main(argc, argv);
}
