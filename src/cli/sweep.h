/* dtrain sweep: many runs from one experiment file (docs/sweep.md). sweep_file.c reads the
 * INI file and expands it into runs (sweep_ini.c, sweep_expand.c); sweep_check.c checks their
 * flags; sweep.c decides which start where, sweep_run.c starts them and records them. */
#ifndef DT_SWEEP_H
#define DT_SWEEP_H

#include <stdio.h>

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
    int sim;            /* dtrain sim -n N ([sweep] simulate = true): one process, a core */
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
    int nruns, cap_runs;
} dt_sweep;

/* Reads and expands PATH. Errors: one line "PATH:LINE: ..." in dt_last_error(). */
dt_status dt_sweep_read(const char *path, dt_sweep *s);
void dt_sweep_free(dt_sweep *s);
/* sweep_keys.c: 0 when KEY (of [base], [axes] or a [variant]) is a flag of the runs' command
 * (sim: dtrain sim's, else dtrain train's or run's); else 1 and what is wrong in msg, the nearest
 * name suggested ("unknown flag 'modle' (did you mean 'model'?)"). The same for a key of [sweep]. */
int dt_sweep_key_unknown(const char *key, int sim, char *msg, size_t len);
int dt_sweep_sweep_key_unknown(const char *key, char *msg, size_t len);
/* sweep_check.c: every run's flags checked by `dtrain run` (DTRAIN_CHECK_ONLY) before any run
 * starts; 0, or 1 with the error printed as the file's line */
int dt_sweep_check_all(const dt_sweep *s);

/* sweep_outputs.c: the files a run writes for itself (out, log, checkpoint, trace; run-dir).
 * A path that several runs share is refused, one line naming the key (DT_ERR_ARG, "PATH:LINE:
 * ..."); KEY = true is the run's own file in its folder (checkpoint = true: DIR/checkpoint). */
dt_status dt_sweep_check_outputs(const dt_sweep *s);
/* The run's file for KEY as its command names it (the file's value, or DIR/FILE for KEY =
 * true; check: a name in dir that no run uses, for the flag check): 1 and the path in buf, or
 * 0 when the run writes none. */
int dt_sweep_own_file(const dt_sweep_run *r, const char *key, const char *dir, int check, char *buf, size_t len);
/* Where the flag check names a run's own files: the deepest folder of out that exists now (the
 * sweep makes the rest), so that the check sees the file system the runs will write to. */
void dt_sweep_check_folder(const char *out, char *buf, size_t len);

/* A run as the sweep keeps it (sweep.c), and its folder's files (sweep_dir.c). */
enum { DT_SWEEP_PENDING, DT_SWEEP_RUNNING, DT_SWEEP_DONE, DT_SWEEP_FAILED,
       DT_SWEEP_STOPPED /* exit 5: stopped with its checkpoint committed, resumable */ };

typedef struct dt_sweep_slot {
    int state;              /* DT_SWEEP_* */
    int pid;
    int killed;             /* stopped by the sweep's interruption: no status */
    int changed;            /* --rerun-changed: kept, but its command changed: runs again, its
                             * old folder moved aside (dt_sweep_move_aside) */
    int in_place;           /* starts again in its folder: resumed from its checkpoint, its log and
                             * console.txt appended to (stopped, or cut short with a checkpoint) */
    double t0, seconds;
    double before;          /* seconds of its earlier starts (in_place) */
    long long console_at, slurm_at; /* the sizes of console.txt and slurm.txt when it started: its
                                     * error is after them (a run resumed in place appends) */
    int exit;
    char error[400];        /* its last "dtrain: error:" line (--slurm: else sbatch's, in slurm.txt) */
    char dir[1300];         /* OUT/NAME */
} dt_sweep_slot;

extern char dt_sweep_self[4096]; /* the program the runs start: this one */

/* The run's argv (NULL-terminated, every string its own); check: as dtrain run's flag check. */
char **dt_sweep_command(const dt_sweep_run *r, const char *dir, int check);
/* sweep_slurm.c: the sbatch command (argv, NULL-terminated, freed with dt_sweep_free_command)
 * that runs `run` as one Slurm job and waits for it; extra: more sbatch options, space-separated;
 * append: the job adds to console.txt (a run resumed in its folder) */
char **dt_sweep_slurm_command(const dt_sweep *s, const dt_sweep_run *r, const char *dir, char **run, const char *extra,
                              int append);
/* sbatch on PATH and a Slurm controller that answers (scontrol ping), asked once before
 * anything is made: 0, or -1 with one line in dt_last_error() */
int dt_sweep_slurm_ready(void);
/* 1 when the run's job (its id in dir/slurm.txt from byte `from` on, into job) was cancelled,
 * preempted or lost with its node: not the run's failure, so it is run again */
int dt_sweep_slurm_cancelled(const char *dir, long long from, char *job, size_t len);
void dt_sweep_free_command(char **av);
void dt_sweep_quoted(FILE *f, char **av);       /* one shell-quoted line */
int dt_sweep_mkdir_p(const char *path);         /* 0, or -1 with errno */
int dt_sweep_rm_rf(const char *path);

/* What is at a run's folder: nothing, a folder a sweep made (it holds the mark), or anything
 * else, which a sweep never removes nor writes into. */
