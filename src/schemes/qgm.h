/* Quasi-global momentum for the gossip schemes (dpsgd, eventgrad, choco: --momentum-kind qgm;
 * Lin, Kong, Stich and Jaggi, "Quasi-Global Momentum: Accelerating Decentralized Deep Learning
 * on Heterogeneous Data", ICML 2021, Algorithm 1).
 *
 * Local momentum accumulates a rank's own gradients, which on data split by class point to its
 * own classes: the buffer carries each rank away from the others step after step. QGM builds
 * the buffer from the model's change over a step instead, mixing included, which is the
 * direction the ranks move in together:
 *     at the step's start   x_prev = x,  SGD's buffer = mhat   (so v = mu mhat + g: the local step)
 *     after the step        d = (x_prev - x) / lr,   mhat = mu mhat + (1 - mu) d
 * mu is --momentum (the paper's beta = mu), Nesterov and weight decay as SGD's. With --momentum 0
 * the buffer is never read: the plain scheme bit for bit. SGD only (AdamW's moments are not a
 * buffer the step adds to). */
#ifndef DT_SCHEMES_QGM_H
#define DT_SCHEMES_QGM_H

#include "schemes/registry.h"

typedef struct dt_qgm dt_qgm;

/* The words of --momentum-kind, NULL-terminated: "auto" (0: the scheme's choice, drift.h),
 * "local" (1), "qgm" (2). */
enum { DT_MOMENTUM_AUTO, DT_MOMENTUM_LOCAL, DT_MOMENTUM_QGM };
extern const char *const dt_momentum_kinds[];

/* Checks that opt can take it (sgd); NULL out and DT_OK when there is nothing to do (momentum 0). */
dt_status dt_qgm_create(const dt_optim *opt, size_t np, dt_qgm **out);
void dt_qgm_free(dt_qgm *q);
/* At the start of after_backward, before any mixing: remembers x and hands SGD the buffer. */
void dt_qgm_begin_step(dt_qgm *q, dt_step_ctx *c);
/* At the end of end_step, after every change the scheme makes to x this step. */
void dt_qgm_end_step(dt_qgm *q, dt_step_ctx *c);
/* Checkpoints: the buffer as the record "qgm_momentum". A set saved with it resumed without it
 * (or the other way round) is refused in one line naming --momentum-kind. */
dt_status dt_qgm_save(const dt_qgm *q, dt_records *out);
dt_status dt_qgm_load(dt_qgm *q, const dt_tfile *f, const char *path);

#endif
