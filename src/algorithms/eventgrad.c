/* eventgrad: event-triggered decentralized SGD (shared/spec/algorithms.md).
 * Each step, after the local gradient at x(k): every tensor whose norm moved by at least its
 * threshold since it was last sent is written into every neighbour's window (one-sided,
 * src/comm/window.c: the receiver takes no part); then the rank mixes its parameters with
 * the last values it received from each neighbour, x <- W (x + sum_j xhat_j) with
 * W = 1/(deg+1), and the trainer applies the local gradient step.
 * Thresholds: const:C, or adaptive: on each send slope = |n - n_last| / (k - k_last) and
 * delta = horizon x mean of the last `history` slopes; delta *= decay at every silent step.
 * --sync makes it lock-step: two rounds of control messages per step ("my step-k writes are
 * complete, up to these sequence numbers", "I have read step k") so every rank mixes exactly
 * its neighbours' step-k values; without --sync nobody waits. Control messages are not counted
 * as payload.
 * --compress (with --sync only; dpsgd always is): parameter payloads against copies. The rank
 * keeps cself, the copy of its parameters that all its neighbours hold (a triggered tensor
 * goes to every neighbour, so one copy serves them all), sends encode(x[t] - cself[t]) and
 * adds the decoded change to cself; each neighbour adds the same decoded change to its xhat.
 * A one-sided slot keeps only the newest write, so every write must be read exactly once:
 * lock-step guarantees it (checked at each read). */
#include "algorithms/eventgrad.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/topology.h"
#include "comm/window.h"
#include "core/tensorfile.h"
#include "trainer/trainer.h"

enum { TAG_READY = 7101, TAG_READ = 7102, TAG_INIT = 7103 };

typedef struct {
    int sync, adaptive;
    float c_const;
    int nn, *nbrs;
    dt_win *win;
    int T;
    size_t *off, *len, np;
    float *xhat;        /* nn x np: last value received from each neighbour */
    double *n_last, *delta, *slopes;
    long *k_last;
    int *nslopes;
    float W;
    MPI_Request *req;
    MPI_Status *statuses;
    int *send_list;     /* tensors triggered this step */
    uint64_t *seq_out, *seq_in; /* lock-step: nn x T sequence numbers sent / to expect */
    /* this epoch's transport figures */
    uint64_t sent_epoch, *fresh_epoch, overwritten_mark;
    /* --compress (NULL codec: none, the plain float window) */
    dt_codec_spec spec;
    dt_codec *codec;
    float *cself;       /* np: the copy of x every neighbour holds */
    unsigned char *enc; /* per tensor ebytes[t] at eoff[t]: this step's encoded change */
    size_t *eoff, *ebytes;
    const void **send_src; /* T: this step's payloads, in send_list order */
    size_t *send_bytes;
    unsigned char *rbuf;   /* max ebytes: a payload read from the window */
    int *graph;            /* checkpoints: --history, neighbour count, neighbours (another
                            * --topology or --history would misread the saved state) */
} eg_impl;

static void eg_destroy(dt_strategy *s) {
    eg_impl *e = s->impl;
    if (!e) return;
    free(e->nbrs); free(e->off); free(e->len); free(e->xhat); free(e->n_last); free(e->delta);
    free(e->slopes); free(e->k_last); free(e->nslopes); free(e->req); free(e->statuses); free(e->fresh_epoch);
    free(e->send_list); free(e->seq_out); free(e->seq_in);
    dt_codec_free(e->codec);
    free(e->cself); free(e->enc); free(e->eoff); free(e->ebytes); free(e->send_src); free(e->send_bytes);
    free(e->rbuf);
    free(e->graph);
    free(e);
}

/* --compress: codec, copies and buffers, a byte window with each tensor's encoded size as its
 * capacity, and the starting copies: cself = x, xhat_j = neighbour j's x (exchanged once, not
 * counted; equal to x from the common seed unless the ranks resumed from their own
 * checkpoints). */