enum { DT_SWEEP_FOLDER_NONE, DT_SWEEP_FOLDER_OURS, DT_SWEEP_FOLDER_FOREIGN };
#define DT_SWEEP_MARK ".dtrain-sweep"
int dt_sweep_folder_state(const char *dir);
/* Makes the run's folder (it must not exist) with the mark in it: 0, or -1 with errno. */
int dt_sweep_make_folder(const char *dir, const char *sweep, const char *run);
/* OUT/sweep.json is absent or a sweep's (else it is not replaced) */
int dt_sweep_json_ours(const dt_sweep *s);

/* OUT/sweep.lock, held (flock) by the sweep and, inherited, by its runs: the fd, or -1 with
 * the error in dt_last_error() when another sweep holds it. A sweep that died leaves runs
 * ending (they get SIGTERM with it): waited for up to DT_SWEEP_LOCK_WAIT_S. */
#define DT_SWEEP_LOCK "sweep.lock"
#define DT_SWEEP_LOCK_WAIT_S 30
int dt_sweep_lock(const dt_sweep *s);
int dt_sweep_write_json(const dt_sweep *s);     /* OUT/sweep.json */
int dt_sweep_write_command(const char *dir, char **av); /* DIR/command.txt: 0, or -1 (dt_last_error) */
void dt_sweep_read_status(dt_sweep_slot *sl);   /* state DONE/FAILED/STOPPED from status.json, else PENDING */
void dt_sweep_write_status(const dt_sweep_slot *sl);
void dt_sweep_last_error(dt_sweep_slot *sl);
/* What a failed run's line says: its error line, naming slurm.txt when it came from there, or
 * the file that holds what the run printed (console.txt, else slurm.txt: sbatch's own words) */
const char *dt_sweep_why(const dt_sweep_slot *sl, char *buf, size_t len);
/* sweep_changed.c: a kept run whose command.txt is not the file's command for it now: 1 and
 * the flags that changed in diff ("lr 0.05 → 0.1, epochs 1 → 2"); 0 when the same (the
 * program's path aside, in any order) or when it has no command.txt */
int dt_sweep_command_changed(const dt_sweep_run *r, const dt_sweep_slot *sl, char *diff, size_t len);
/* --rerun-changed: 1 when the run can run again, its folder moved aside; else 0 with one line
 * printed (its path is no folder, or a file of the file's path outside its folder exists, which
 * it would append to, replace or resume) */
int dt_sweep_can_rerun(const dt_sweep *s, const dt_sweep_run *r, const dt_sweep_slot *sl);
/* The run's folder DIR moved to OUT/.old/NAME.K (K: the first free, from 1), never removed: 0
 * with that path in moved, or -1 with the error in dt_last_error() */
int dt_sweep_move_aside(const char *out, const char *dir, const char *name, char *moved, size_t len);

/* sweep_run.c: the runs started and waited for. The sweep's runs by state, counted by the
 * survey (sweep.c) and kept up to date as they start and end. */
typedef struct dt_sweep_tally {
    int done, failed, running, pending, finished_here;
    int cancelled;          /* --slurm: jobs cancelled, preempted or lost: their runs run again */
    int stopped;            /* status 5: they resume in their folders on the next start */
    int in_place;           /* of the pending: resumed in their folders */
    int changed;            /* of the pending: kept, but their command changed (--rerun-changed) */
    double secs_here;
} dt_sweep_tally;
/* The runs PENDING started as the cores allow, until none runs and none is pending, or a
 * signal stopped them (sl's states updated, a line as each starts and ends): the signal, or 0.
 * under_slurm: every run a job (sbatch: more sbatch options) */
int dt_sweep_run_all(const dt_sweep *s, dt_sweep_slot *sl, dt_sweep_tally *t, int under_slurm, const char *sbatch);
/* The cores the runs may use at once: parallel, else this machine's; under Slurm every run
 * at once unless parallel says */
long dt_sweep_cores(const dt_sweep *s, int under_slurm);
/* The cores a run takes of the `cores` the sweep may use (its ranks; one simulated or under
 * Slurm; all of them across hosts, or when it has more ranks than they are) */
long dt_sweep_cores_of(const dt_sweep_run *r, long cores, int slurm);
void dt_sweep_fmt_secs(double s, char *out, size_t len); /* 1h02m, 3m10s, 42s */

/* sweep_cost.c: the cost of the runs to do (state PENDING), estimated before any starts */
typedef struct dt_sweep_cost {
    double core_s;          /* their training steps x the ranks holding a core x a step's seconds, and
                             * their evaluations (the ranks wait for rank 0's) */
    double eval_s;          /* of it, rank 0's evaluations (forward passes) */
    double wall_s;          /* the runs placed on the cores as the sweep places them */
    long long rank_steps;   /* the training steps of all their ranks */
    int todo, counted;      /* the runs to do; of them, estimated */
    int replays;            /* dtrain sim --replay: computes nothing, left out */
    int unknown;            /* left out: their steps or a step's time not found (why: the first's) */
    char why[500];
    char speeds[300];       /* "mlp at batch 64: 0.51 ms, ...": the steps timed */
} dt_sweep_cost;
void dt_sweep_estimate(const dt_sweep *s, const dt_sweep_slot *sl, long cores, int slurm, dt_sweep_cost *e);
/* its lines on stderr ("sweep: estimate: ..."), saying what it leaves out */
void dt_sweep_estimate_say(const dt_sweep_cost *e, long cores, int slurm);

/* The `dtrain sweep` command (sweep.c). */
int dt_cmd_sweep(int argc, char **argv);

#endif
