/* dtrain sweep: what the runs still to do will cost, before any starts: core-minutes, and the
 * wall clock on the cores the sweep may use (--budget refuses a sweep over it). A run's cost
 * is its training steps × the ranks that hold a core × the seconds of a step: the steps from its
 * flags and its training set as the trainer counts them (trainer/setup.c: --train-limit, --val,
 * the shards of the training ranks, --epochs, --max-steps, --images); the seconds from a few
 * steps of its model at its batch timed here, as dtrain bench times them (once per distinct
 * model and batch). A simulated run (simulate = true) computes every rank's steps on its one
 * core, whatever --compute says (the model trains for real; modelled compute only changes the
 * simulated clock); a replay (dtrain sim --replay) computes nothing and is left out. Its
 * evaluations are counted too (every --eval-every-steps steps and --eval-every epochs, and the
 * last): a forward pass over the test set and the validation split on rank 0, at a third of a
 * training step's time an example (forward of forward + backward). Data loading, start-up,
 * communication and a simulation's own work are left out, and a run that stops at its target
 * takes less. */
#include "cli/sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_flags.h"
#include "core/alloc.h"
#include "data/text.h"
#include "trainer/plan_tune.h"
#include "trainer/trainer.h"

/* ------------------------------------------------------------------ a run's flags */

/* The run's training flags parsed by dtrain train's own table, so that every default is train's
 * (the sweep already had dtrain check them: sweep_check.c). Only train's own flags: the
 * schemes', run's and sim's do not change the steps (downpour's servers are read apart). */
static dt_status read_config(const dt_sweep_run *r, dt_train_flags *f) {
    dt_flag_list lists[DT_TRAIN_LISTS];
    dt_train_flag_lists(f, lists);
    char **av = calloc((size_t)(2 * r->nflags + 1), sizeof *av), key[160];
    char *own = calloc((size_t)(2 * r->nflags + 1), 1); /* 1: av[i] is a copy made here (a --KEY) */
    if (!av || !own) dt_nomem_exit("the flags of a run");
    int n = 0;
    for (int i = 0; i < r->nflags; i++) {
        snprintf(key, sizeof key, "--%s", r->flags[i].key);
        const dt_flag *fl = dt_flags_lookup(lists, 1, key, NULL);
        /* KEY = true of a file's path (checkpoint = true): the run's own file, no length */
        if (!fl || (fl->kind == DT_FLAG_SWITCH) != !r->flags[i].value) continue;
        own[n] = 1;
        if (!(av[n++] = strdup(key))) dt_nomem_exit("a flag");
        if (r->flags[i].value) av[n++] = r->flags[i].value;
    }
    int help;
    const dt_status st = dt_flags_parse_argv("sweep", n, av, 0, lists, 1, &help);
    for (int i = 0; i < n; i++)
        if (own[i]) free(av[i]); /* the values are the run's */
    free(av);
    free(own);
    return st;
}

static const char *flag_value(const dt_sweep_run *r, const char *key) {
    for (int i = 0; i < r->nflags; i++)
        if (!strcmp(r->flags[i].key, key)) return r->flags[i].value ? r->flags[i].value : "true";
    return NULL;
}

/* ------------------------------------------------------------------ measured once each */

/* What was found for one key (a training set, a model at a batch): its number, or 0 and why. */
typedef struct found {
    char key[600];
    double value;
    char why[300];
} found;

typedef struct cache {
    found *f;
    int n, cap;
} cache;

static found *lookup(cache *c, const char *key, int *fresh) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->f[i].key, key)) { *fresh = 0; return &c->f[i]; }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        if (!(c->f = realloc(c->f, (size_t)c->cap * sizeof *c->f))) dt_nomem_exit("a list of %d measurements", c->cap);
    }
    found *f = &c->f[c->n++];
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    *fresh = 1;
    return f;
}

