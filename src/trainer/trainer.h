/* The training loop: data, model, optimiser, schedule, evaluation, logging, checkpoints,
 * and the scheme hooks that distributed schemes fill in. One trainer per rank.
 *
 * Files: setup.c (configuration, data, shards, the hooks' context), loop.c (the epochs and
 * steps, start and run), diverge.c (non-finite values, models drifting apart), evaluate.c
 * (the agreed model and its test accuracy), report.c (the console, the JSON-lines log and
 * the summary), target.c (--target-acc: reached, agreed, where), progress.c (rank 0's
 * progress within an epoch), checkpoint.c (save and resume), stop.c (a stop asked by a signal,
 * agreed by every rank). */
#ifndef DT_TRAINER_H
#define DT_TRAINER_H

#include <stdio.h>
#include <string.h>

#include "comm/world.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/server.h"
#include "schemes/registry.h"
#include "trainer/ckset.h"
#include "trainer/replay.h"

typedef struct dt_epoch_stats {
    int epoch;
    double loss, train_acc, test_acc, test_loss, lr, seconds, images_per_s;
    double val_acc, val_loss;  /* on the held-out examples; unused without --val */
    double spread;           /* largest ||x_r - mean x|| over ranks (decentralized schemes) */
    double msgs_pct, mb_sent, msgs_sent; /* so far, all ranks */
    double compute_s;        /* so far, the most any rank computed (NAN: a server's report) */
    int server_report;       /* a server's report: no speed or traffic figures */
    long step;               /* steps per training rank so far (a server's: the workers' it knows) */
    double train_s;          /* training seconds so far, rank 0's clock, evaluations not counted: where
                              * --target-acc would stop, and what an eval line's train_s is */
} dt_epoch_stats;

/* Rank 0's progress within an epoch (progress.c): the live line and --progress N. */
typedef struct dt_progress {
    int live;                /* 1: '\r' lines on a terminal; 2: the same through dtrain run's relay */
    int shown;               /* a live line is on the screen (cleared before any other line) */
    int width;               /* its length, to clear it */
    double last_draw;        /* when it was last drawn (at most 4 a second) */
    double loss_sum;         /* rank 0's batches since the last step line */
    long loss_steps;
    double live_sum;         /* ... since the live line was last drawn */
    long live_steps;
    long first_step;         /* ctx.step when this run (attempt) started: speed and ETA */
} dt_progress;

/* Where a checkpoint saved within an epoch stands (record "train:position"): the next step
 * of the epoch, the epoch's sums so far (its report after the resume is the uninterrupted
 * run's) and the random streams of the data's augmentation and the model's dropout. */
typedef struct dt_resume_point {
    int32_t mid_epoch;       /* 1: the run continues inside epoch start_epoch */
    int32_t epoch_step;      /* ... at this step of it */
    double loss_sum;
    int64_t seen, correct, bad_step;
    dt_rng data_rng, model_rng;
} dt_resume_point;

