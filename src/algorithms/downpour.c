/* downpour: an asynchronous parameter server (Dean et al. 2012, "Downpour SGD").
 *
 * Ranks [0, S) serve (--servers S, default 1); server k owns the contiguous slice
 * [lo_k, lo_{k+1}) of the flat parameter vector, lo_k = floor(k * n / S). The other ranks are
 * workers and split the training set among them (the trainer does that).
 *
 * Worker, at every step:
 *   - every --fetch-every F steps (begin_step): PULL from every server, which replies with its
 *     slice and its version (= number of pushes it has applied); the replica is overwritten;
 *   - after backward (optimizer_step, which replaces the trainer's SGD step): the gradient is
 *     added to an accumulator; every --push-every P steps the accumulated SUM of gradients is
 *     PUSHed, each server getting its slice, with the version the worker last pulled from it
 *     and the worker's position in the run (for the learning-rate schedule);
 *   - between fetches (when the next step does not pull) the worker also applies its own
 *     gradient to its replica with plain SGD at the current lr (no momentum, no weight decay),
 *     so the replica moves between pulls as in the paper; a pull overwrites it.
 *   - at the end it pushes what is left in the accumulator and sends DONE.
 * Server (serve hook): polls with MPI_Improbe(ANY_SOURCE, ANY_TAG), sleeping 100 us when
 * nothing is there, and handles PULL (reply), PUSH (applied at once with its own SGD over the
 * slice: the run's momentum, Nesterov and weight decay, the momentum buffer being the slice of
 * the trainer's t->opt; lr from the schedule at the pushing worker's position), EPOCH and
 * DONE. It does not wait for the other workers. Staleness of a push = server version when it
 * is applied - the version the worker last pulled from that server (with P > F the gradients
 * of one push may come from several pulls; the latest is the one recorded).
 *
 * Dropping: a worker none of whose messages reached a server for --worker-timeout seconds is
 * dropped by that server (a warning on stderr, always); time the server spends evaluating is
 * not counted as silence, and silence is only judged once the server has taken every message
 * that arrived. Its pushes are then discarded and its next PULL is answered with tag DROPPED;
 * the worker then sends DONE and stops training (t->stop: the trainer ends its epochs there).
 * The run ends normally; the dropped ranks are printed and listed in the JSON summary
 * ("dropped", "dropped_silent_s"; per rank "steps").
 * --stall-seconds X makes the last worker rank sleep X seconds once, halfway through its
 * first epoch, before that step's messages (for the tests).
 *
 * Never blocking forever: workers post MPI_Irecv/MPI_Isend and poll them with MPI_Testall
 * (sleeping 50 us between tests) against a deadline of max(120 s, 4 x --worker-timeout); past
 * it the run stops with an error naming the server. A worker waits for its own sends to
 * complete before going on, so it is inside MPI while a server receives its message and the
 * server's MPI_Mrecv of a matched message cannot wait on a worker that is computing or
 * sleeping. Servers never wait on a worker: replies are MPI_Isend from a per-worker buffer
 * (reused only after the worker has received the previous reply). Every message a worker
 * sends is received (a server serves until every worker, dropped or not, has sent DONE,
 * which comes after all its other messages), and every reply is awaited, so nothing is left
 * unmatched at MPI_Finalize.
 *
 * Progress: with one server, rank 0 evaluates and prints epoch e once every live worker has
 * finished it (workers send a small EPOCH message with their loss, accuracy and batch-norm
 * state to rank 0 at the epochs the trainer would evaluate: --eval-every and the last one);
 * the workers that wait for a reply meanwhile wait. With several servers no server holds the
 * whole model, so only the final model is reported (by the trainer, after model_for_eval).
 * The final (evaluated, saved) model: each server contributes its slice (zero elsewhere,
 * MPI_Allreduce sum, not counted as training traffic) and the batch-norm state is the mean of
 * the workers' state.
 *
 * Accounting: a push = S messages (header + slice), a pull = S small requests + S replies
 * (header + slice); bytes are the message sizes (the 64-byte header included). EPOCH
 * (progress measurement) and DONE (control) are not counted, as docs/accounting.md leaves
 * out measurement and control tokens; their time still goes to comm s. Baseline
 * (what the run would send communicating every step): per trained step, the worker's 2S
 * messages (a push and a pull request per server) on the worker, and one reply per worker
 * step on each server (added when the worker's DONE tells its step count).
 *
 * --compress C (not none; shared/spec/algorithms.md "Compression"): the same messages, the
 * same 64-byte header, an encoded payload (src/comm/codec.h) instead of the fp32 slice.
 *   - PUSH is a gradient payload: the worker keeps one error-feedback residual per server
 *     slice (dt_codec_encode_ef over [lo_k, lo_{k+1})); the server decodes and applies it.
 *   - REPLY is a parameter payload: server k keeps, for every worker, the copy of its slice
 *     that worker holds and replies encode(x_k - copy_w) (dt_codec_encode_delta); the worker
 *     adds decode(...) to its copy (dt_codec_decode_add), so the two copies stay identical bit
 *     for bit and what topk does not send stays owed. The worker's copy is its parameters
 *     (with --fetch-every 1 nothing else changes them); with --fetch-every F > 1 it is a
 *     separate buffer, and a pull overwrites the replica with it as before.
 *   - Set-up, not counted: each server broadcasts its slice once at start, so every copy
 *     starts equal to the server's (they already are, from the common seed, unless resumed).
 * Message sizes are fixed per (codec, slice length): HDR + dt_codec_bytes(spec, n_k); bytes
 * counted are those sizes. Encoding and decoding time goes to comm s. With --compress none
 * the fp32 path above runs unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/strategy.h"
#include "comm/codec.h"
#include "trainer/trainer.h"

enum { TAG_PULL = 7301, TAG_PUSH, TAG_EPOCH, TAG_DONE, TAG_REPLY, TAG_DROPPED };

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
    double timeout, deadline;
    /* worker */
    char **rbuf, **sbuf;    /* per server: reply and push buffers (header + slice) */
    MPI_Request *req;       /* 2S */
    MPI_Status *sts;        /* 2S */
    float *accum;           /* push_every > 1 */
    int64_t *version;       /* per server: the version last pulled */
    long trained, since_push;
    int epoch_steps, epochs_run, dropped, done_sent, stalled;
    double ep_loss, ep_seen, ep_correct;
    char *ebuf;             /* EPOCH: header + state */
    /* server */
    int64_t sversion;
    char *inbuf;
    size_t incap;
    char **obuf;            /* per worker: reply buffer */
    MPI_Request *oreq;      /* per worker: the reply in flight */
    double *last_heard, *silent;
    int *done, *wdropped, *wep;
    int64_t *pushes, *wsteps;
    double stale_sum, stale_n, stale_max, last_check;
    /* epoch reports (rank 0, one server) */
    int reports, last_reported;
    double *e_loss, *e_seen, *e_correct, *e_n;
    float *e_state;
    /* --compress (codec NULL: fp32 payloads) */
    dt_codec_spec spec;
    dt_codec *codec;
    size_t *pbytes;         /* per server: payload bytes of its slice (encoded or 4n) */
    float *residual;        /* worker: error feedback, np floats (slice k at lo[k]) */
    float *wcopy;           /* worker, --fetch-every > 1: its copy of the servers' parameters */
    float *scopy;           /* server: per worker, the copy of this server's slice it holds */
    float *grad;            /* server: a decoded push */
} dp_impl;

