/* The training loop: data, model, optimiser, schedule, evaluation, logging, checkpoints,
 * and the strategy hooks that distributed schemes fill in. */
#ifndef DT_TRAINER_H
#define DT_TRAINER_H

#include <stdio.h>

#include "algorithms/strategy.h"
#include "dtrain.h"

typedef struct dt_train_config {
    const char *model;       /* name or spec file */
    const char *data;        /* mnist, fashion-mnist, cifar10 */
    const char *data_dir;    /* NULL: $DTRAIN_DATA/NAME or ./data/NAME */
    const char *algo;        /* strategy name */
    int epochs, batch;
    float lr, momentum, weight_decay;
    int nesterov;
    const char *schedule;
    uint64_t seed;
    int train_limit, test_limit; /* 0: all examples */
    int augment;             /* -1: dataset default */
    const char *weights_out; /* final weights, NULL: none */
    const char *log_path;    /* JSON lines, NULL: none */
    const char *checkpoint;  /* written after every epoch, NULL: none */
    const char *resume;      /* checkpoint to continue from, NULL: none */
    int quiet;
} dt_train_config;

typedef struct dt_epoch_stats {
    int epoch;
    double loss, train_acc, test_acc, test_loss, lr, seconds, images_per_s;
} dt_epoch_stats;

struct dt_trainer {
    const dt_train_config *cfg;
    dt_model *model;
    dt_sgd opt;
    dt_schedule sched;
    dt_strategy *strategy;
    dt_dataset train, test;
    int *shard;              /* this rank's example indices */
    int shard_n;
    int rank, size;
    int epoch;               /* current epoch, 0-based */
    long step;               /* steps taken so far */
    int steps_per_epoch;
    float *x;                /* batch buffers */
    uint8_t *y;
    int *idx;
    dt_epoch_stats last;
    char *log_text;          /* JSON lines so far (the log file is rewritten atomically) */
    size_t log_len, log_cap;
};

/* Resolves the data folder for a dataset name (--data-dir, $DTRAIN_DATA/NAME, ./data/NAME). */
void dt_data_dir(const char *name, const char *override_dir, char *out, size_t len);
/* Loads a model from a name or a spec file path. */
dt_status dt_model_open(const char *name_or_path, dt_model **out);

dt_status dt_trainer_init(dt_trainer *t, const dt_train_config *cfg);
dt_status dt_trainer_run(dt_trainer *t);
void dt_trainer_free(dt_trainer *t);

/* Test accuracy (0..1) and mean loss of the model on a dataset, in batches of `batch`. */
dt_status dt_evaluate(dt_model *m, const dt_dataset *d, int batch, int limit, double *acc, double *loss);

#endif