typedef struct dt_trainer {
    const dt_train_config *cfg; /* &own */
    dt_train_config own;     /* the caller's, with what --images derives (epochs, max_steps) */
    char plan[4096];         /* the kernel plan file in use ("" none): --plan FILE, or auto's */
    dt_comm comm;
    dt_model *model;
    dt_optim opt;
    dt_schedule sched;
    dt_scheme_choice choice; /* the scheme's configuration checked, until create takes it */
    dt_scheme *scheme;
    int servers;             /* ranks [0, servers) serve and do not train (dtrain/server.h) */
    dt_server_reports server_reports; /* what a server's own evaluations are reported through */
    int worker_stopped;      /* the scheme said this training rank trains no further */
    dt_step_ctx ctx;         /* what the hooks see; its step/epoch are the run's position */
    dt_status grads_st;      /* the first error of this step's grads_ready hooks */
    dt_dataset train, test;
    dt_dataset val;          /* --val: the last N of the (limited) training set; n == 0 without */
    dt_progress prog;
    int *shard;              /* this rank's example indices */
    float *x;                /* batch buffers */
    uint16_t *y;             /* ... the targets: dt_model_positions of them an example */
    int *idx;
    float *eval_params, *eval_state; /* the evaluated (agreed) model */
    int start_epoch;         /* 0, or where --resume continues */
    int resumed_finished;    /* --resume's checkpoint holds every epoch: nothing to train */
    dt_tfile resume_file;    /* the checkpoint, from init until start has restored it */
    char resume_path[1100];
    dt_epoch_stats last;
    double t_start;
    double eval_s;           /* seconds spent evaluating (not training time) */
    /* --target-acc: where the run stood at the first evaluation that reached it */
    int reached;
    double target_train_s, target_msgs, target_mb;
    double target_compute_s; /* the most any rank had computed then (NAN: unknown, a server's) */
    long target_steps;
    /* the drift check (loop.c): the smallest spread measured so far and the agreed model's
     * norm then (spreads: how many measured), and whether the run's one warning was given */
    double spread_min, spread_min_norm;
    int spreads, drift_said;
    /* diverge.c: at this rank's first non-finite loss, the first tensor whose gradient was
     * non-finite (its parameters may stay finite: --compress int8 sends such a value as 0) */
    int grad_noted;
    char nonfinite_grad[sizeof((dt_tensor_view *)0)->name];
    /* stop.c: the stop agreement (--checkpoint) */
    MPI_Comm stop_comm;
    MPI_Request stop_req;
    int stop_mine, stop_all;
    int stop_signal;         /* the signal the ranks agreed to stop on (the largest asked) */
    /* --resume of a set saved mid-epoch: where in its epoch the run continues (checkpoint.c) */
    dt_resume_point at;
    int log_fd;              /* --log, open from the first line on (rank 0); -1: not yet */
    int log_in_place;        /* --log is a character device or a FIFO: no truncation, no fsync */
    dt_replay *replay;       /* dtrain sim --replay: the log whose figures this run reports (rank 0) */
} dt_trainer;

/* stop.c: a stop asked by a signal and agreed by every rank (the file says how) */
void dt_trainer_request_stop(int sig); /* async-signal-safe: from a signal handler */
int dt_trainer_stop_requested(void);   /* the signal requested so far on this process, or 0 */
dt_status dt_stop_begin(dt_trainer *t); /* collective, at the start */
dt_status dt_stop_agreed(dt_trainer *t, int *stop); /* after every step: 1 on every rank alike */
dt_status dt_stop_end(dt_trainer *t);  /* collective: what is pending completed */

/* The data fitted to the model: a text's windows set to its context and its tokens checked
 * against its vocabulary (test may be NULL), images' shape and classes checked. */
dt_status dt_trainer_fit_data(const dt_model *m, const char *model, const char *data, dt_dataset *train, dt_dataset *test);
/* Resolves the data folder for a dataset name (--data-dir, $DTRAIN_DATA/NAME, ./data/NAME). */
void dt_data_dir(const char *name, const char *override_dir, char *out, size_t len);
/* The optimiser's configuration of a run (its flags: --optim, --momentum, --beta1, ...). */
void dt_train_optim_config(const dt_train_config *cfg, dt_optim_config *oc);
/* Loads a model from a name or a spec file path. */
dt_status dt_model_open(const char *name_or_path, dt_model **out);

/* The paths a run of this rank writes or reads (--out and --log on rank 0, --checkpoint,
 * --resume), checked before anything else: not MPI, so `dtrain run` checks them (as rank 0)
 * before it starts any rank. */
dt_status dt_train_check_paths(const dt_train_config *cfg, int rank);
/* --checkpoint FILE: every save replaces it (with several ranks, the set's manifest), so a run
 * may find there only the checkpoint it resumes (--resume FILE, or --resume auto); anything
 * else is refused in one line, left as it is: a file that is no checkpoint, and a checkpoint
 * this run does not resume (a forgotten --resume would lose it, and its set's parts). No MPI:
 * rank 0, and dtrain run before it starts a rank. */