static void nap(long ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static size_t slice_n(const dp_impl *p, int k) { return p->lo[k + 1] - p->lo[k]; }
/* Bytes of server k's slice in a PUSH or REPLY (after the header). */
static size_t pay_bytes(const dp_impl *p, int k) { return p->pbytes[k]; }

/* ------------------------------------------------------------------ worker */

/* Polls n requests until all complete; a server that does not answer by the deadline is an
 * error (the caller stops the run). */
static dt_status wait_all(dt_trainer *t, dp_impl *p, int n, MPI_Request *reqs, MPI_Status *sts, const char *what) {
    double t0 = dt_now(), end = t0 + p->deadline;
    dt_status st = DT_OK;
    for (;;) {
        int flag = 0, err = MPI_Testall(n, reqs, &flag, sts ? sts : MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) { st = dt_mpi_check(err, what); break; }
        if (flag) break;
        if (dt_now() > end) {
            int who = -1;
            for (int i = 0; i < n && who < 0; i++) {
                int one = 0;
                MPI_Test(&reqs[i], &one, MPI_STATUS_IGNORE);
                if (!one) who = i % p->S;
            }
            st = dt_fail(DT_ERR_MPI, "downpour: %s: server rank %d did not answer for %.0f s", what, who, p->deadline);
            break;
        }
        nap(50000);
    }
    t->comm.c.t_comm += dt_now() - t0;
    return st;
}

static dt_status worker_done(dt_trainer *t, dp_impl *p) {
    msg_hdr h = {.steps = p->trained};
    double t0 = dt_now();
    for (int k = 0; k < p->S; k++) {
        int err = MPI_Isend(&h, (int)HDR, MPI_BYTE, k, TAG_DONE, t->comm.comm, &p->req[k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour done)");
    }
    t->comm.c.t_comm += dt_now() - t0;
    p->done_sent = 1;
    return wait_all(t, p, p->S, p->req, NULL, "done");
}

static dt_status worker_pull(dt_trainer *t, dp_impl *p) {
    const int S = p->S;
    msg_hdr h = {.steps = p->trained};
    double t0 = dt_now();
    for (int k = 0; k < S; k++) {
        int err = MPI_Irecv(p->rbuf[k], (int)(HDR + pay_bytes(p, k)), MPI_BYTE, k, MPI_ANY_TAG,
                            t->comm.comm, &p->req[k]);
        if (err == MPI_SUCCESS) err = MPI_Isend(&h, (int)HDR, MPI_BYTE, k, TAG_PULL, t->comm.comm, &p->req[S + k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Irecv/MPI_Isend (downpour pull)");
        dt_count_send(&t->comm, 1, HDR);
    }
    t->comm.c.t_comm += dt_now() - t0;
    dt_status st = wait_all(t, p, 2 * S, p->req, p->sts, "pull");
    if (st != DT_OK) return st;
    float *x = dt_model_params(t->model);
    int dropped = 0;
    const double t1 = dt_now();
    for (int k = 0; k < S; k++) {
        int cnt = 0;
        MPI_Get_count(&p->sts[k], MPI_BYTE, &cnt);
        dt_count_recv(&t->comm, 1, (uint64_t)cnt);
        if (p->sts[k].MPI_TAG == TAG_DROPPED) { dropped = 1; continue; }
        const size_t bytes = pay_bytes(p, k);
        if (p->sts[k].MPI_TAG != TAG_REPLY || (size_t)cnt != HDR + bytes)
            return dt_fail(DT_ERR_MPI, "downpour: unexpected reply from server rank %d (tag %d, %d bytes)", k,
                           p->sts[k].MPI_TAG, cnt);
        msg_hdr r;
        memcpy(&r, p->rbuf[k], HDR);
        p->version[k] = r.version;
        if (!p->codec) {
            memcpy(x + p->lo[k], p->rbuf[k] + HDR, bytes);
            continue;
        }
        /* the copy of server k's slice: += decode, as the server did to its copy of ours */
        float *c = p->wcopy ? p->wcopy : x;
        dt_codec_decode_add(p->codec, p->rbuf[k] + HDR, slice_n(p, k), c + p->lo[k]);
        if (p->wcopy) memcpy(x + p->lo[k], c + p->lo[k], slice_n(p, k) * sizeof(float));
    }
    if (p->codec) t->comm.c.t_comm += dt_now() - t1;
    if (dropped) {
        /* told by a server: stop training; the servers stop waiting for us */
        p->dropped = 1;
        t->stop = 1;
        return worker_done(t, p);
    }
    return DT_OK;
}

static dt_status worker_push(dt_trainer *t, dp_impl *p, const float *g, long count) {
    const double pos = t->epoch + (double)p->epoch_steps / t->steps_per_epoch;
    double t0 = dt_now();
    for (int k = 0; k < p->S; k++) {
        msg_hdr h = {.version = p->version[k], .steps = p->trained, .count = count, .epoch_pos = pos};
        const size_t bytes = pay_bytes(p, k);
        memcpy(p->sbuf[k], &h, HDR);
        if (p->codec) /* gradient payload: error feedback per server slice */
            dt_codec_encode_ef(p->codec, g + p->lo[k], p->residual + p->lo[k], slice_n(p, k), p->sbuf[k] + HDR);
        else
            memcpy(p->sbuf[k] + HDR, g + p->lo[k], bytes);
        int err = MPI_Isend(p->sbuf[k], (int)(HDR + bytes), MPI_BYTE, k, TAG_PUSH, t->comm.comm, &p->req[k]);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour push)");
        dt_count_send(&t->comm, 1, HDR + bytes);
    }
    t->comm.c.t_comm += dt_now() - t0;
    return wait_all(t, p, p->S, p->req, NULL, "push");
}

static dt_status dp_begin_step(dt_strategy *s, dt_trainer *t) {
    dp_impl *p = s->impl;
    if (p->dropped) return DT_OK;
    if (!p->stalled && s->opt->stall_seconds > 0 && t->comm.rank == t->comm.size - 1 && p->epochs_run == 0 &&
        p->epoch_steps == t->steps_per_epoch / 2) {
        p->stalled = 1;
        double until = dt_now() + s->opt->stall_seconds;
        for (double left; (left = until - dt_now()) > 0;) {
            struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    const long F = s->opt->fetch_every > 1 ? s->opt->fetch_every : 1;
    return p->trained % F == 0 ? worker_pull(t, p) : DT_OK;
}

static dt_status dp_optimizer_step(dt_strategy *s, dt_trainer *t, float lr) {
    dp_impl *p = s->impl;
    if (p->dropped) return DT_OK;
    const long F = s->opt->fetch_every > 1 ? s->opt->fetch_every : 1;
    const long P = s->opt->push_every > 1 ? s->opt->push_every : 1;
    /* every batch is full with several ranks (the trainer drops the last partial one) */
    int ok = 0;
    const int cnt = t->cfg->batch;
    p->ep_loss += (double)dt_model_loss(t->model, t->y, &ok) * cnt;
    p->ep_correct += ok;
    p->ep_seen += cnt;
    float *g = dt_model_grads(t->model), *x = dt_model_params(t->model);
    dt_status st = DT_OK;
    if (P == 1) {
        st = worker_push(t, p, g, 1);
    } else {
        for (size_t i = 0; i < p->np; i++) p->accum[i] += g[i];
        if (++p->since_push == P) {
            st = worker_push(t, p, p->accum, P);
            memset(p->accum, 0, p->np * sizeof(float));
            p->since_push = 0;
        }
    }
    if (st != DT_OK) return st;
    if ((p->trained + 1) % F != 0)
        for (size_t i = 0; i < p->np; i++) x[i] -= lr * g[i];
    p->trained++;
    p->epoch_steps++;
    t->comm.c.baseline_msgs += 2 * (uint64_t)p->S;
    return DT_OK;
}

static int epoch_due(const dt_trainer *t, int epoch1) {
    const dt_train_config *c = t->cfg;
    const int last = epoch1 == c->epochs || (c->max_steps > 0 && t->step >= c->max_steps);
    return last || (c->eval_every > 0 && epoch1 % c->eval_every == 0);
}

static dt_status dp_end_epoch(dt_strategy *s, dt_trainer *t) {
    dp_impl *p = s->impl;
    dt_status st = DT_OK;
    if (!p->dropped && p->S == 1 && p->ep_seen > 0 && epoch_due(t, t->epoch + 1)) {
        msg_hdr h = {.epoch = t->epoch + 1, .count = (int64_t)p->ep_seen, .loss_sum = p->ep_loss, .correct = p->ep_correct};
        memcpy(p->ebuf, &h, HDR);
        if (p->ns) memcpy(p->ebuf + HDR, dt_model_state(t->model), p->ns * sizeof(float));
        const size_t bytes = HDR + p->ns * sizeof(float);
        double t0 = dt_now();
        int err = MPI_Isend(p->ebuf, (int)bytes, MPI_BYTE, 0, TAG_EPOCH, t->comm.comm, &p->req[0]);
        t->comm.c.t_comm += dt_now() - t0;
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour epoch)");
        st = wait_all(t, p, 1, p->req, NULL, "epoch report");
    }
    p->ep_loss = p->ep_seen = p->ep_correct = 0;
    p->epoch_steps = 0;
    p->epochs_run++;
    return st;
}

/* ------------------------------------------------------------------ server */

static int all_finished(const dp_impl *p, int count_dropped) {
    for (int w = 0; w < p->W; w++)
        if (!p->done[w] && !(count_dropped && p->wdropped[w])) return 0;
    return 1;
}

/* Rank 0 with one server: reports epoch e once every live worker has finished it. */
static dt_status maybe_report(dt_trainer *t, dp_impl *p) {
    if (!p->reports) return DT_OK;
    const int epochs = t->cfg->epochs;
    for (;;) {
        int e = p->last_reported + 1;
        while (e <= epochs && p->e_n[e] == 0) e++;
        if (e > epochs) return DT_OK;
        for (int w = 0; w < p->W; w++)
            if (!p->done[w] && !p->wdropped[w] && p->wep[w] < e) return DT_OK;
        memcpy(t->eval_params, dt_model_params(t->model), p->np * sizeof(float));
        for (size_t i = 0; i < p->ns; i++) t->eval_state[i] = (float)(p->e_state[(size_t)e * p->ns + i] / p->e_n[e]);
        double t0 = dt_now();
        dt_status st = dt_trainer_report_epoch(t, e, p->e_loss[e] / p->e_seen[e], p->e_correct[e] / p->e_seen[e],
                                               t->eval_params, t->eval_state);
        /* the server was not listening meanwhile: that is no worker's silence */
        const double busy = dt_now() - t0;
        for (int w = 0; w < p->W; w++) p->last_heard[w] += busy;
        p->last_reported = e;
        if (st != DT_OK) return st;
    }
}

static void check_timeouts(dt_trainer *t, dp_impl *p) {
    const double now = dt_now();
    p->last_check = now;
    if (p->timeout <= 0) return;
    for (int w = 0; w < p->W; w++) {
        if (p->done[w] || p->wdropped[w] || now - p->last_heard[w] <= p->timeout) continue;
        p->wdropped[w] = 1;
        p->silent[w] = now - p->last_heard[w];
        fprintf(stderr, "dtrain: warning: downpour: worker rank %d silent for %.1f s (--worker-timeout %g): dropped by server rank %d, the other workers carry on\n",
                p->S + w, p->silent[w], p->timeout, t->comm.rank);
        fflush(stderr);
    }
}

static dt_status server_reply(dt_trainer *t, dp_impl *p, int w) {
    const int dest = p->S + w;
    double t0 = dt_now();
    int err = MPI_SUCCESS;
    if (p->oreq[w] != MPI_REQUEST_NULL) err = MPI_Wait(&p->oreq[w], MPI_STATUS_IGNORE);
    msg_hdr h = {.version = p->sversion};
    memcpy(p->obuf[w], &h, HDR);
    size_t bytes = HDR;
    int tag = TAG_DROPPED;
    if (!p->wdropped[w]) {
        const size_t n = slice_n(p, p->server);
        const float *x = dt_model_params(t->model) + p->lo[p->server];
        if (p->codec) /* parameter payload: the change since the copy worker w holds */
            dt_codec_encode_delta(p->codec, x, p->scopy + (size_t)w * n, n, p->obuf[w] + HDR);
        else
            memcpy(p->obuf[w] + HDR, x, n * sizeof(float));
        bytes += pay_bytes(p, p->server);
        tag = TAG_REPLY;
    }
    if (err == MPI_SUCCESS) err = MPI_Isend(p->obuf[w], (int)bytes, MPI_BYTE, dest, tag, t->comm.comm, &p->oreq[w]);
    t->comm.c.t_comm += dt_now() - t0;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Isend (downpour reply)");
    dt_count_send(&t->comm, 1, bytes);
    return DT_OK;
}

static dt_status server_apply(dt_trainer *t, dp_impl *p, int w, const msg_hdr *h, const float *g) {
    const int k = p->server;
    const double stale = (double)(p->sversion - h->version);
    p->stale_sum += stale;
    p->stale_n += 1;
    if (stale > p->stale_max) p->stale_max = stale;
    p->pushes[w]++;
    const float lr = dt_schedule_lr(&t->sched, h->epoch_pos, t->cfg->epochs);
    /* the run's SGD over this server's slice; the momentum buffer is the slice of t->opt */
    dt_sgd view = t->opt;
    view.n = slice_n(p, k);
    view.buf = t->opt.buf ? t->opt.buf + p->lo[k] : NULL;
    double t0 = dt_now();
    dt_sgd_step(&view, dt_model_params(t->model) + p->lo[k], g, lr);
    t->comm.c.t_compute += dt_now() - t0;
    t->opt.started = view.started;
    p->sversion++;
    return DT_OK;
}

static dt_status server_handle(dt_trainer *t, dp_impl *p, MPI_Message *msg, MPI_Status *status) {
    int cnt = 0;
    MPI_Get_count(status, MPI_BYTE, &cnt);
    const int src = status->MPI_SOURCE, tag = status->MPI_TAG, w = src - p->S;
    if (w < 0 || w >= p->W || cnt < (int)HDR || (size_t)cnt > p->incap) {
        /* take it anyway (into a scratch buffer) so that it is not left unmatched */
        char *junk = malloc(cnt > 0 ? (size_t)cnt : 1);
        MPI_Mrecv(junk, cnt, MPI_BYTE, msg, MPI_STATUS_IGNORE);
        free(junk);
        return dt_fail(DT_ERR_MPI, "downpour: server rank %d got an unexpected message from rank %d (tag %d, %d bytes)",
                       t->comm.rank, src, tag, cnt);
    }
    double t0 = dt_now();
    int err = MPI_Mrecv(p->inbuf, cnt, MPI_BYTE, msg, MPI_STATUS_IGNORE);
    t->comm.c.t_comm += dt_now() - t0;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Mrecv (downpour)");
    /* EPOCH is measurement and DONE control (docs/accounting.md): not training traffic */
    if (tag == TAG_PULL || tag == TAG_PUSH) dt_count_recv(&t->comm, 1, (uint64_t)cnt);
    p->last_heard[w] = dt_now();
    msg_hdr h;
    memcpy(&h, p->inbuf, HDR);
    const float *payload = (const float *)(p->inbuf + HDR);
    const int live = !p->wdropped[w] && !p->done[w];
    switch (tag) {
    case TAG_PULL:
        return server_reply(t, p, w);
    case TAG_PUSH:
        if ((size_t)cnt != HDR + pay_bytes(p, p->server))
            return dt_fail(DT_ERR_MPI, "downpour: push of %d bytes from rank %d, expected %zu", cnt, src,
                           HDR + pay_bytes(p, p->server));
        if (!live) return DT_OK; /* a dropped worker's: discarded */
        if (p->codec) {
            t0 = dt_now();
            dt_codec_decode(p->codec, p->inbuf + HDR, slice_n(p, p->server), p->grad);
            t->comm.c.t_comm += dt_now() - t0;
            payload = p->grad;
        }
        return server_apply(t, p, w, &h, payload);
    case TAG_EPOCH:
        if ((size_t)cnt != HDR + p->ns * sizeof(float) || h.epoch < 1 || h.epoch > t->cfg->epochs)
            return dt_fail(DT_ERR_MPI, "downpour: bad epoch report from rank %d", src);
        if (live && p->reports) {
            const int e = (int)h.epoch;
            p->e_loss[e] += h.loss_sum;
            p->e_seen[e] += (double)h.count;
            p->e_correct[e] += h.correct;
            p->e_n[e] += 1;
            for (size_t i = 0; i < p->ns; i++) p->e_state[(size_t)e * p->ns + i] += payload[i];
            p->wep[w] = e;
        }
        return DT_OK;
    case TAG_DONE:
        p->done[w] = 1;
        p->wsteps[w] = h.steps;
        t->comm.c.baseline_msgs += (uint64_t)h.steps; /* one reply per step, had it pulled every step */
        return DT_OK;
    default:
        return dt_fail(DT_ERR_MPI, "downpour: server rank %d got tag %d from rank %d", t->comm.rank, tag, src);
    }
}

/* Serves until every worker is done (drain) or done or dropped (!drain). */
static dt_status server_loop(dt_trainer *t, dp_impl *p, int drain) {
    dt_status st = DT_OK;
    while (!all_finished(p, !drain)) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status status;
        double t0 = dt_now();
        int err = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, t->comm.comm, &flag, &msg, &status);
        t->comm.c.t_comm += dt_now() - t0;
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Improbe (downpour)");
        if (flag) {
            if ((st = server_handle(t, p, &msg, &status)) != DT_OK) return st;
            /* judge silence also when messages keep coming, but not on every one */
            if (!drain && dt_now() - p->last_check > p->timeout / 4) check_timeouts(t, p);
            if ((st = maybe_report(t, p)) != DT_OK) return st;
            continue;
        }
        if (!drain) check_timeouts(t, p);
        if ((st = maybe_report(t, p)) != DT_OK) return st;
        nap(100000);
    }
    return maybe_report(t, p);
}

static dt_status dp_serve(dt_strategy *s, dt_trainer *t) {
    dp_impl *p = s->impl;
    const double now = dt_now();
    for (int w = 0; w < p->W; w++) p->last_heard[w] = now;
    p->last_check = now;
    return server_loop(t, p, 0);
}

/* ------------------------------------------------------------------ the end (collective) */

/* Servers' figures gathered on rank 0 (measurement, not counted): the staleness line and
 * the summary fields. */
static dt_status report_stats(dt_strategy *s, dt_trainer *t) {
    dp_impl *p = s->impl;
    const int W = p->W, len = 3 + 4 * W;
    double *mine = calloc((size_t)len, sizeof(double));
    double *all = t->comm.rank == 0 ? calloc((size_t)len * (size_t)t->comm.size, sizeof(double)) : NULL;
    if (!mine || (t->comm.rank == 0 && !all)) { free(mine); free(all); return dt_fail(DT_ERR_NOMEM, "out of memory"); }
    if (p->server >= 0) {
        mine[0] = p->stale_sum; mine[1] = p->stale_n; mine[2] = p->stale_max;
        for (int w = 0; w < W; w++) {
            mine[3 + w] = (double)p->pushes[w];
            mine[3 + W + w] = p->wdropped[w];
            mine[3 + 2 * W + w] = p->silent[w];
            mine[3 + 3 * W + w] = (double)p->wsteps[w];
        }
    }
    int err = MPI_Gather(mine, len, MPI_DOUBLE, all, len, MPI_DOUBLE, 0, t->comm.comm);
    free(mine);
    if (err != MPI_SUCCESS) { free(all); return dt_mpi_check(err, "MPI_Gather (downpour figures)"); }
    if (t->comm.rank != 0) return DT_OK;
    double sum = 0, n = 0, mx = 0, total = 0, steps = 0;
    double *pushes = calloc((size_t)W * 3, sizeof(double)), *dropped = pushes + W, *silent = pushes + 2 * W;
    if (!pushes) { free(all); return dt_fail(DT_ERR_NOMEM, "out of memory"); }
    for (int k = 0; k < p->S; k++) {
        const double *r = all + (size_t)k * len;
        sum += r[0]; n += r[1];
        if (r[2] > mx) mx = r[2];
        for (int w = 0; w < W; w++) {
            /* a push reaches every server: count it once */
            if (r[3 + w] > pushes[w]) pushes[w] = r[3 + w];
            if (r[3 + W + w] > 0) dropped[w] = 1;
            if (r[3 + 2 * W + w] > silent[w]) silent[w] = r[3 + 2 * W + w];
            if (r[3 + 3 * W + w] > steps) steps = r[3 + 3 * W + w];
        }
    }
    free(all);
    for (int w = 0; w < W; w++) total += pushes[w];
    const double mean = n > 0 ? sum / n : 0;
    /* steps per training rank, as the other schemes report them */
    t->step = (long)steps;
    /* the line on stdout */
    if (!t->cfg->quiet) {
        printf("downpour: %.0f pushes, staleness mean %.2f max %.0f; dropped workers: ", total, mean, mx);
        int any = 0;
        for (int w = 0; w < W; w++)
            if (dropped[w]) printf("%srank %d (silent %.1f s)", any++ ? ", " : "", p->S + w, silent[w]);
        printf("%s\n", any ? "" : "none");
        fflush(stdout);
    }
    /* the summary fields; the per-worker lists are left out if they do not fit */
    char buf[sizeof t->summary_extra];
    for (int full = 1; full >= 0; full--) {
        size_t o = 0, cap = sizeof buf;
#define PUT(...) do { if (o < cap) o += (size_t)snprintf(buf + o, cap - o, __VA_ARGS__); } while (0)
        PUT("\"servers\":%d,\"staleness_mean\":%.4f,\"staleness_max\":%.0f,\"pushes\":%.0f", p->S, mean, mx, total);
        if (full) {
            PUT(",\"pushes_per_worker\":[");
            for (int w = 0; w < W; w++) PUT("%s%.0f", w ? "," : "", pushes[w]);
            PUT("]");
        }
        PUT(",\"dropped\":[");
        for (int w = 0, c = 0; w < W; w++)
            if (dropped[w]) PUT("%s%d", c++ ? "," : "", p->S + w);
        PUT("]");
        if (full) {
            PUT(",\"dropped_silent_s\":[");
            for (int w = 0, c = 0; w < W; w++)
                if (dropped[w]) PUT("%s%.2f", c++ ? "," : "", silent[w]);
            PUT("]");
        }
#undef PUT
        if (o < cap || !full) {
            if (o >= cap) buf[0] = 0; /* not even the short form fits: say nothing rather than half */
            memcpy(t->summary_extra, buf, sizeof buf);
            break;
        }
    }
    free(pushes);
    return DT_OK;
}

static dt_status dp_finish(dt_strategy *s, dt_trainer *t) {
    dp_impl *p = s->impl;
    dt_status st = DT_OK;
    if (p->server < 0) {
        if (!p->dropped && p->since_push > 0) {
            st = worker_push(t, p, p->accum, p->since_push);
            memset(p->accum, 0, p->np * sizeof(float));
            p->since_push = 0;
        }
        if (st == DT_OK && !p->done_sent) st = worker_done(t, p);
    } else {
        /* dropped workers still send what they had in flight, then DONE */
        st = server_loop(t, p, 1);
        for (int w = 0; st == DT_OK && w < p->W; w++) {
            if (p->oreq[w] == MPI_REQUEST_NULL) continue;
            /* every reply answers a pull whose worker waits for it */
            double t0 = dt_now(), end = t0 + p->deadline;
            int flag = 0;
            while (!flag) {
                int err = MPI_Test(&p->oreq[w], &flag, MPI_STATUS_IGNORE);
                if (err != MPI_SUCCESS) { st = dt_mpi_check(err, "MPI_Test (downpour reply)"); break; }
                if (!flag && dt_now() > end) {
                    st = dt_fail(DT_ERR_MPI, "downpour: worker rank %d did not take its last reply", p->S + w);
                    break;
                }
                if (!flag) nap(50000);
            }
            t->comm.c.t_comm += dt_now() - t0;
        }
    }
    /* every rank reaches this point unless it failed (and then the run is aborted) */
    if (st != DT_OK) return st;
    return report_stats(s, t);
}

/* The servers' parameters (each its slice) and the mean of the workers' batch-norm state. */
static dt_status dp_model_for_eval(dt_strategy *s, dt_trainer *t, float *params, float *state) {
    dp_impl *p = s->impl;
    memset(params, 0, p->np * sizeof(float));
    if (p->server >= 0)
        memcpy(params + p->lo[p->server], dt_model_params(t->model) + p->lo[p->server],
               slice_n(p, p->server) * sizeof(float));
    int err = MPI_Allreduce(MPI_IN_PLACE, params, (int)p->np, MPI_FLOAT, MPI_SUM, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (downpour final model)");
    if (p->ns) {
        if (p->server >= 0) memset(state, 0, p->ns * sizeof(float));
        else memcpy(state, dt_model_state(t->model), p->ns * sizeof(float));
        err = MPI_Allreduce(MPI_IN_PLACE, state, (int)p->ns, MPI_FLOAT, MPI_SUM, t->comm.comm);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (downpour final state)");
        const float inv = 1.0f / (float)p->W;
        for (size_t i = 0; i < p->ns; i++) state[i] *= inv;
    }
    return DT_OK;
}

/* ------------------------------------------------------------------ set-up */

static char **alloc_bufs(int n, size_t bytes) {
    char **b = calloc((size_t)n, sizeof *b);
    if (!b) return NULL;
    for (int i = 0; i < n; i++)
        if (!(b[i] = malloc(bytes))) return b; /* the caller checks the last one */
    return b;
}

static int bufs_ok(char **b, int n) { return b && (n == 0 || b[n - 1]); }

static void free_bufs(char **b, int n) {
    if (!b) return;
    for (int i = 0; i < n; i++) free(b[i]);
    free(b);
}

static dt_status dp_start(dt_strategy *s, dt_trainer *t) {
    dp_impl *p = s->impl;
    const int S = s->nservers, W = t->nworkers;
    p->S = S;
    p->W = W;
    p->np = dt_model_num_params(t->model);
    p->ns = dt_model_num_state(t->model);
    p->server = t->worker < 0 ? t->comm.rank : -1;
    p->timeout = s->opt->worker_timeout;
    p->deadline = 4 * p->timeout > 120 ? 4 * p->timeout : 120;
    p->last_reported = 0;
    p->lo = malloc((size_t)(S + 1) * sizeof *p->lo);
    if (!p->lo) return dt_fail(DT_ERR_NOMEM, "out of memory");
    for (int k = 0; k <= S; k++) p->lo[k] = (size_t)((unsigned long long)p->np * (unsigned long long)k / (unsigned long long)S);
    size_t biggest = 0, bigpay = 0;
    p->pbytes = malloc((size_t)S * sizeof *p->pbytes);
    if (!p->pbytes) return dt_fail(DT_ERR_NOMEM, "out of memory");
    const int zip = p->spec.kind != DT_CODEC_NONE;
    for (int k = 0; k < S; k++) {
        if (slice_n(p, k) > biggest) biggest = slice_n(p, k);
        p->pbytes[k] = zip ? dt_codec_bytes(&p->spec, slice_n(p, k)) : slice_n(p, k) * sizeof(float);
        if (p->pbytes[k] > bigpay) bigpay = p->pbytes[k];
    }
    if ((HDR + (biggest > p->ns ? biggest : p->ns) * sizeof(float)) > (size_t)2147483647 || HDR + bigpay > (size_t)2147483647)
        return dt_fail(DT_ERR_ARG, "downpour: a slice of %zu parameters is too large for one message (use more --servers)", biggest);
    if (zip) { /* scratch for the largest slice: encoding and decoding allocate nothing */
        dt_status st = dt_codec_create(&p->spec, biggest, &p->codec);
        if (st != DT_OK) return st;
    }
    if (p->server >= 0) {
        const size_t mine = slice_n(p, p->server), pay = pay_bytes(p, p->server);
        p->incap = HDR + (pay > p->ns * sizeof(float) ? pay : p->ns * sizeof(float));
        p->inbuf = malloc(p->incap);
        p->obuf = alloc_bufs(W, HDR + pay);
        p->oreq = malloc((size_t)W * sizeof *p->oreq);
        p->last_heard = calloc((size_t)W, sizeof(double));
        p->silent = calloc((size_t)W, sizeof(double));
        p->done = calloc((size_t)W, sizeof(int));
        p->wdropped = calloc((size_t)W, sizeof(int));
        p->wep = calloc((size_t)W, sizeof(int));
        p->pushes = calloc((size_t)W, sizeof(int64_t));
        p->wsteps = calloc((size_t)W, sizeof(int64_t));
        if (!p->inbuf || !bufs_ok(p->obuf, W) || !p->oreq || !p->last_heard || !p->silent || !p->done ||
            !p->wdropped || !p->wep || !p->pushes || !p->wsteps)
            return dt_fail(DT_ERR_NOMEM, "out of memory");
        for (int w = 0; w < W; w++) p->oreq[w] = MPI_REQUEST_NULL;
        if (p->codec) {
            p->scopy = malloc(((size_t)W * mine > 0 ? (size_t)W * mine : 1) * sizeof(float));
            p->grad = malloc((mine ? mine : 1) * sizeof(float));
            if (!p->scopy || !p->grad) return dt_fail(DT_ERR_NOMEM, "out of memory (compression buffers)");
        }
        p->reports = S == 1 && t->comm.rank == 0;
        if (p->reports) {
            const size_t E = (size_t)t->cfg->epochs + 1;
            p->e_loss = calloc(E * 4, sizeof(double));
            p->e_state = calloc(E * (p->ns ? p->ns : 1), sizeof(float));
            if (!p->e_loss || !p->e_state) return dt_fail(DT_ERR_NOMEM, "out of memory");
            p->e_seen = p->e_loss + E;
            p->e_correct = p->e_loss + 2 * E;
            p->e_n = p->e_loss + 3 * E;
        }
    } else {
        p->rbuf = calloc((size_t)S, sizeof *p->rbuf);
        p->sbuf = calloc((size_t)S, sizeof *p->sbuf);
        if (!p->rbuf || !p->sbuf) return dt_fail(DT_ERR_NOMEM, "out of memory");
        for (int k = 0; k < S; k++) {
            p->rbuf[k] = malloc(HDR + pay_bytes(p, k));
            p->sbuf[k] = malloc(HDR + pay_bytes(p, k));
            if (!p->rbuf[k] || !p->sbuf[k]) return dt_fail(DT_ERR_NOMEM, "out of memory");
        }
        p->req = malloc((size_t)(2 * S) * sizeof *p->req);
        p->sts = malloc((size_t)(2 * S) * sizeof *p->sts);
        p->version = calloc((size_t)S, sizeof *p->version);
        p->ebuf = malloc(HDR + p->ns * sizeof(float));
        if (s->opt->push_every > 1) p->accum = calloc(p->np, sizeof(float));
        if (!p->req || !p->sts || !p->version || !p->ebuf || (s->opt->push_every > 1 && !p->accum))
            return dt_fail(DT_ERR_NOMEM, "out of memory");
        for (int i = 0; i < 2 * S; i++) p->req[i] = MPI_REQUEST_NULL;
        if (p->codec) {
            const size_t n1 = p->np ? p->np : 1;
            p->residual = calloc(n1, sizeof(float));
            if (s->opt->fetch_every > 1) p->wcopy = malloc(n1 * sizeof(float));
            if (!p->residual || (s->opt->fetch_every > 1 && !p->wcopy))
                return dt_fail(DT_ERR_NOMEM, "out of memory (compression buffers)");
        }
    }
    if (!p->codec) return DT_OK;
    /* set-up, not counted: every copy of server k's slice starts equal to server k's */
    float *x = dt_model_params(t->model);
    for (int k = 0; k < S; k++) {
        dt_status st = dt_bcast_setup(&t->comm, x + p->lo[k], slice_n(p, k), k, "MPI_Bcast (downpour starting weights)");
        if (st != DT_OK) return st;
    }
    if (p->server >= 0) {
        const size_t n = slice_n(p, p->server);
        for (int w = 0; w < W; w++) memcpy(p->scopy + (size_t)w * n, x + p->lo[p->server], n * sizeof(float));
    } else if (p->wcopy) {
        memcpy(p->wcopy, x, p->np * sizeof(float));
    }
    return DT_OK;
}

static void dp_destroy(dt_strategy *s) {
    dp_impl *p = s->impl;
    if (!p) return;
    free(p->lo);
    if (p->rbuf) free_bufs(p->rbuf, p->S);
    if (p->sbuf) free_bufs(p->sbuf, p->S);
    free(p->req); free(p->sts); free(p->accum); free(p->version); free(p->ebuf);
    free(p->inbuf);
    free_bufs(p->obuf, p->W);
    free(p->oreq); free(p->last_heard); free(p->silent); free(p->done); free(p->wdropped); free(p->wep);
    free(p->pushes); free(p->wsteps); free(p->e_loss); free(p->e_state);
    dt_codec_free(p->codec);
    free(p->pbytes); free(p->residual); free(p->wcopy); free(p->scopy); free(p->grad);
    free(p);
}

dt_status dt_downpour_create(dt_strategy *s) {
    dp_impl *p = calloc(1, sizeof *p);
    if (!p) return dt_fail(DT_ERR_NOMEM, "out of memory");
    s->impl = p;
    s->nservers = s->opt->servers > 1 ? s->opt->servers : 1;
    dt_status st = dt_codec_parse(s->opt->compress, &p->spec); /* the codec is made at start */
    if (st != DT_OK) return st;
    s->start = dp_start;
    s->serve = dp_serve;
    s->begin_step = dp_begin_step;
    s->optimizer_step = dp_optimizer_step;
    s->end_epoch = dp_end_epoch;
    s->finish = dp_finish;
    s->model_for_eval = dp_model_for_eval;
    s->destroy = dp_destroy;
    return DT_OK;
}
