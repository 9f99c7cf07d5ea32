/* dtrain sweep: many runs from one experiment file (docs/sweep.md). sweep_file.c reads the
 * INI file and expands it into runs; sweep.c checks, starts and records them. */
#ifndef DT_SWEEP_H
#define DT_SWEEP_H

#include "dtrain.h"

typedef struct dt_sweep_flag {
    char *key;          /* a dtrain train/run flag without "--" */
    char *value;        /* NULL: a switch (key = true) */
    int line;           /* where the file gave it (0: added by the sweep) */
} dt_sweep_flag;

typedef struct dt_sweep_run {
    char name[256];     /* its folder under the sweep's out */
    int ranks;          /* n (1: dtrain train, else dtrain run -n N) */
    int use_run;        /* dtrain run even for n = 1 (a flag only run has: hosts, max-restarts...) */
    int exclusive;      /* across hosts: runs alone */
    int line;           /* its variant's [section] line, else [base]'s, else 1 */
    int ranks_line;     /* where n was set (0: not set) */
    dt_sweep_flag *flags;
    int nflags;
} dt_sweep_run;

typedef struct dt_sweep {
    char path[1024];
    char name[128];
    char out[1024];
    int parallel;       /* runs' ranks at once; 0: the cores */
    dt_sweep_run *runs;
    int nruns;
} dt_sweep;

/* Reads and expands PATH. Errors: one line "PATH:LINE: ..." in dt_last_error(). */
dt_status dt_sweep_read(const char *path, dt_sweep *s);
void dt_sweep_free(dt_sweep *s);

/* The `dtrain sweep` command (sweep.c). */
int dt_cmd_sweep(int argc, char **argv);

#endif