dt_status dt_checkpoint_check_target(const dt_train_config *cfg);

/* Collective over MPI_COMM_WORLD (MPI must be initialised). checked: cfg's scheme as
 * dt_scheme_check chose it, taken (NULL: checked here). */
dt_status dt_trainer_init(dt_trainer *t, const dt_train_config *cfg, dt_scheme_choice *checked);
/* Collective: the scheme's set-up and, with --resume, its saved state. Then run. */
dt_status dt_trainer_start(dt_trainer *t);
dt_status dt_trainer_run(dt_trainer *t);
void dt_trainer_free(dt_trainer *t);

/* Test accuracy (0..1) and mean loss of the model on a dataset, in batches of `batch`. */
dt_status dt_evaluate(dt_model *m, const dt_dataset *d, int batch, int limit, double *acc, double *loss);

/* ---------------------------------------------------------------- between the trainer's files */

/* --split stripe: every rank takes its slice of each global batch of one shared order */
static inline int dt_split_striped(const dt_train_config *cfg) { return cfg->split && !strcmp(cfg->split, "stripe"); }

/* evaluate.c: the model all ranks agree to evaluate and keep (the scheme's, or the mean of the
 * training ranks' models) into t->eval_params/eval_state, and how far the training ranks
 * are from it (collective) */
dt_status dt_trainer_agreed_model(dt_trainer *t, double *spread);
/* evaluate.c: params/state evaluated with rank 0's model (its own weights restored after), on
 * the test set (acc, loss) and, with --val, on the held-out set (val[0] accuracy, val[1] loss) */
dt_status dt_trainer_eval_rank0(dt_trainer *t, const float *params, const float *state, double *acc, double *loss,
                                double val[2]);
/* progress.c (rank 0 acts, the others return at once; no communication) */
void dt_progress_begin(dt_trainer *t);         /* before the first step */
dt_status dt_progress_step(dt_trainer *t);     /* after each step, ctx.step already counts it */
void dt_progress_clear(dt_trainer *t);         /* before any other console line */
/* An evaluation between epochs (--eval-every-steps), as the console and the log tell it. */
typedef struct dt_step_eval {
    long step;
    double epoch, acc, loss, train_s, eval_s, msgs, baseline, bytes, spread;
    double compute_s;        /* the most any rank computed so far (NAN: a server's evaluation) */
    double val[2];           /* accuracy, loss on the held-out set (--val) */
} dt_step_eval;
/* callbacks.c: the configuration's on_epoch and on_eval (rank 0; elsewhere nothing), their
 * time counted as evaluation's: after an epoch's report (e), and after one between steps */
void dt_trainer_on_epoch(dt_trainer *t, const dt_epoch_stats *e, long step);
void dt_trainer_on_step_eval(dt_trainer *t, const dt_step_eval *e);
/* diverge.c. Collective, at an epoch's end (bad_step: this rank's first step with a non-finite
 * loss, or -1): DT_ERR_DIVERGED on every rank when any rank's loss or parameters are not
 * finite, rank 0 logging where it began */
dt_status dt_trainer_check_divergence(dt_trainer *t, long bad_step);
/* After a backward pass whose loss was not finite (the first one): which gradient was not. */
void dt_trainer_note_nonfinite(dt_trainer *t);
/* reach.c: rank 0 warns, a line each, of the flags that cannot act within the run's steps or
 * epochs (dt_flag.reach): a warm-up longer than the run, averagings it never reaches... */
void dt_trainer_warn_unreached(const dt_trainer *t);
/* diverge.c: the final (agreed) model is finite, or DT_ERR_DIVERGED (every rank holds it) */
dt_status dt_trainer_check_final(dt_trainer *t);
/* diverge.c: after the agreed model was made (t->eval_params) and its spread measured, at an
 * evaluation in epoch (1-based) after step: rank 0 warns once per run, in one line and in the
 * log, when the ranks' models drift apart by orders of magnitude (not collective) */