/* The training examples a run sees, all its ranks together, before --val takes its share: the
 * set's first --train-limit (a text's windows of the model's context, as the trainer cuts them);
 * train 0: the test set's first --test-limit, what each evaluation goes through. */
static void count_examples(const dt_train_config *c, int train, found *f) {
    char dir[1024];
    dt_data_dir(c->data, c->data_dir, dir, sizeof dir);
    dt_dataset d;
    dt_model *m = NULL;
    const int limit = train ? c->train_limit : c->test_limit;
    dt_status st = dt_dataset_load_first(c->data, dir, train, limit, &d);
    if (st == DT_OK && d.text && (st = dt_model_open(c->model, &m)) == DT_OK)
        st = dt_trainer_fit_data(m, c->model, c->data, &d, NULL); /* its windows: either part alike */
    if (st == DT_OK) f->value = limit > 0 && limit < d.n ? limit : d.n;
    else snprintf(f->why, sizeof f->why, "%s", dt_last_error());
    dt_dataset_free(&d); /* zeroed by the loader first: free whatever it got to */
    dt_model_free(m);
}

/* A training step's seconds on one core (openblas on one thread, as every rank runs): the
 * median of a few steps after one untimed; a fast model's median of more, about 0.1 s of them,
 * so that the clock's grain and a busy moment of the machine count little. */
#define MAX_TIMED 200
static void time_step(const char *model, int batch, found *f) {
    double secs[MAX_TIMED], fwd;
    int n = 3;
    dt_status st = dt_bench_time_steps(model, batch, 1, n, secs, &fwd);
    double t = st == DT_OK ? dt_median(secs, n) : 0;
    if (st == DT_OK && t < 0.01) {
        n = t > 0.1 / MAX_TIMED ? (int)(0.1 / t) : MAX_TIMED;
        if ((st = dt_bench_time_steps(model, batch, 2, n, secs, &fwd)) == DT_OK) t = dt_median(secs, n);
    }
    if (st == DT_OK) f->value = t > 0 ? t : 1e-9;
    else snprintf(f->why, sizeof f->why, "%s", dt_last_error());
}

/* ------------------------------------------------------------------ the estimate */

/* The run's training (train 1) or test set's examples, read once per set and limit; 0 with why */
static double examples_of(const dt_train_config *c, int train, cache *data, char *why, size_t len) {
    char key[600];
    int fresh;
    snprintf(key, sizeof key, "%s\t%s\t%s\t%d\t%s", train ? "train" : "test", c->data, c->data_dir ? c->data_dir : "",
             train ? c->train_limit : c->test_limit, dt_text_name(c->data) ? c->model : "");
    found *n = lookup(data, key, &fresh);
    if (fresh) count_examples(c, train, n);
    if (!n->value) snprintf(why, len, "its %s set: %s", train ? "training" : "test", n->why);
    return n->value;
}

/* One run: its steps a rank and the ranks that train them; 0, or -1 with why. */
static int run_steps(const dt_sweep_run *r, const dt_train_config *c, cache *data, long long *steps, long long *per_epoch,
                     int *workers, char *why, size_t len) {
    const double examples = examples_of(c, 1, data, why, len);
    if (!examples) return -1;
    /* downpour's --servers ranks serve and train nothing (schemes/downpour.c) */
    const char *servers = flag_value(r, "servers");
    const int serving = !strcmp(c->scheme.name ? c->scheme.name : "local", "downpour") ? (servers ? atoi(servers) : 1) : 0;
    const int W = r->ranks - serving > 0 ? r->ranks - serving : 1;
    const long long N = (long long)examples - c->val, B = c->batch;
    /* trainer/setup.c, steps_per_epoch: one process keeps its last partial batch, several take
     * full batches of equal shards */
    const long long spe = r->ranks == 1 ? (N + B - 1) / B : N / W / B;
    if (N < 1 || spe < 1) {
        snprintf(why, len, "%lld training examples leave no step of batch %lld on %d training ranks", N, B, W);
        return -1;
    }
    long long s = c->images > 0 ? (c->images + B * W - 1) / (B * W) : (long long)c->epochs * spe;
    if (c->max_steps > 0 && c->max_steps < s) s = c->max_steps;
    *steps = s;
    *per_epoch = spe;
    *workers = W;
    return 0;
}

