/* Starting dtrain-sim under SMPI's launcher and watching it to its end (dtrain sim, cmd_sim.c):
 * its argument list, the files SimGrid reads, and what its end means. */
#ifndef DT_SIM_LAUNCH_H
#define DT_SIM_LAUNCH_H

#include <stdio.h>

#include "dtrain.h"

/* An argument list that grows as it is filled: sized by what goes in. */
typedef struct dt_sim_argv {
    char **v; /* NULL-terminated */
    int n, cap;
} dt_sim_argv;

/* Appends arg (kept, not copied). */
dt_status dt_sim_argv_add(dt_sim_argv *a, char *arg);
void dt_sim_argv_free(dt_sim_argv *a);

/* A file for SimGrid to read that is on no disk once written: an unlinked temporary in /tmp,
 * open for writing in *out and named /dev/fd/N for the launcher, which inherits it (nothing to
 * remove however dtrain sim ends, a kill -9 included). */
dt_status dt_sim_unnamed_file(FILE **out, char *name, size_t len);

/* Runs argv (SMPI's launcher) and waits for it. Its stderr passes through but for SimGrid's
 * errors, said in one line at the end. SIGINT, SIGTERM and SIGHUP to dtrain sim end the
 * simulation ("interrupted", 128 + the signal). The exit status: the simulation's own (4 when
 * its ranks deadlocked: one line naming them), 2 when it could not start or SimGrid stopped it. */
int dt_sim_launch(char **argv, const char *platform);

#endif