dt_status dt_trainer_check_drift(dt_trainer *t, double spread, int epoch, long step);
/* report.c: the log's line writer (the line freed) and the fields every record writes alike */
dt_status dt_report_log_json(dt_trainer *t, dt_json *j);
void dt_report_num6(dt_json *j, const char *key, double v);             /* "%.6g"; null if not finite */
void dt_report_val(const dt_trainer *t, dt_json *j, double acc, double loss); /* val_acc, val_loss */
void dt_report_lm(const dt_trainer *t, dt_json *j, double test_loss, double val_loss); /* bits per byte */
void dt_report_lm_loss_text(const dt_trainer *t, char *out, size_t len, const char *what, double loss);
/* A seconds figure, null when not known (NAN) */
void dt_report_seconds(dt_json *j, const char *key, double v);
/* An existing --log that is not a dtrain log (nor empty, nor a device or FIFO) is refused. */
dt_status dt_check_log(const char *path);
dt_status dt_trainer_log(dt_trainer *t, const char *json_line);          /* rank 0; elsewhere no-op */
dt_status dt_trainer_log_config(dt_trainer *t);                          /* collective: the first line */
dt_status dt_trainer_epoch_report(dt_trainer *t, double loss_sum, long seen, long correct, double seconds,
                                  float lr);                              /* collective */
dt_status dt_trainer_step_report(dt_trainer *t);                         /* collective: --eval-every-steps */
/* t->server_reports: a server's own evaluations (not collective; dtrain/server.h S2) */
dt_status dt_trainer_report_server_epoch(void *host, int epoch, double train_loss, double train_acc, dt_server_eval *ev);
dt_status dt_trainer_report_server_step(void *host, dt_server_eval *ev);
/* Training time so far on this rank: since the start, less the time spent evaluating. */
static inline double dt_trainer_train_seconds(const dt_trainer *t) { return dt_now() - t->t_start - t->eval_s; }
/* summary.c: the run's last line and table, with the compute-only bound (collective) */
dt_status dt_trainer_summary(dt_trainer *t, double spread_before, double spread_after, double wall);
/* target.c: --target-acc. The accuracy it is about (the test set's, or with --target-on val
 * the held-out set's) */
double dt_target_figure(const dt_trainer *t, double test_acc, double val_acc, double test_loss, double val_loss);
/* A target to reach: --target-acc or --target-loss. */
static inline int dt_target_set(const dt_train_config *c) { return c->target_acc > 0 || c->target_loss > 0; }
/* acc reached --target-acc for the first time: where the run stood is kept and said (rank 0);
 * not collective (a server's own evaluations) */
int dt_target_reached(dt_trainer *t, double acc, double train_s, long steps, double msgs, double mb, double compute_s);
/* collective, after rank 0 evaluated, within the evaluation: every rank learns whether the
 * target was reached now, at rank 0's train_s (the evaluation's line's) */
dt_status dt_target_check(dt_trainer *t, double acc, double train_s, long steps, double msgs, double mb, double compute_s);
/* collective: what a server found on its own (rank 0) shared with every rank */
dt_status dt_target_share_server(dt_trainer *t);
/* checkpoint.c */
/* Collective with several ranks. at NULL: at the end of epoch ctx.epoch; else within it,
 * before its step at->epoch_step, with the epoch's sums and random streams */
dt_status dt_trainer_save_checkpoint(dt_trainer *t, const dt_resume_point *at);
/* Before start: model, optimiser state, progress. Collective with several ranks: every rank calls
 * it, passing what its own set-up said (st), and gets that back if it failed. */
dt_status dt_trainer_load_checkpoint(dt_trainer *t, dt_status st);
/* What load_checkpoint does with a part once read, without MPI (fuzz/fuzz_resume.c reads parts
 * through it): every record checked before it is used, then the model, momentum and where the
 * run stands taken; set: the manifest that named the part (NULL: one process's file). */
dt_status dt_trainer_read_part(dt_trainer *t, const dt_tfile *f, const char *path, const dt_ckset *set);
dt_status dt_trainer_load_run_state(dt_trainer *t);    /* after start: counters, the scheme's state */

#endif
