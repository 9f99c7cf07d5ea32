/* The outer optimizer over rounds (outer.h). */
#include "schemes/outer.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

struct dt_outer {
    size_t np;
    float lr, mu;
    int nesterov;
    float *master, *velocity;
    double saved[2]; /* the "outer" record (records keep pointers until written) */
};

dt_status dt_outer_create(const dt_outer_opts *o, const float *x, size_t np, dt_outer **out) {
    *out = NULL;
    if (o->lr == 1 && o->momentum == 0) return DT_OK;
    dt_outer *u;
    DT_TRY(dt_calloc(u, 1, "the outer optimizer"));
    u->np = np;
    u->lr = (float)o->lr;
    u->mu = (float)o->momentum;
    u->nesterov = o->nesterov;
    dt_status st;
    if ((st = dt_malloc(u->master, np, "the outer optimizer's master of %zu parameters", np)) != DT_OK ||
        (st = dt_calloc(u->velocity, np, "the outer optimizer's momentum of %zu parameters", np)) != DT_OK) {
        dt_outer_free(u);
        return st;
    }
    memcpy(u->master, x, np * sizeof(float));
    *out = u;
    return DT_OK;
}

void dt_outer_free(dt_outer *o) {
    if (o) dt_free_all(o->master, o->velocity, o);
}

void dt_outer_pseudo_gradient(const dt_outer *o, float *x) {
    for (size_t i = 0; i < o->np; i++) x[i] = o->master[i] - x[i];
}

void dt_outer_step(dt_outer *o, float *x) {
    const float lr = o->lr, mu = o->mu;
    for (size_t i = 0; i < o->np; i++) {
        const float d = x[i];
        o->velocity[i] = mu * o->velocity[i] + d;
        const float step = o->nesterov ? d + mu * o->velocity[i] : o->velocity[i];
        o->master[i] -= lr * step;
        x[i] = o->master[i];
    }
}

/* the "outer" record of the plain average (records keep pointers until written) */
static const double plain_settings[2] = {1, 0};

dt_status dt_outer_save(dt_outer *o, const dt_outer_opts *opts, dt_records *out) {
    if (!o) return dt_records_add_raw(out, "outer", plain_settings, sizeof plain_settings);
    o->saved[0] = opts->lr;
    o->saved[1] = opts->momentum;
    dt_status st = dt_records_add_raw(out, "outer", o->saved, sizeof o->saved);
    if (st == DT_OK) st = dt_records_add(out, "outer_master", o->master, o->np);
    if (st == DT_OK) st = dt_records_add(out, "outer_momentum", o->velocity, o->np);
    return st;
}

/* "the plain average" or "an outer optimizer", for messages */
static const char *outer_kind(int outer) { return outer ? "an outer optimizer" : "the plain average"; }

/* The plain average and an outer optimizer keep different state: a set of one resumed as the
 * other would drop the master and its momentum, or find none to take. Sets of an earlier build
 * have no "outer" record: their master's record says which they are. */
static dt_status outer_check(const dt_outer *o, const dt_outer_opts *opts, const char *who, const dt_tfile *tf,
                             const char *path) {
    double saved[2] = {1, 0};
    const int recorded = dt_tfile_find(tf, "outer") != NULL, mine = o != NULL;
    if (recorded) {
        dt_status st = dt_tfile_take(tf, path, "outer", saved, sizeof saved);
        if (st != DT_OK) return st;
    }
    const int theirs = recorded ? !(saved[0] == 1 && saved[1] == 0) : dt_tfile_find(tf, "outer_master") != NULL;
    if (theirs == mine) return DT_OK;
    if (!recorded)
        return dt_fail(DT_ERR_ARG, "--outer-lr, --outer-momentum: %s was saved by %s with %s, this run has --outer-lr "
                       "%g --outer-momentum %g (%s)", path, who, outer_kind(theirs), opts->lr, opts->momentum,
                       outer_kind(mine));
    return dt_fail(DT_ERR_ARG, "--outer-lr, --outer-momentum: %s was saved by %s with --outer-lr %g --outer-momentum %g "
                   "(%s), this run has --outer-lr %g --outer-momentum %g (%s)", path, who, saved[0], saved[1],
                   outer_kind(theirs), opts->lr, opts->momentum, outer_kind(mine));
}

dt_status dt_outer_load(dt_outer *o, const dt_outer_opts *opts, const char *who, const dt_tfile *tf, const char *path) {
    dt_status st = outer_check(o, opts, who, tf, path);
    if (st != DT_OK || !o) return st;
    const size_t bytes = o->np * sizeof(float);
    if ((st = dt_tfile_take(tf, path, "outer_master", o->master, bytes)) != DT_OK) return st;
    return dt_tfile_take(tf, path, "outer_momentum", o->velocity, bytes);
}
