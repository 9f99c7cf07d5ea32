/* The training loop: data, model, optimiser, schedule, evaluation, logging, checkpoints,
 * and the strategy hooks that distributed schemes fill in. One trainer per rank. */
#ifndef DT_TRAINER_H
#define DT_TRAINER_H

#include <stdio.h>

#include "algorithms/strategy.h"
#include "comm/comm.h"
#include "core/tensorfile.h"
#include "dtrain.h"

typedef struct dt_train_config {
    const char *model;       /* name or spec file */
    const char *data;        /* mnist, fashion-mnist, cifar10 */
    const char *data_dir;    /* NULL: $DTRAIN_DATA/NAME or ./data/NAME */
    const char *algo;        /* strategy name */
    dt_algo_options algo_opt;
    const char *split;       /* random | class | equal | stripe */
    int epochs, batch;
    long max_steps;          /* stop after this many steps per rank (0: no limit) */
    int eval_every;          /* evaluate the averaged model every N epochs (0: only at the end) */
    float lr, momentum, weight_decay;
    int nesterov;
    const char *schedule;
    uint64_t seed;
    int train_limit, test_limit; /* 0: all examples */
    int augment;             /* -1: dataset default */
    const char *weights_out; /* final weights, NULL: none */
    const char *log_path;    /* JSON lines, NULL: none */
    const char *checkpoint;  /* written after every epoch, NULL: none (".rankR" added for N > 1) */
    const char *resume;      /* checkpoint to continue from, NULL: none */
    int quiet;
} dt_train_config;

typedef struct dt_epoch_stats {
    int epoch;
    double loss, train_acc, test_acc, test_loss, lr, seconds, images_per_s;
    double spread;           /* largest ||x_r - mean x|| over ranks (decentralized schemes) */
    double msgs_pct, mb_sent, msgs_sent; /* so far, all ranks */
} dt_epoch_stats;

struct dt_trainer {
    const dt_train_config *cfg;
    dt_comm comm;
    dt_model *model;
    dt_sgd opt;
    dt_schedule sched;
    dt_strategy *strategy;
    dt_dataset train, test;
    int worker;              /* index among the training ranks, -1 on server ranks */
    int nworkers;
    int *shard;              /* this rank's example indices */
    int shard_n;
    int epoch;               /* current epoch, 0-based */
    long step;               /* steps taken so far */
    int stop;                /* set by the strategy: this rank trains no further (a dropped downpour worker) */
    int steps_per_epoch;
    double round_loss;       /* sum of batch losses since the strategy last reset it */
    long round_batches;
    float *x;                /* batch buffers */
    uint8_t *y;
    int *idx;
    float *eval_params, *eval_state; /* the evaluated (averaged) model */
    int start_epoch;         /* 0, or where --resume continues */
    dt_tfile resume_file;    /* the checkpoint, from init until start has restored it */
    char resume_path[1100];
    dt_epoch_stats last;
    double t_start;
    char summary_extra[512]; /* strategy figures for the JSON summary: "\"key\":value,..." */
    char *log_text;          /* JSON lines so far (the log file is rewritten atomically) */
    size_t log_len, log_cap;
};

/* Resolves the data folder for a dataset name (--data-dir, $DTRAIN_DATA/NAME, ./data/NAME). */
void dt_data_dir(const char *name, const char *override_dir, char *out, size_t len);
/* Loads a model from a name or a spec file path. */
dt_status dt_model_open(const char *name_or_path, dt_model **out);

/* Collective over MPI_COMM_WORLD (MPI must be initialised). */
dt_status dt_trainer_init(dt_trainer *t, const dt_train_config *cfg);
/* Collective: the scheme's set-up and, with --resume, its saved state. Then run. */
dt_status dt_trainer_start(dt_trainer *t);
dt_status dt_trainer_run(dt_trainer *t);
void dt_trainer_free(dt_trainer *t);

/* Test accuracy (0..1) and mean loss of the model on a dataset, in batches of `batch`. */
dt_status dt_evaluate(dt_model *m, const dt_dataset *d, int batch, int limit, double *acc, double *loss);

/* For servers that evaluate on their own (downpour): evaluates params/state on rank 0's
 * test set, prints and logs one epoch line. Not collective. */
dt_status dt_trainer_report_epoch(dt_trainer *t, int epoch, double train_loss, double train_acc,
                                  const float *params, const float *state);

/* Appends one JSON line to the --log file (rank 0 only; other ranks: no-op). */
dt_status dt_trainer_log(dt_trainer *t, const char *json_line);

#endif
