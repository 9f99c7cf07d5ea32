/* Gossip with graph neighbours through one-sided windows (see gossip.h). */
#include "algorithms/gossip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/topology.h"
#include "comm/watch.h"
#include "comm/window.h"

enum { TAG_READY = 7101, TAG_READ = 7102, TAG_INIT = 7103 };

struct dt_gossip {
    int nn, *nbrs;
    float W;               /* 1 / (deg + 1) */
    dt_win *win;
    int T;
    size_t *off, *len, np;
    float *xhat;           /* nn x np: the last value received from each neighbour */
    MPI_Request *req;      /* 2 nn */
    MPI_Status *statuses;
    uint64_t *seq_out, *seq_in; /* lock-step: nn x T sequence numbers sent / to expect */
    uint64_t sent_epoch, *fresh_epoch, overwritten_mark, coalesced_mark; /* this epoch's transport figures */
    /* --compress (NULL codec: the plain float window) */
    dt_codec *codec;
    float *cself;          /* np: the copy of x every neighbour holds */
    unsigned char *enc;    /* per tensor ebytes[t] at eoff[t]: this step's encoded change */
    size_t *eoff, *ebytes;
    const void **send_src; /* this step's payloads, in send order */
    size_t *send_bytes;
    unsigned char *rbuf;   /* max ebytes: a payload read from the window */
    int *graph;            /* the saved graph record (records keep pointers until written) */
    unsigned char *fresh_t; /* T: a neighbour's tensor t arrived since it was last mixed */
};

void dt_gossip_free(dt_gossip *g) {
    if (!g) return;
    free(g->nbrs); free(g->off); free(g->len); free(g->xhat); free(g->req); free(g->statuses);
    free(g->seq_out); free(g->seq_in); free(g->fresh_epoch);
    dt_codec_free(g->codec);
    free(g->cself); free(g->enc); free(g->eoff); free(g->ebytes); free(g->send_src); free(g->send_bytes);
    free(g->rbuf);
    free(g->graph);
    free(g->fresh_t);
    free(g);
}

/* --compress: codec, copies and buffers, a byte window with each tensor's encoded size as its
 * capacity, and the starting copies: cself = x, xhat_j = neighbour j's x (exchanged once, not
 * counted; equal to x from the common seed unless the ranks resumed from their own
 * checkpoints). */
