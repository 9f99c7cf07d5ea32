/* A replay's figures (trainer/replay.c): dtrain sim --replay LOG times a run of the same flags
 * as LOG's on this simulated network, calculating nothing, and reports LOG's evaluations. Rank 0
 * holds it; every call checks that this run is still LOG's (one line naming LOG if not). */
#ifndef DT_REPLAY_H
#define DT_REPLAY_H

#include "dtrain.h"

typedef struct dt_replay dt_replay;

/* Reads LOG (path) and checks its configuration against this run's (config_line, the log's
 * first line as this run writes it). */
dt_status dt_replay_open(const char *path, const char *config_line, dt_replay **out);
/* The next evaluation, between steps, after `step` steps, the run having sent msgs messages
 * and mb MB in all: its figures replace this run's (acc, loss: the test set's; val: accuracy
 * and loss on the held-out set; spread, where LOG has one). */
dt_status dt_replay_step(dt_replay *rp, long step, double msgs, double mb, double *acc, double *loss, double val[2],
                         double *spread);
/* The next evaluation, at the end of `epoch` (1-based): also the epoch's training loss and
 * accuracy. */
dt_status dt_replay_epoch(dt_replay *rp, int epoch, double msgs, double mb, double *loss, double *train_acc,
                          double *acc, double *test_loss, double val[2], double *spread);
/* The summary's spreads of LOG's run (before the last averaging, after the finish). */
void dt_replay_spreads(const dt_replay *rp, double *before, double *after);
const char *dt_replay_path(const dt_replay *rp);
void dt_replay_free(dt_replay *rp);

#endif
