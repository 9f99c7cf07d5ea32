/*
 * dtrain/server.h - the server part of a scheme: ranks that serve and do not train.
 *
 * Downpour's parameter servers are its one user: ranks [0, S) hold the model (a slice each)
 * and answer the workers' pushes and pulls while ranks [S, N) train, each at its own pace.
 * A scheme whose every rank trains (all the others) leaves its def's .server NULL and need
 * not read this header; the general contract is dtrain/scheme.h (C1-C14).
 *
 * S1 Serving. The def's .server points to a dt_scheme_server. After create, count says how
 *    many ranks serve (from the scheme's options); they must leave at least one to train.
 *    On them the trainer calls serve instead of the training loop (start before it, finish,
 *    model_for_eval and summary after it, as on every rank): serve returns when the workers
 *    are done. dt_run_info.nworkers counts the training ranks, .worker is -1 on a server.
 * S2 Evaluations. A server that holds the whole model (one server) evaluates it on its own,
 *    not collectively, through the reports serve is given: epoch prints and logs the epoch
 *    line, step the line of an evaluation between epochs (--eval-every-steps). Either sets
 *    ev->reached when the evaluation is the first to reach --target-acc; the time it takes is
 *    evaluation time, not training time. With several servers dtrain refuses --target-acc
 *    and --eval-every-steps, and evaluates the final model only.
 * S3 Stopping a worker. A worker that is to train no further (dropped by a server, or told
 *    that the run reached --target-acc) says so from worker_stopped, which the trainer asks
 *    after every begin_step: that step is not taken, and the worker goes on to finish.
 * S4 No checkpoints: the servers apply the workers' pushes as they come, so no point of the
 *    run has a consistent state; dtrain refuses --checkpoint and --resume for such a scheme.
 */
#ifndef DTRAIN_SERVER_H
#define DTRAIN_SERVER_H

#include <dtrain/scheme.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An evaluation by a server that evaluates on its own (S2), and where the run stood when it
 * was taken: with one server every counted message is sent or received by it, so its own
 * counters are the run's traffic so far. */
typedef struct dt_server_eval {
    const float *params, *state;  /* the model to evaluate */
    long step;                    /* steps per training rank (the scheme says how it counts them) */
    double msgs, baseline, bytes; /* the run's messages, their baseline and bytes so far */
    int reached;                  /* set by the trainer: this evaluation reached --target-acc */
} dt_server_eval;

/* The trainer's reports of a server's own evaluations (S2), on rank 0; host is the first
 * argument of each. */
typedef struct dt_server_reports {
    void *host;
    /* the model of ev after epoch `epoch` (1-based) of the workers, with their training figures */
    dt_status (*epoch)(void *host, int epoch, double train_loss, double train_acc, dt_server_eval *ev);
    /* the model of ev between epochs (--eval-every-steps) */
    dt_status (*step)(void *host, dt_server_eval *ev);
} dt_server_reports;

typedef struct dt_scheme_server {
    /* ranks [0, count) serve and do not train (S1); called after create */
    int (*count)(const dt_scheme *s);
    /* on a server rank, after start: serve until the workers are done (S1, S2) */
    dt_status (*serve)(dt_scheme *s, dt_step_ctx *c, const dt_server_reports *reports);
    /* on a training rank, after begin_step: nonzero when this rank trains no further (S3) */
    int (*worker_stopped)(const dt_scheme *s);
} dt_scheme_server;

/* The ranks that serve for scheme s: 0 for a scheme without a server part. */
static inline int dt_scheme_servers(const dt_scheme *s) {
    return s->def->server && s->def->server->count ? s->def->server->count(s) : 0;
}

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_SERVER_H */