static dt_status start_compressed(eg_impl *e, dt_comm *c, const float *x) {
    size_t maxlen = 0, total = 0, maxb = 0;
    for (int i = 0; i < e->T; i++) if (e->len[i] > maxlen) maxlen = e->len[i];
    e->eoff = malloc((size_t)e->T * sizeof *e->eoff);
    e->ebytes = malloc((size_t)e->T * sizeof *e->ebytes);
    e->send_src = malloc((size_t)e->T * sizeof *e->send_src);
    e->send_bytes = malloc((size_t)e->T * sizeof *e->send_bytes);
    e->cself = malloc((e->np ? e->np : 1) * sizeof *e->cself);
    if (!e->eoff || !e->ebytes || !e->send_src || !e->send_bytes || !e->cself)
        return dt_fail(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < e->T; i++) {
        e->eoff[i] = total;
        e->ebytes[i] = dt_codec_bytes(&e->spec, e->len[i]);
        total += e->ebytes[i];
        if (e->ebytes[i] > maxb) maxb = e->ebytes[i];
    }
    e->enc = malloc(total ? total : 1);
    e->rbuf = malloc(maxb ? maxb : 1);
    if (!e->enc || !e->rbuf) return dt_fail(DT_ERR_NOMEM, "out of memory for %zu bytes of encoded payloads", total + maxb);
    dt_status st = dt_codec_create(&e->spec, maxlen, &e->codec);
    if (st != DT_OK) return st;
    memcpy(e->cself, x, e->np * sizeof(float));
    if ((st = dt_win_create_bytes(c, e->nbrs, e->nn, e->ebytes, e->T, &e->win)) != DT_OK) return st;
    double t0 = dt_now();
    int err = MPI_SUCCESS;
    for (int k = 0; k < e->nn && err == MPI_SUCCESS; k++) {
        err = MPI_Irecv(e->xhat + (size_t)k * e->np, (int)e->np, MPI_FLOAT, e->nbrs[k], TAG_INIT, c->comm, &e->req[k]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(x, (int)e->np, MPI_FLOAT, e->nbrs[k], TAG_INIT, c->comm, &e->req[e->nn + k]);
    }
    if (err == MPI_SUCCESS) err = MPI_Waitall(2 * e->nn, e->req, e->statuses);
    c->c.t_comm += dt_now() - t0;
    return dt_mpi_check(err, "eventgrad --compress: exchanging the starting parameters");
}

static dt_status eg_start(dt_strategy *s, dt_trainer *t) {
    eg_impl *e = s->impl;
    const dt_algo_options *o = s->opt;
    dt_comm *c = &t->comm;
    int n = 0;
    dt_status st = dt_topology_neighbors(o->topology ? o->topology : "ring", c->rank, c->size, NULL, 0, &n);
    if (st != DT_OK && !dt_topology_known(o->topology ? o->topology : "ring")) return st;
    e->nbrs = malloc((size_t)(n ? n : 1) * sizeof *e->nbrs);
    if (!e->nbrs) return dt_fail(DT_ERR_NOMEM, "out of memory");
    if ((st = dt_topology_neighbors(o->topology ? o->topology : "ring", c->rank, c->size, e->nbrs, n, &e->nn)) != DT_OK) return st;
    e->W = 1.0f / (float)(e->nn + 1);
    if (!(e->graph = malloc((size_t)(2 + e->nn) * sizeof *e->graph))) return dt_fail(DT_ERR_NOMEM, "out of memory");
    e->graph[0] = o->history > 0 ? o->history : 1;
    e->graph[1] = e->nn;
    memcpy(e->graph + 2, e->nbrs, (size_t)e->nn * sizeof *e->graph);
    dt_model *m = t->model;
    e->T = dt_model_num_tensors(m);
    e->np = dt_model_num_params(m);
    e->off = malloc((size_t)e->T * sizeof *e->off);
    e->len = malloc((size_t)e->T * sizeof *e->len);
    e->n_last = calloc((size_t)e->T, sizeof *e->n_last);
    e->delta = calloc((size_t)e->T, sizeof *e->delta);
    e->k_last = calloc((size_t)e->T, sizeof *e->k_last);
    e->nslopes = calloc((size_t)e->T, sizeof *e->nslopes);
    e->slopes = calloc((size_t)e->T * (size_t)(o->history > 0 ? o->history : 1), sizeof *e->slopes);
    e->xhat = malloc((size_t)(e->nn ? e->nn : 1) * e->np * sizeof(float));
    e->req = malloc(2 * (size_t)(e->nn ? e->nn : 1) * sizeof *e->req);
    e->statuses = malloc(2 * (size_t)(e->nn ? e->nn : 1) * sizeof *e->statuses);
    e->send_list = malloc((size_t)e->T * sizeof *e->send_list);
    e->seq_out = calloc((size_t)(e->nn ? e->nn : 1) * (size_t)e->T, sizeof *e->seq_out);
    e->seq_in = calloc((size_t)(e->nn ? e->nn : 1) * (size_t)e->T, sizeof *e->seq_in);
    if (!e->send_list || !e->seq_out || !e->seq_in) return dt_fail(DT_ERR_NOMEM, "out of memory");
    e->fresh_epoch = calloc((size_t)(e->nn ? e->nn : 1), sizeof *e->fresh_epoch);
    if (!e->statuses || !e->off || !e->len || !e->n_last || !e->delta || !e->k_last || !e->nslopes || !e->slopes || !e->xhat ||
        !e->req || !e->fresh_epoch)
        return dt_fail(DT_ERR_NOMEM, "out of memory for %d neighbour copies of %zu parameters", e->nn, e->np);
    for (int i = 0; i < e->T; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        e->off[i] = v->offset;
        e->len[i] = v->numel;
        e->k_last[i] = -1; /* never sent */
        e->delta[i] = e->adaptive ? 0.0 : e->c_const;
    }
    /* every rank starts from the same weights, so that is what each neighbour holds */
    for (int k = 0; k < e->nn; k++) memcpy(e->xhat + (size_t)k * e->np, dt_model_params(m), e->np * sizeof(float));
    if (e->spec.kind == DT_CODEC_NONE)
        return dt_win_create(c, e->nbrs, e->nn, e->np, e->off, e->len, e->T, &e->win);
    return start_compressed(e, c, dt_model_params(m));
}

/* Lock-step control messages to and from every neighbour: with out/in (T sequence numbers
 * per neighbour: "my writes to you up to these have completed") or empty ("I have read"). */
static dt_status exchange_tokens(eg_impl *e, dt_comm *c, int tag, const uint64_t *out, uint64_t *in) {
    static char token;
    double t0 = dt_now();
    const int cnt = out ? e->T : 0;
    for (int k = 0; k < e->nn; k++) {
        MPI_Irecv(in ? (void *)(in + (size_t)k * e->T) : &token, cnt, MPI_UINT64_T, e->nbrs[k], tag, c->comm, &e->req[k]);
        MPI_Isend(out ? (const void *)(out + (size_t)k * e->T) : &token, cnt, MPI_UINT64_T, e->nbrs[k], tag, c->comm,
                  &e->req[e->nn + k]);
    }
    int err = MPI_Waitall(2 * e->nn, e->req, e->statuses);
    c->c.t_comm += dt_now() - t0;
    return dt_mpi_check(err, "MPI_Waitall (eventgrad lock-step tokens)");
}

static double tensor_norm(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

/* The sender rule for tensor i at step k: send, and update the threshold state? */
static int should_send(dt_strategy *s, eg_impl *e, int i, long k, double n) {
    const dt_algo_options *o = s->opt;
    if (e->k_last[i] < 0 || k < o->warmup_steps) return 1;
    return fabs(n - e->n_last[i]) >= e->delta[i];
}

static void after_send(dt_strategy *s, eg_impl *e, int i, long k, double n) {
    const dt_algo_options *o = s->opt;
    if (e->adaptive && e->k_last[i] >= 0 && k > e->k_last[i]) {
        const int h = o->history > 0 ? o->history : 1;
        double *sl = e->slopes + (size_t)i * h;
        sl[e->nslopes[i] % h] = fabs(n - e->n_last[i]) / (double)(k - e->k_last[i]);
        e->nslopes[i]++;
        int cnt = e->nslopes[i] < h ? e->nslopes[i] : h;
        double mean = 0;
        for (int j = 0; j < cnt; j++) mean += sl[j];
        e->delta[i] = o->horizon * mean / cnt;
    } else if (!e->adaptive) {
        e->delta[i] = e->c_const;
    }
    e->n_last[i] = n;
    e->k_last[i] = k;
}

/* Reads tensor i of neighbour j into xhat: the floats themselves, or with --compress the
 * encoded change, added to xhat; a change can only be applied if no write was missed. */
static dt_status read_slot(eg_impl *e, dt_comm *c, int j, int i, int *fresh) {
    float *dst = e->xhat + (size_t)j * e->np + e->off[i];
    if (!e->codec) return dt_win_read(e->win, j, i, dst, NULL, fresh);
    const uint64_t before = dt_win_read_seq(e->win, j, i);
    uint64_t seq = 0;
    dt_status st = dt_win_read_bytes(e->win, j, i, e->rbuf, e->ebytes[i], &seq, fresh);
    if (st != DT_OK || !*fresh) return st;
    if (seq != before + 1)
        return dt_fail(DT_ERR_STATE, "eventgrad --compress: writes %llu..%llu of tensor %d from rank %d were "
                       "overwritten before they were read: the copies would diverge",
                       (unsigned long long)before + 1, (unsigned long long)seq - 1, i, e->nbrs[j]);
    double t0 = dt_now();
    dt_codec_decode_add(e->codec, e->rbuf, e->len[i], dst);
    c->c.t_comm += dt_now() - t0;
    return DT_OK;
}

/* Lock-step: MPICH may apply a completed put only when this rank next calls into MPI, so
 * read each tensor until the sequence number the neighbour announced has arrived. */
static dt_status read_expected(eg_impl *e, dt_comm *c) {
    const double deadline = dt_now() + 120.0;
    for (int j = 0; j < e->nn; j++)
        for (int i = 0; i < e->T; i++) {
            const uint64_t want = e->seq_in[(size_t)j * e->T + i];
            while (dt_win_read_seq(e->win, j, i) < want) {
                int fresh = 0;
                dt_status st = read_slot(e, c, j, i, &fresh);
                if (st != DT_OK) return st;
                e->fresh_epoch[j] += (uint64_t)fresh;
                if (!fresh) {
                    if ((st = dt_win_progress(e->win)) != DT_OK) return st;
                    if (dt_now() > deadline)
                        return dt_fail(DT_ERR_MPI, "eventgrad: write %llu of tensor %d announced by rank %d did "
                                       "not arrive within 120 s (slot header at %llu, last read %llu)",
                                       (unsigned long long)want, i, e->nbrs[j],
                                       (unsigned long long)dt_win_slot_seq(e->win, j, i),
                                       (unsigned long long)dt_win_read_seq(e->win, j, i));
                }
            }
        }
    return DT_OK;
}

static dt_status eg_after_backward(dt_strategy *s, dt_trainer *t) {
    eg_impl *e = s->impl;
    dt_comm *c = &t->comm;
    float *x = dt_model_params(t->model);
    const long k = t->step;
    const float decay = s->opt->threshold_decay > 0 ? s->opt->threshold_decay : 1.0f;
    dt_status st = DT_OK;
    int nsend = 0;
    for (int i = 0; i < e->T; i++) {
        double n = tensor_norm(x + e->off[i], e->len[i]);
        if (should_send(s, e, i, k, n)) {
            e->send_list[nsend++] = i;
            after_send(s, e, i, k, n);
        } else {
            e->delta[i] *= decay;
        }
    }
    c->c.baseline_msgs += (uint64_t)e->nn * (uint64_t)e->T;
    e->sent_epoch += (uint64_t)e->nn * (uint64_t)nsend;
    /* all triggered tensors to all neighbours: one flush round per step */
    if (!e->codec) {
        if ((st = dt_win_put_tensors(e->win, e->send_list, nsend, x)) != DT_OK) return st;
    } else {
        /* the change against the copy every neighbour holds, encoded; cself += decode */
        double t0 = dt_now();
        for (int q = 0; q < nsend; q++) {
            const int i = e->send_list[q];
            unsigned char *buf = e->enc + e->eoff[i];
            e->send_bytes[q] = dt_codec_encode_delta(e->codec, x + e->off[i], e->cself + e->off[i], e->len[i], buf);
            e->send_src[q] = buf;
        }
        c->c.t_comm += dt_now() - t0;
        if ((st = dt_win_put_tensors_bytes(e->win, e->send_list, nsend, e->send_src, e->send_bytes)) != DT_OK) return st;
    }
    if (e->sync) {
        for (int j = 0; j < e->nn; j++)
            for (int i = 0; i < e->T; i++) e->seq_out[(size_t)j * e->T + i] = dt_win_sent_seq(e->win, j, i);
        if ((st = exchange_tokens(e, c, TAG_READY, e->seq_out, e->seq_in)) != DT_OK) return st;
        if ((st = read_expected(e, c)) != DT_OK) return st;
        if ((st = exchange_tokens(e, c, TAG_READ, NULL, NULL)) != DT_OK) return st;
    } else {
        if ((st = dt_win_progress(e->win)) != DT_OK) return st;
        for (int j = 0; j < e->nn; j++)
            for (int i = 0; i < e->T; i++) {
                int fresh = 0;
                if ((st = read_slot(e, c, j, i, &fresh)) != DT_OK) return st;
                e->fresh_epoch[j] += (uint64_t)fresh;
            }
    }
    /* x(k+1) before the gradient step: W (x + sum_j xhat_j) */
    for (size_t p = 0; p < e->np; p++) {
        float sum = x[p];
        for (int j = 0; j < e->nn; j++) sum += e->xhat[(size_t)j * e->np + p];
        x[p] = e->W * sum;
    }
    return DT_OK;
}

/* Per rank and epoch: tensors sent, fresh arrivals from each neighbour, overwritten ones; and
 * the starvation check: a neighbour that sent this epoch but of which nothing arrived. */
static dt_status eg_end_epoch(dt_strategy *s, dt_trainer *t) {
    eg_impl *e = s->impl;
    dt_comm *c = &t->comm;
    const int N = c->size, W = 3 + N;
    double *row = calloc((size_t)W, sizeof *row), *all = c->rank == 0 ? calloc((size_t)W * N, sizeof *all) : NULL;
    if (!row || (c->rank == 0 && !all)) { free(row); free(all); return dt_fail(DT_ERR_NOMEM, "out of memory"); }
    row[0] = (double)e->sent_epoch;
    row[1] = (double)(c->c.overwritten - e->overwritten_mark);
    row[2] = (double)e->nn;
    for (int j = 0; j < e->nn; j++) row[3 + e->nbrs[j]] = (double)e->fresh_epoch[j] + 0.5; /* +0.5: "is a neighbour" */
    MPI_Gather(row, W, MPI_DOUBLE, all, W, MPI_DOUBLE, 0, c->comm);
    dt_status st = DT_OK;
    if (c->rank == 0) {
        size_t cap = 256 + (size_t)N * (80 + 24 * (size_t)N), o = 0;
        char *line = malloc(cap);
        int starved = 0;
        if (!line) st = dt_fail(DT_ERR_NOMEM, "out of memory");
        else {
            o += (size_t)snprintf(line, cap, "{\"type\":\"transport\",\"epoch\":%d,\"ranks\":[", t->epoch + 1);
            for (int r = 0; r < N; r++) {
                const double *q = all + (size_t)r * W;
                o += (size_t)snprintf(line + o, cap - o, "%s{\"rank\":%d,\"sent\":%.0f,\"overwritten\":%.0f,\"fresh_from\":{",
                                      r ? "," : "", r, q[0], q[1]);
                int first = 1;
                for (int j = 0; j < N; j++) {
                    if (q[3 + j] == 0) continue; /* not a neighbour */
                    double fresh = q[3 + j] - 0.5;
                    if (all[(size_t)j * W] > 0 && fresh == 0) starved++;
                    o += (size_t)snprintf(line + o, cap - o, "%s\"%d\":%.0f", first ? "" : ",", j, fresh);
                    first = 0;
                }
                o += (size_t)snprintf(line + o, cap - o, "}}");
            }
            snprintf(line + o, cap - o, "],\"starved_pairs\":%d}", starved);
            st = dt_trainer_log(t, line);
            if (starved && !t->cfg->quiet)
                printf("warning: epoch %d: %d (rank, neighbour) pairs received nothing although the neighbour sent\n",
                       t->epoch + 1, starved);
            free(line);
        }
    }
    free(row);
    free(all);
    e->sent_epoch = 0;
    memset(e->fresh_epoch, 0, (size_t)(e->nn ? e->nn : 1) * sizeof *e->fresh_epoch);
    e->overwritten_mark = c->c.overwritten;
    return st;
}

/* Drain: every neighbour announces how many writes it made to this rank, per tensor, and
 * this rank reads until all of them have arrived, so every put ends up read or counted as
 * overwritten. Waiting for announced numbers, not a barrier: this MPICH can show a write's
 * header before its data even after the writer's flush returned (docs/transport.md). */
static dt_status eg_finish(dt_strategy *s, dt_trainer *t) {
    eg_impl *e = s->impl;
    dt_comm *c = &t->comm;
    for (int j = 0; j < e->nn; j++)
        for (int i = 0; i < e->T; i++) e->seq_out[(size_t)j * e->T + i] = dt_win_sent_seq(e->win, j, i);
    dt_status st = exchange_tokens(e, c, TAG_READY, e->seq_out, e->seq_in);
    if (st == DT_OK) st = read_expected(e, c);
    /* nobody frees (collective) while a neighbour still reads */
    dt_status st2 = dt_win_free(&e->win);
    return st != DT_OK ? st : st2;
}

/* Checkpoints: the sender rule's state per tensor, the neighbours' values this rank holds
 * and (--compress) the copy of its own they hold. Taken at an epoch's end; with --sync every
 * write has been read by then, so a resumed run repeats the uninterrupted one (the windows
 * start afresh on both sides, their sequence numbers with them). */
typedef struct { const char *name; void *p; size_t bytes; } eg_field;

static int eg_fields(const eg_impl *e, const dt_algo_options *o, eg_field *f) {
    const size_t T = (size_t)e->T, h = (size_t)(o->history > 0 ? o->history : 1);
    int n = 0;
    f[n++] = (eg_field){"eventgrad:norm_last", e->n_last, T * sizeof *e->n_last};
    f[n++] = (eg_field){"eventgrad:threshold", e->delta, T * sizeof *e->delta};
    f[n++] = (eg_field){"eventgrad:slopes", e->slopes, T * h * sizeof *e->slopes};
    f[n++] = (eg_field){"eventgrad:step_last", e->k_last, T * sizeof *e->k_last};
    f[n++] = (eg_field){"eventgrad:nslopes", e->nslopes, T * sizeof *e->nslopes};
    f[n++] = (eg_field){"eventgrad:neighbours", e->xhat, (size_t)e->nn * e->np * sizeof(float)};
    if (e->codec) f[n++] = (eg_field){"eventgrad:own_copy", e->cself, e->np * sizeof(float)};
    return n;
}

static dt_status eg_save(dt_strategy *s, dt_trainer *t, dt_records *out) {
    eg_impl *e = s->impl;
    (void)t;
    eg_field f[8];
    const int n = eg_fields(e, s->opt, f);
    dt_status st = dt_records_add_raw(out, "eventgrad:graph", e->graph, (size_t)(2 + e->nn) * sizeof(int));
    for (int i = 0; i < n && st == DT_OK; i++) st = dt_records_add_raw(out, f[i].name, f[i].p, f[i].bytes);
    return st;
}

static dt_status eg_load(dt_strategy *s, dt_trainer *t, const dt_tfile *tf, const char *path) {
    eg_impl *e = s->impl;
    const dt_record *r = dt_tfile_find(tf, "eventgrad:graph");
    if (!r || r->numel != (size_t)(2 + e->nn) || memcmp(r->data, e->graph, (size_t)(2 + e->nn) * sizeof(int)) != 0)
        return dt_fail(DT_ERR_ARG, "--resume %s: saved with another --topology or --history (this rank's neighbours "
                       "or the slopes kept differ)", path);
    eg_field f[8];
    const int n = eg_fields(e, s->opt, f);
    dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) st = dt_tfile_take(tf, path, f[i].name, f[i].p, f[i].bytes);
    e->overwritten_mark = t->comm.c.overwritten; /* the counters were restored first */
    return st;
}

static void eg_abandon(dt_strategy *s, dt_trainer *t) {
    eg_impl *e = s->impl;
    (void)t;
    dt_win_free(&e->win);
}

dt_status dt_eventgrad_setup(dt_strategy *s, int sync, const char *threshold) {
    eg_impl *e = calloc(1, sizeof *e);
    if (!e) return dt_fail(DT_ERR_NOMEM, "out of memory");
    e->sync = sync;
    char tail;
    if (!strcmp(threshold, "adaptive")) e->adaptive = 1;
    else if (sscanf(threshold, "const:%f%c", &e->c_const, &tail) != 1 || !(e->c_const >= 0)) {
        free(e);
        return dt_fail(DT_ERR_ARG, "--threshold %s: expected adaptive or const:C with C >= 0", threshold);
    }
    dt_status cs = dt_codec_parse(s->opt->compress, &e->spec);
    if (cs != DT_OK) { free(e); return cs; }
    if (e->spec.kind != DT_CODEC_NONE && !sync) {
        free(e);
        return dt_fail(DT_ERR_ARG, "--compress %s: eventgrad needs --sync (a one-sided slot keeps only the newest "
                       "write, so a change could be overwritten before it is read)", s->opt->compress);
    }
    if (!dt_topology_known(s->opt->topology ? s->opt->topology : "ring")) {
        free(e);
        return dt_fail(DT_ERR_ARG, "--topology %s: expected ring, torus, exponential or complete", s->opt->topology);
    }
    s->impl = e;
    s->decentralized = 1;
    s->start = eg_start;
    s->after_backward = eg_after_backward;
    s->end_epoch = eg_end_epoch;
    s->finish = eg_finish;
    s->save_state = eg_save;
    s->load_state = eg_load;
    s->abandon = eg_abandon;
    s->destroy = eg_destroy;
    return DT_OK;
}

dt_status dt_eventgrad_create(dt_strategy *s) {
    return dt_eventgrad_setup(s, s->opt->sync, s->opt->threshold ? s->opt->threshold : "adaptive");
}
