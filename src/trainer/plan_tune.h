/* Making a kernel plan by timing (plan_tune.c says how); `dtrain tune` and --plan auto. */
#ifndef DT_PLAN_TUNE_H
#define DT_PLAN_TUNE_H

#include <stdio.h>

#include "models/plan.h"

typedef struct {
    int repeats; /* alternating rounds; medians over them (3) */
    int steps;   /* timed steps a candidate a round, after one untimed (2) */
    double tie;  /* a fraction: closer than this, the simpler kernel (0.03) */
    FILE *log;   /* a line a round and a decision; NULL: quiet */
} dt_plan_opts;

/* The median of n timings (n >= 1), v sorted in place: a busy moment of the machine counts
 * little (also the sweep's step time, cli/sweep_cost.c) */
double dt_median(double *v, int n);

/* Plans model (a name or spec file) at this batch and precision on this CPU. */
dt_status dt_plan_make(const char *model, int batch, int precision, const dt_plan_opts *o, dt_plan *p);

#endif
