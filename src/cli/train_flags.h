/* The flags of `dtrain train` and `dtrain run` (run passes them on to train's ranks): one
 * set of dt_flag tables (core/flag_table.h) for both: the run's own flags and every scheme's from
 * the registry, and what is done with them after parsing (the scheme's values checked, the
 * run's length, where it writes). fuzz/fuzz_args.c links this file to fuzz the very tables
 * the CLI uses. */
#ifndef DT_TRAIN_FLAGS_H
#define DT_TRAIN_FLAGS_H

#include <stddef.h>

#include "core/flag_table.h"
#include "dtrain.h"
#include "schemes/registry.h"

typedef struct dt_train_flags {
    dt_train_config c;
    const char *out, *run_dir;
    int epochs_given;                /* --epochs (not with --images) */
    int adamw_given[3];              /* --beta1, --beta2, --eps (only with --optim adamw) */
    int no_augment, no_save, ranks;
    float timeout;                   /* the watchdog's, seconds (0: none) */
    int max_restarts;                /* run: restarts after a lost rank */
    float start_timeout;             /* run: seconds for every rank to start */
    const char *hostfile, *hosts;    /* run: where the ranks go */
    /* every scheme's flags, each once however many schemes declare it, their help naming the
     * schemes: given, their text goes to c.scheme (dt_scheme_config_set), checked there */
    int nscheme;
    dt_flag scheme[DT_SCHEME_MAX_SET];
    char scheme_help[DT_SCHEME_MAX_SET][1024]; /* "eventgrad, choco: HELP": the longest (--mix) is ~480 */
} dt_train_flags;

/* The flag lists of train: the run's own (into f, set to the defaults), then the schemes'. */
#define DT_TRAIN_LISTS 2
int dt_train_flag_lists(dt_train_flags *f, dt_flag_list lists[DT_TRAIN_LISTS]);
/* ... and of run: train's, then run's own (the last list; they stay with the supervisor). */
#define DT_RUN_LISTS 3
int dt_run_flag_lists(dt_train_flags *f, dt_flag_list lists[DT_RUN_LISTS]);
/* After parsing: --target-on's needs, and the scheme's configuration checked; out (NULL:
 * only checked) gets it as create takes it (dt_trainer_init). */
dt_status dt_scheme_values(dt_train_flags *f, dt_scheme_choice *out);
/* --algo local trains alone: with -n above 1 (or -n N without --algo, whose default is local)
 * the ranks would be started only to refuse, each the same way. Refused once, by cmd. */
dt_status dt_local_ranks(const dt_train_flags *f, const char *cmd, int argc, char **argv);
/* --images or --epochs: the run's length. */
dt_status dt_run_length(dt_train_flags *f);
/* --help's text: HEAD, then the schemes (--algo) one a line. */
void dt_usage_with_schemes(char *out, size_t len, const char *head);
/* Where the run writes (--run-dir's defaults, the default weights name, checked on rank 0). */
dt_status dt_resolve_outputs(dt_train_flags *f, int rank);
/* --resume auto (asked: 1): from --checkpoint's file when it exists (exists: as the one process
 * that decides found it), else from the start. dt_resume_auto_say: the one line telling which
 * (said once the checkpoint was read: it may hold a finished run, cmd_train.c). */
int dt_resume_auto_asked(const dt_train_flags *f);
dt_status dt_resume_auto(dt_train_flags *f, int exists);
void dt_resume_auto_say(const dt_train_flags *f);
/* The run folder, by the process that keeps it: created, the command written, the console copied. */
dt_status dt_start_run_dir(const dt_train_flags *f, char *const *argv, int argc);

#endif
