/* --plan auto|off|FILE for train, run, sim and bench. */
#ifndef DT_PLAN_CACHE_H
#define DT_PLAN_CACHE_H

#include <stdio.h>

#include "dtrain.h"

/* Where --plan auto keeps the plan of this model, batch and precision on this CPU and dtrain
 * version (the folder made if missing). */
dt_status dt_plan_auto_path(const char *model, int batch, int precision, char *out, size_t cap);

/* Resolves spec into a plan file in path: off or NULL: none (path ""); FILE: it, if it is a
 * plan for this model, batch, precision, CPU and version (else one line saying what differs);
 * auto: the cached one, made now (a line to log saying so and its time) where it is missing,
 * stale or another CPU's. For a launcher, which hands its ranks --plan path. */
dt_status dt_plan_ensure(const char *spec, const char *model, int batch, int precision, FILE *log, char *path, size_t cap);

/* dt_plan_ensure, then the plan applied to m (before dt_model_reserve); the file in path ("": none). */
dt_status dt_plan_use(const char *spec, const char *model, int batch, int precision, dt_model *m, FILE *log, char *path,
                      size_t cap);

#endif