/* The examples a run's evaluations go through, all of them: the test set (and --val's split)
 * at every --eval-every-steps steps, every --eval-every epochs, and the run's end; 0 with why
 * when the test set cannot be read. */
static double eval_examples(const dt_train_config *c, long long steps, long long steps_per_epoch, cache *data, char *why,
                            size_t len) {
    const double tested = examples_of(c, 0, data, why, len);
    if (!tested) return 0;
    const long long epochs = steps_per_epoch > 0 ? (steps + steps_per_epoch - 1) / steps_per_epoch : 1;
    long long evals = 1 + (c->eval_every > 0 ? epochs / c->eval_every : 0);
    if (c->eval_every_steps > 0) evals += steps / c->eval_every_steps;
    return (double)evals * (tested + c->val);
}

/* When the runs end, placed on the cores in file order as sweep.c's run_all places them (first
 * fit, a run bigger than the machine alone), each taking its estimated seconds. */
static double place_runs(const dt_sweep *s, const dt_sweep_slot *sl, const double *secs, long cores, int slurm) {
    double *end = calloc((size_t)s->nruns + 1, sizeof *end), now = 0;
    char *state = calloc((size_t)s->nruns + 1, 1); /* 0 to start, 1 running, 2 ended or not to run */
    if (!end || !state) dt_nomem_exit("the places of %d runs", s->nruns);
    int pending = 0, running = 0, first = 0;
    long used = 0;
    for (int i = 0; i < s->nruns; i++) {
        state[i] = sl[i].state == DT_SWEEP_PENDING ? 0 : 2;
        pending += !state[i];
    }
    while (pending > 0 || running > 0) {
        while (first < s->nruns && state[first]) first++;
        for (int i = first; i < s->nruns; i++) {
            const long need = dt_sweep_cores_of(&s->runs[i], cores, slurm);
            if (state[i] || (running > 0 && used + need > cores)) continue;
            state[i] = 1, end[i] = now + secs[i], used += need, running++, pending--;
        }
        /* the next to end (any index: a run started before `first` may still run) */
        double next = -1;
        for (int i = 0; i < s->nruns; i++)
            if (state[i] == 1 && (next < 0 || end[i] < next)) next = end[i];
        now = next;
        for (int i = 0; i < s->nruns; i++)
            if (state[i] == 1 && end[i] <= now) state[i] = 2, used -= dt_sweep_cores_of(&s->runs[i], cores, slurm), running--;
    }
    free(end);
    free(state);
    return now;
}

static void fmt_step(double t, char *out, size_t len) {
    if (t < 1) snprintf(out, len, "%.3g ms", t * 1e3);
    else snprintf(out, len, "%.3g s", t);
}