static dt_status start_compressed(dt_gossip *g, const dt_codec_spec *spec, dt_comm *c, const float *x) {
    size_t maxlen = 0, total = 0, maxb = 0;
    for (int i = 0; i < g->T; i++) if (g->len[i] > maxlen) maxlen = g->len[i];
    g->eoff = malloc((size_t)g->T * sizeof *g->eoff);
    g->ebytes = malloc((size_t)g->T * sizeof *g->ebytes);
    g->send_src = malloc((size_t)g->T * sizeof *g->send_src);
    g->send_bytes = malloc((size_t)g->T * sizeof *g->send_bytes);
    g->cself = malloc((g->np ? g->np : 1) * sizeof *g->cself);
    if (!g->eoff || !g->ebytes || !g->send_src || !g->send_bytes || !g->cself)
        return dt_fail(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->T; i++) {
        g->eoff[i] = total;
        g->ebytes[i] = dt_codec_bytes(spec, g->len[i]);
        total += g->ebytes[i];
        if (g->ebytes[i] > maxb) maxb = g->ebytes[i];
    }
    g->enc = malloc(total ? total : 1);
    g->rbuf = malloc(maxb ? maxb : 1);
    if (!g->enc || !g->rbuf) return dt_fail(DT_ERR_NOMEM, "out of memory for %zu bytes of encoded payloads", total + maxb);
    dt_status st = dt_codec_create(spec, maxlen, &g->codec);
    if (st != DT_OK) return st;
    memcpy(g->cself, x, g->np * sizeof(float));
    if ((st = dt_win_create_bytes(c, g->nbrs, g->nn, g->ebytes, g->T, &g->win)) != DT_OK) return st;
    double t0 = dt_now();
    int err = MPI_SUCCESS;
    for (int k = 0; k < g->nn && err == MPI_SUCCESS; k++) {
        err = MPI_Irecv(g->xhat + (size_t)k * g->np, (int)g->np, MPI_FLOAT, g->nbrs[k], TAG_INIT, c->comm, &g->req[k]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(x, (int)g->np, MPI_FLOAT, g->nbrs[k], TAG_INIT, c->comm, &g->req[g->nn + k]);
    }
    if (err == MPI_SUCCESS) err = MPI_Waitall(2 * g->nn, g->req, g->statuses);
    c->c.t_comm += dt_now() - t0;
    return dt_mpi_check(err, "gossip --compress: exchanging the starting parameters");
}

static dt_status gossip_create(dt_step_ctx *ctx, const char *topology, const dt_codec_spec *spec, dt_gossip *g) {
    dt_comm *c = ctx->comm;
    int n = 0;
    dt_status st = dt_topology_neighbors(topology, c->rank, c->size, NULL, 0, &n);
    if (st != DT_OK && !dt_topology_known(topology)) return st;
    if (!(g->nbrs = malloc((size_t)(n ? n : 1) * sizeof *g->nbrs))) return dt_fail(DT_ERR_NOMEM, "out of memory");
    if ((st = dt_topology_neighbors(topology, c->rank, c->size, g->nbrs, n, &g->nn)) != DT_OK) return st;
    g->W = 1.0f / (float)(g->nn + 1);
    dt_model *m = ctx->model;
    g->T = dt_model_num_tensors(m);
    g->np = dt_model_num_params(m);
    const size_t nn1 = (size_t)(g->nn ? g->nn : 1);
    g->off = malloc((size_t)g->T * sizeof *g->off);
    g->len = malloc((size_t)g->T * sizeof *g->len);
    g->xhat = malloc(nn1 * g->np * sizeof(float));
    g->req = malloc(2 * nn1 * sizeof *g->req);
    g->statuses = malloc(2 * nn1 * sizeof *g->statuses);
    g->seq_out = calloc(nn1 * (size_t)g->T, sizeof *g->seq_out);
    g->seq_in = calloc(nn1 * (size_t)g->T, sizeof *g->seq_in);
    g->fresh_epoch = calloc(nn1, sizeof *g->fresh_epoch);
    g->fresh_t = calloc((size_t)g->T, 1);
    if (!g->off || !g->len || !g->xhat || !g->req || !g->statuses || !g->seq_out || !g->seq_in || !g->fresh_epoch ||
        !g->fresh_t)
        return dt_fail(DT_ERR_NOMEM, "out of memory for %d neighbour copies of %zu parameters", g->nn, g->np);
    for (int i = 0; i < g->T; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        g->off[i] = v->offset;
        g->len[i] = v->numel;
    }
    /* every rank starts from the same weights, so that is what each neighbour holds */
    const float *x = dt_model_params(m);
    for (int k = 0; k < g->nn; k++) memcpy(g->xhat + (size_t)k * g->np, x, g->np * sizeof(float));
    g->overwritten_mark = c->c.overwritten;
    if (spec->kind == DT_CODEC_NONE) return dt_win_create(c, g->nbrs, g->nn, g->np, g->off, g->len, g->T, &g->win);
    return start_compressed(g, spec, c, x);
}

dt_status dt_gossip_create(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec, dt_gossip **out) {
    *out = NULL;
    dt_gossip *g = calloc(1, sizeof *g);
    if (!g) return dt_fail(DT_ERR_NOMEM, "out of memory");
    /* returned even on failure: what start made with every rank is freed with every rank */
    *out = g;
    return gossip_create(c, topology, spec, g);
}

dt_status dt_gossip_send(dt_gossip *g, dt_comm *c, const int *ts, int n, const float *x) {
    c->c.baseline_msgs += (uint64_t)g->nn * (uint64_t)g->T;
    g->sent_epoch += (uint64_t)g->nn * (uint64_t)n;
    if (!g->codec) return dt_win_put_tensors(g->win, ts, n, x);
    /* the change against the copy every neighbour holds, encoded; cself += decode */
    double t0 = dt_now();
    for (int q = 0; q < n; q++) {
        const int i = ts[q];
        unsigned char *buf = g->enc + g->eoff[i];
        g->send_bytes[q] = dt_codec_encode_delta(g->codec, x + g->off[i], g->cself + g->off[i], g->len[i], buf);
        g->send_src[q] = buf;
    }
    c->c.t_comm += dt_now() - t0;
    return dt_win_put_tensors_bytes(g->win, ts, n, g->send_src, g->send_bytes);
}

/* Control messages to and from every neighbour: with out/in (T sequence numbers per
 * neighbour: "my writes to you up to these have completed") or empty ("I have read"). */
static dt_status exchange_tokens(dt_gossip *g, dt_comm *c, int tag, const uint64_t *out, uint64_t *in) {
    static char token;
    double t0 = dt_now();
    const int cnt = out ? g->T : 0;
    int err = MPI_SUCCESS, posted = 0;
    for (int k = 0; k < g->nn && err == MPI_SUCCESS; k++) {
        err = MPI_Irecv(in ? (void *)(in + (size_t)k * g->T) : &token, cnt, MPI_UINT64_T, g->nbrs[k], tag, c->comm, &g->req[k]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(out ? (const void *)(out + (size_t)k * g->T) : &token, cnt, MPI_UINT64_T, g->nbrs[k], tag,
                            c->comm, &g->req[g->nn + k]);
        posted = k + 1;
    }
    if (err == MPI_SUCCESS) err = MPI_Waitall(2 * posted, g->req, g->statuses);
    c->c.t_comm += dt_now() - t0;
    return dt_mpi_check(err, "gossip lock-step tokens (MPI_Irecv/MPI_Isend/MPI_Waitall)");
}

/* Reads tensor i of neighbour j into xhat: the floats themselves, or with --compress the
 * encoded change, added to xhat; a change can only be applied if no write was missed. */
static dt_status read_slot(dt_gossip *g, dt_comm *c, int j, int i, int *fresh) {
    float *dst = g->xhat + (size_t)j * g->np + g->off[i];
    if (!g->codec) return dt_win_read(g->win, j, i, dst, NULL, fresh);
    const uint64_t before = dt_win_read_seq(g->win, j, i);
    uint64_t seq = 0;
    dt_status st = dt_win_read_bytes(g->win, j, i, g->rbuf, g->ebytes[i], &seq, fresh);
    if (st != DT_OK || !*fresh) return st;
    if (seq != before + 1)
        return dt_fail(DT_ERR_STATE, "gossip --compress: writes %llu..%llu of tensor %d from rank %d were "
                       "overwritten before they were read: the copies would diverge",
                       (unsigned long long)before + 1, (unsigned long long)seq - 1, i, g->nbrs[j]);
    double t0 = dt_now();
    dt_codec_decode_add(g->codec, g->rbuf, g->len[i], dst);
    c->c.t_comm += dt_now() - t0;
    return DT_OK;
}

/* MPICH may apply a completed put only when this rank next calls into MPI, so read each
 * tensor until the sequence number the neighbour announced has arrived. */
static dt_status read_expected_spin(dt_gossip *g, dt_comm *c) {
    const double deadline = dt_now() + 120.0;
    for (int j = 0; j < g->nn; j++)
        for (int i = 0; i < g->T; i++) {
            const uint64_t want = g->seq_in[(size_t)j * g->T + i];
            while (dt_win_read_seq(g->win, j, i) < want) {
                int fresh = 0;
                dt_status st = read_slot(g, c, j, i, &fresh);
                if (st != DT_OK) return st;
                g->fresh_epoch[j] += (uint64_t)fresh;
                if (fresh) { g->fresh_t[i] = 1; continue; }
                if ((st = dt_win_progress(g->win)) != DT_OK) return st;
                if (dt_now() > deadline)
                    return dt_fail(DT_ERR_MPI, "gossip: write %llu of tensor %d announced by rank %d did "
                                   "not arrive within 120 s (slot header at %llu, last read %llu)",
                                   (unsigned long long)want, i, g->nbrs[j],
                                   (unsigned long long)dt_win_slot_seq(g->win, j, i),
                                   (unsigned long long)dt_win_read_seq(g->win, j, i));
            }
        }
    return DT_OK;
}

static dt_status read_expected(dt_gossip *g, dt_comm *c) {
    dt_watch_wait_begin("a neighbour's announced put (lock-step)");
    dt_status st = read_expected_spin(g, c);
    dt_watch_wait_end();
    return st;
}

static dt_status announce_and_read(dt_gossip *g, dt_comm *c) {
    for (int j = 0; j < g->nn; j++)
        for (int i = 0; i < g->T; i++) g->seq_out[(size_t)j * g->T + i] = dt_win_sent_seq(g->win, j, i);
    dt_status st = exchange_tokens(g, c, TAG_READY, g->seq_out, g->seq_in);
    return st == DT_OK ? read_expected(g, c) : st;
}

dt_status dt_gossip_receive_sync(dt_gossip *g, dt_comm *c) {
    dt_status st = announce_and_read(g, c);
    return st == DT_OK ? exchange_tokens(g, c, TAG_READ, NULL, NULL) : st;
}

dt_status dt_gossip_receive(dt_gossip *g, dt_comm *c) {
    dt_status st = dt_win_progress(g->win);
    for (int j = 0; j < g->nn && st == DT_OK; j++)
        for (int i = 0; i < g->T && st == DT_OK; i++) {
            int fresh = 0;
            st = read_slot(g, c, j, i, &fresh);
            g->fresh_epoch[j] += (uint64_t)fresh;
            if (fresh) g->fresh_t[i] = 1;
        }
    return st;
}

/* x[lo, hi) <- W (x + sum_j xhat_j) */
static void mix_range(const dt_gossip *g, float *x, size_t lo, size_t hi) {
    for (size_t p = lo; p < hi; p++) {
        float sum = x[p];
        for (int j = 0; j < g->nn; j++) sum += g->xhat[(size_t)j * g->np + p];
        x[p] = g->W * sum;
    }
}

void dt_gossip_mix_fresh(dt_gossip *g, float *x) {
    for (int i = 0; i < g->T; i++) {
        if (!g->fresh_t[i]) continue;
        g->fresh_t[i] = 0;
        mix_range(g, x, g->off[i], g->off[i] + g->len[i]);
    }
}

void dt_gossip_mix(const dt_gossip *g, float *x) { mix_range(g, x, 0, g->np); }

/* Rank 0's transport line from every rank's row [sent, overwritten, degree, coalesced, fresh
 * from each rank + 0.5 where it is a neighbour]: returns the starved (rank, neighbour) pairs.
 * sent counts the writes asked for; coalesced, those of them a newer one replaced before they
 * left (overlapped sends). */
static int transport_line(dt_json *j, int epoch, const double *all, int N, int W) {
    int starved = 0;
    dt_json_begin(j, NULL);
    dt_json_str(j, "type", "transport");
    dt_json_int(j, "epoch", epoch);
    dt_json_begin_array(j, "ranks");
    for (int r = 0; r < N; r++) {
        const double *q = all + (size_t)r * W;
        dt_json_begin(j, NULL);
        dt_json_int(j, "rank", r);
        dt_json_num(j, "sent", q[0]);
        dt_json_num(j, "overwritten", q[1]);
        dt_json_num(j, "coalesced", q[3]);
        dt_json_begin(j, "fresh_from");
        for (int k = 0; k < N; k++) {
            if (q[4 + k] == 0) continue; /* not a neighbour */
            const double fresh = q[4 + k] - 0.5;
            if (all[(size_t)k * W] > 0 && fresh == 0) starved++;
            char key[16];
            snprintf(key, sizeof key, "%d", k);
            dt_json_num(j, key, fresh);
        }
        dt_json_end(j);
        dt_json_end(j);
    }
    dt_json_end_array(j);
    dt_json_int(j, "starved_pairs", starved);
    dt_json_end(j);
    return starved;
}

dt_status dt_gossip_end_epoch(dt_gossip *g, dt_step_ctx *ctx) {
    dt_comm *c = ctx->comm;
    const int N = c->size, W = 4 + N;
    double *row = calloc((size_t)W, sizeof *row), *all = c->rank == 0 ? calloc((size_t)W * N, sizeof *all) : NULL;
    if (!row || (c->rank == 0 && !all)) { free(row); free(all); return dt_fail(DT_ERR_NOMEM, "out of memory"); }
    row[0] = (double)g->sent_epoch;
    row[1] = (double)(c->c.overwritten - g->overwritten_mark);
    row[2] = (double)g->nn;
    const uint64_t coalesced = g->win ? dt_win_get_stats(g->win)->coalesced : 0;
    row[3] = (double)(coalesced - g->coalesced_mark);
    for (int j = 0; j < g->nn; j++) row[4 + g->nbrs[j]] = (double)g->fresh_epoch[j] + 0.5; /* +0.5: "is a neighbour" */
    int err = MPI_Gather(row, W, MPI_DOUBLE, all, W, MPI_DOUBLE, 0, c->comm);
    dt_status st = dt_mpi_check(err, "MPI_Gather (gossip transport figures)");
    if (st == DT_OK && c->rank == 0) {
        dt_json j;
        dt_json_init(&j);
        const int starved = transport_line(&j, ctx->epoch + 1, all, N, W);
        const char *text = dt_json_text(&j);
        st = text ? ctx->log(ctx->host, text) : DT_ERR_NOMEM;
        if (starved && !ctx->run.quiet)
            printf("warning: epoch %d: %d (rank, neighbour) pairs received nothing although the neighbour sent\n",
                   ctx->epoch + 1, starved);
        dt_json_free(&j);
    }
    free(row);
    free(all);
    g->sent_epoch = 0;
    memset(g->fresh_epoch, 0, (size_t)(g->nn ? g->nn : 1) * sizeof *g->fresh_epoch);
    g->overwritten_mark = c->c.overwritten;
    g->coalesced_mark = coalesced;
    return st;
}

/* Waiting for announced numbers, not a barrier: this MPICH can show a write's header before
 * its data even after the writer's flush returned (docs/transport.md). */
dt_status dt_gossip_drain(dt_gossip *g, dt_comm *c) {
    dt_status st = dt_win_complete(g->win); /* every write started or waiting has left */
    if (st == DT_OK) st = announce_and_read(g, c);
    /* nobody frees (collective) while a neighbour still reads */
    dt_status st2 = dt_win_free(&g->win);
    return st != DT_OK ? st : st2;
}

dt_status dt_gossip_overlap(dt_gossip *g, int max_lag) { return dt_win_set_overlap(g->win, 1, max_lag); }

dt_status dt_gossip_progress(dt_gossip *g) { return dt_win_progress(g->win); }

void dt_gossip_abandon(dt_gossip *g) {
    if (g) dt_win_free(&g->win);
}

/* ------------------------------------------------------------------ checkpoints */

static int *graph_record(const dt_gossip *g, const int *extra, int nextra, size_t *n) {
    *n = (size_t)(nextra + 1 + g->nn);
    int *r = malloc(*n * sizeof *r);
    if (!r) return NULL;
    if (nextra) memcpy(r, extra, (size_t)nextra * sizeof *r);
    r[nextra] = g->nn;
    memcpy(r + nextra + 1, g->nbrs, (size_t)g->nn * sizeof *r);
    return r;
}

static void record_name(char *out, size_t len, const char *prefix, const char *what) {
    snprintf(out, len, "%s:%s", prefix, what);
}

dt_status dt_gossip_save(dt_gossip *g, const char *prefix, const int *extra, int nextra, dt_records *out) {
    char name[64];
    size_t n;
    free(g->graph);
    if (!(g->graph = graph_record(g, extra, nextra, &n))) return dt_fail(DT_ERR_NOMEM, "out of memory");
    record_name(name, sizeof name, prefix, "graph");
    dt_status st = dt_records_add_raw(out, name, g->graph, n * sizeof *g->graph);
    record_name(name, sizeof name, prefix, "neighbours");
    if (st == DT_OK) st = dt_records_add_raw(out, name, g->xhat, (size_t)g->nn * g->np * sizeof(float));
    record_name(name, sizeof name, prefix, "own_copy");
    if (st == DT_OK && g->codec) st = dt_records_add_raw(out, name, g->cself, g->np * sizeof(float));
    return st;
}

dt_status dt_gossip_load(dt_gossip *g, const dt_comm *c, const char *prefix, const int *extra, int nextra, const char *what,
                         const dt_tfile *f, const char *path) {
    char name[64];
    size_t n;
    int *graph = graph_record(g, extra, nextra, &n);
    if (!graph) return dt_fail(DT_ERR_NOMEM, "out of memory");
    record_name(name, sizeof name, prefix, "graph");
    const dt_record *r = dt_tfile_find(f, name);
    const int same = r && r->numel == n && memcmp(r->data, graph, n * sizeof *graph) == 0;
    free(graph);
    if (!same)
        return dt_fail(DT_ERR_ARG, "--resume %s: saved with another %s (this rank's neighbours or the state kept "
                       "differ)", path, what);
    record_name(name, sizeof name, prefix, "neighbours");
    dt_status st = dt_tfile_take(f, path, name, g->xhat, (size_t)g->nn * g->np * sizeof(float));
    record_name(name, sizeof name, prefix, "own_copy");
    if (st == DT_OK && g->codec) st = dt_tfile_take(f, path, name, g->cself, g->np * sizeof(float));
    g->overwritten_mark = c->c.overwritten; /* the counters were restored first */
    return st;
}

/* ------------------------------------------------------------------ shared hooks */

static dt_gossip *of_scheme(const dt_strategy *s) { return *(dt_gossip *const *)s->impl; }

dt_status dt_gossip_hook_end_epoch(dt_strategy *s, dt_step_ctx *c) { return dt_gossip_end_epoch(of_scheme(s), c); }

dt_status dt_gossip_hook_finish(dt_strategy *s, dt_step_ctx *c) { return dt_gossip_drain(of_scheme(s), c->comm); }

void dt_gossip_hook_abandon(dt_strategy *s, dt_step_ctx *c) {
    (void)c;
    dt_gossip_abandon(of_scheme(s));
}
