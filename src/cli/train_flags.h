/* The flags of `dtrain train` and `dtrain run` (run passes them on to train's ranks): one
 * table for both, built from the run's own flags and every scheme's from the registry, and
 * what is done with them after parsing (the scheme's values, the run's length, where it
 * writes). fuzz/fuzz_args.c links this file to fuzz the very tables the CLI uses. */
#ifndef DT_TRAIN_FLAGS_H
#define DT_TRAIN_FLAGS_H

#include <stddef.h>

#include "algorithms/strategy.h"
#include "cli/args.h"
#include "dtrain.h"

/* Flags of `train` (and `run`, which passes them on): the run's own, then every scheme's,
 * taken from the registry (strategy.h), each flag once however many schemes declare it. */
#define MAX_OPTS (48 + DT_ALGO_MAX_SET)

typedef struct dt_train_flags {
    dt_train_config c;
    const char *out, *run_dir, *target_on;
    int no_augment, no_save, ranks, max_steps, redone_steps, images;
    float timeout;                   /* the watchdog's, seconds (0: none) */
    int max_restarts;                /* run: restarts after a lost rank */
    float start_timeout;             /* run: seconds for every rank to start */
    const char *hostfile, *hosts;    /* run: where the ranks go */
    int nscheme;                     /* the schemes' flags */
    struct {
        const dt_flag *flag;
        const char *text;            /* as given, or NULL */
        int on;                      /* switches */
        char help[240];
    } scheme[DT_ALGO_MAX_SET];
    char algo_help[200], compress_help[240];
} dt_train_flags;

#define RUN_OPTS 5 /* run's own flags, after train's */

/* Fills opts (room for MAX_OPTS) with train's flags; returns their number. */
int dt_train_options(dt_train_flags *f, dt_opt *opts);
/* Train's flags, then RUN_OPTS of run's own (opts has room for MAX_OPTS + RUN_OPTS). */
int dt_run_options(dt_train_flags *f, dt_opt *opts);
/* After parsing: --target-on, and the schemes' flags into the configuration, checked. */
dt_status dt_scheme_values(dt_train_flags *f);
/* --images or --epochs: the run's length. */
dt_status dt_run_length(dt_train_flags *f);
/* --help's text: HEAD, then the schemes (--algo) one a line. */
void dt_usage_with_schemes(char *out, size_t len, const char *head);
/* Where the run writes (--run-dir's defaults, the default weights name, checked on rank 0). */
dt_status dt_resolve_outputs(dt_train_flags *f, int rank);
/* The run folder, by the process that keeps it: created, the command written, the console copied. */
dt_status dt_start_run_dir(const dt_train_flags *f, char *const *argv, int argc);

#endif