void dt_sweep_estimate(const dt_sweep *s, const dt_sweep_slot *sl, long cores, int slurm, dt_sweep_cost *e) {
    memset(e, 0, sizeof *e);
    static dt_train_flags f; /* large (the schemes' tables): not on the stack */
    cache data = {0}, speed = {0};
    double *secs = calloc((size_t)s->nruns + 1, sizeof *secs);
    if (!secs) dt_nomem_exit("the estimates of %d runs", s->nruns);
    size_t said = 0;
    int shown = 0;
    for (int i = 0; i < s->nruns; i++) {
        if (sl[i].state != DT_SWEEP_PENDING) continue;
        const dt_sweep_run *r = &s->runs[i];
        e->todo++;
        if (r->sim && flag_value(r, "replay")) { e->replays++; continue; }
        char why[400] = "";
        long long steps = 0, per_epoch = 0;
        int workers = 0, fresh;
        double evaluated = 0;
        if (read_config(r, &f) != DT_OK) snprintf(why, sizeof why, "its flags: %s", dt_last_error());
        else if (run_steps(r, &f.c, &data, &steps, &per_epoch, &workers, why, sizeof why) == 0 &&
                 (evaluated = eval_examples(&f.c, steps, per_epoch, &data, why, sizeof why)) > 0) {
            char key[600];
            snprintf(key, sizeof key, "%s\t%d", f.c.model, f.c.batch);
            found *t = lookup(&speed, key, &fresh);
            if (fresh) time_step(f.c.model, f.c.batch, t);
            if (!t->value) snprintf(why, sizeof why, "timing a step of %s: %s", f.c.model, t->why);
            else {
                /* simulated: every training rank's steps on one core; else each rank on its own,
                 * a run with more ranks than cores sharing them */
                const double rank = (double)steps * t->value;
                /* evaluations: rank 0's forward passes, a third of a step's time an example, while
                 * the other ranks wait (a core each, as while they train) */
                const double eval = evaluated * t->value / (3.0 * f.c.batch);
                secs[i] = r->sim ? rank * workers + eval
                                 : (rank + eval) * (!slurm && r->ranks > cores ? (double)r->ranks / cores : 1);
                e->core_s += r->sim ? secs[i] : (rank + eval) * r->ranks;
                e->eval_s += eval;
                e->rank_steps += steps * workers;
                e->counted++;
                if (fresh && shown < 3 && said < sizeof e->speeds) {
                    char at[32];
                    fmt_step(t->value, at, sizeof at);
                    said += (size_t)snprintf(e->speeds + said, sizeof e->speeds - said, "%s%s at batch %d: %s", shown ? ", " : "",
                                             f.c.model, f.c.batch, at);
                    shown++;
                } else if (fresh && shown == 3 && said < sizeof e->speeds) {
                    said += (size_t)snprintf(e->speeds + said, sizeof e->speeds - said, ", ...");
                    shown++;
                }
            }
        }
        if (*why && !e->unknown++) snprintf(e->why, sizeof e->why, "run '%s': %s", r->name, why);
    }
    if (e->todo) e->wall_s = place_runs(s, sl, secs, cores, slurm);
    free(secs);
    free(data.f);
    free(speed.f);
}

void dt_sweep_estimate_say(const dt_sweep_cost *e, long cores, int slurm) {
    char wall[32], where[64];
    dt_sweep_fmt_secs(e->wall_s, wall, sizeof wall);
    if (slurm) snprintf(where, sizeof where, "with %ld Slurm job%s at once", cores, cores > 1 ? "s" : "");
    else snprintf(where, sizeof where, "on %ld core%s", cores, cores > 1 ? "s" : "");
    fprintf(stderr, "sweep: estimate: %.3g core-minutes for the %d run%s to do, about %s of wall clock %s (%lld training steps "
            "of their ranks; a step of %s here)\n", e->core_s / 60, e->todo, e->todo > 1 ? "s" : "", wall, where,
            e->rank_steps, e->counted ? e->speeds : "none timed");
    if (e->replays)
        fprintf(stderr, "sweep: estimate: %d replay%s (dtrain sim --replay) left out: %s nothing\n", e->replays,
                e->replays > 1 ? "s" : "", e->replays > 1 ? "they compute" : "it computes");
    if (e->unknown)
        fprintf(stderr, "sweep: estimate: %d run%s left out, %s cost unknown (%s)\n", e->unknown, e->unknown > 1 ? "s" : "",
                e->unknown > 1 ? "their" : "its", e->why);
    fprintf(stderr, "sweep: estimate: an estimate of the training steps and evaluations (%.3g of the core-minutes), timed on "
            "this machine: data loading, start-up, communication and a simulation's own work are left out, and a run that "
            "stops at its target takes less\n", e->eval_s / 60);
}
