/* downpour: the asynchronous parameter server (Dean et al. 2012), in three files and this
 * header (messages and state), downpour.c (set-up, the end, figures), downpour_worker.c and
 * downpour_server.c. The design (slices, messages, staleness, dropping workers, accounting,
 * --compress) is described in docs/downpour.md. */
#ifndef DT_DOWNPOUR_STATE_H
#define DT_DOWNPOUR_STATE_H

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "dtrain/server.h"
#include "schemes/registry.h"

/* TAG_STOP: the answer to a pull once the run reached --target-acc (header only) */
enum { TAG_PULL = 7301, TAG_PUSH, TAG_EPOCH, TAG_DONE, TAG_REPLY, TAG_DROPPED, TAG_GONE_MASK, TAG_GONE, TAG_LIVE_COMM,
       TAG_STOP };

/* The header every message starts with (64 bytes; the payload follows as floats). */
typedef struct {
    int64_t version;  /* PUSH: version last pulled from this server; REPLY: the server's version */
    int64_t steps;    /* PUSH, DONE: steps the worker has trained */
    int64_t epoch;    /* EPOCH: the epoch finished (1-based) */
    int64_t count;    /* PUSH: gradients summed in it; EPOCH: examples seen */
    double epoch_pos; /* PUSH: the worker's position in the run, in epochs */
    double loss_sum;  /* EPOCH: sum of the examples' losses */
    double correct;   /* EPOCH: examples classified correctly */
    double pad;
} msg_hdr;
#define HDR sizeof(msg_hdr)

typedef struct {
    int S, W, server;       /* servers, workers; this rank's server index or -1 */
    size_t np, ns;
    size_t *lo;             /* S + 1 slice bounds */
    /* options */
    long fetch_every, push_every;
    float stall_seconds;
    long stall_at_step; /* 0: halfway through the first epoch */
    long stop_in_push;  /* a fault for the tests (DTRAIN_TEST_STOP_IN_PUSH=N): the last worker
                         * stops itself (SIGSTOP) in the middle of its push at step N */
    long stop_at;       /* another (DTRAIN_TEST_STOP_AT=N:R,R...): the workers of those world
                         * ranks stop themselves before their step N, at a step the test chose
                         * rather than at a time a loaded machine may have passed */
    char stop_ranks[64];
    double timeout, deadline; /* --worker-timeout; a worker's wait for a server */
    /* worker */
    char **rbuf, **sbuf;    /* per server: reply and push buffers (header + slice) */
    MPI_Request *req;       /* 2S */
    MPI_Status *sts;        /* 2S */
    float *accum;           /* push_every > 1 */
    int64_t *version;       /* per server: the version last pulled */
    long trained, since_push;
    int epoch_steps, epochs_run, dropped, done_sent, stalled;
    int stopped;            /* told that the run reached --target-acc */
    double ep_loss, ep_seen, ep_correct;
    char *ebuf;             /* EPOCH: header + state */
    /* server */
    int64_t sversion;
    char *inbuf;
    size_t incap;
    char **obuf;            /* per worker: reply buffer */
    MPI_Request *oreq;      /* per worker: the reply in flight */
    MPI_Request *stuck;     /* per worker: a receive given up on (its sender stopped midway) */
    char **stuck_buf;       /* per worker: its buffer (NULL: none) */
    double *last_heard, *silent;
    int *done, *wdropped, *wep;
    int *gone;              /* per worker (every rank after finish): dropped and silent since for
                             * 3 x --worker-timeout: gone for good, left out of the end */
    MPI_Comm live;          /* after a worker is gone: the ranks still here (has_live) */
    int has_live;
    int *live_world;        /* their ranks in the job, for the summary's rows */
    int64_t *pushes;
    double stale_sum, stale_n, stale_max, last_check;
    /* epoch reports and evaluations between them (rank 0, one server), through the trainer's
     * reports (dtrain/server.h S2) */
    const dt_server_reports *report_to;
    int reports, last_reported;
    int stopping;           /* --target-acc reached: pushes discarded, pulls answered with STOP */
    int64_t applied;        /* worker steps in the pushes applied (the sum of their counts) */
    int epochs_reported;    /* a server: the latest epoch a worker reported finished (its board's
                             * epoch in progress is the next; the supervisor names it) */
    int64_t pulls;          /* pull requests from live workers */
    long next_eval;         /* --eval-every-steps: the next evaluation's step */
    double *e_loss, *e_seen, *e_correct, *e_n;
    float *e_state;
    float *eval_state;      /* the state of the epoch last reported (the initial one before) */
    /* the run's figures, on rank 0 after finish (the summary) */
    double f_pushes, f_mean, f_max;
    double *f_per_worker, *f_dropped, *f_silent; /* W each */
    /* --compress (codec NULL: fp32 payloads) */
    dt_codec_spec spec;
    dt_codec *codec;
    size_t *pbytes;         /* per server: payload bytes of its slice (encoded or 4n) */
    float *residual;        /* worker: error feedback, np floats (slice k at lo[k]) */
    float *wcopy;           /* worker, --fetch-every > 1: its copy of the servers' parameters */
    float *scopy;           /* server: per worker, the copy of this server's slice it holds */
    float *grad;            /* server: a decoded push */
} dp_impl;

static inline void dp_nap(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}
static inline size_t dp_slice_n(const dp_impl *p, int k) { return p->lo[k + 1] - p->lo[k]; }
/* Bytes of server k's slice in a PUSH or REPLY (after the header). */
static inline size_t dp_pay_bytes(const dp_impl *p, int k) { return p->pbytes[k]; }

/* worker hooks (downpour_worker.c) */
dt_status dp_begin_step(dt_scheme *s, dt_step_ctx *c);
dt_status dp_optimizer_step(dt_scheme *s, dt_step_ctx *c);
dt_status dp_end_epoch(dt_scheme *s, dt_step_ctx *c);
/* the worker's end: what is left in the accumulator, then DONE */
dt_status dp_worker_finish(dt_step_ctx *c, dp_impl *p);
/* server (downpour_server.c) */
dt_status dp_serve(dt_scheme *s, dt_step_ctx *c, const dt_server_reports *reports);
/* the server's end: serves until every worker sent DONE, waits for its last replies */
dt_status dp_server_finish(dt_step_ctx *c, dp_impl *p);

#endif
