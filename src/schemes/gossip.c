/* Gossip with graph neighbours through one-sided windows (see gossip.h): set-up, sending,
 * reading, mixing, the end. The transport line is gossip_report.c's, the checkpoint records
 * gossip_records.c's. */
#include "schemes/gossip_state.h"

#include <stdlib.h>
#include <string.h>

#include "comm/sim_poll.h"
#include "comm/topology.h"
#include "comm/watch.h"
#include "core/alloc.h"

enum { TAG_READY = 7101, TAG_READ = 7102, TAG_INIT = 7103, TAG_PACKED = 7104 };

int dt_gossip_num_neighbours(const dt_gossip *g) { return g->nn; }

void dt_gossip_free(dt_gossip *g) {
    if (!g) return;
    dt_codec_free(g->codec);
    dt_free_all(g->nbrs, g->off, g->len, g->xhat, g->req, g->statuses, g->seq_out, g->seq_in, g->fresh_epoch, g->cself,
                g->enc, g->eoff, g->ebytes, g->send_src, g->send_bytes, g->rbuf, g->graph, g->fresh_t, g->pk_send,
                g->pk_recv, g);
}

/* --compress: codec, copies and buffers, a byte window with each tensor's encoded size as its
 * capacity, and the starting copies: cself = x, xhat_j = neighbour j's x (exchanged once, not
 * counted; equal to x from the common seed unless the ranks resumed from their own
 * checkpoints). */
static dt_status start_compressed(dt_gossip *g, const dt_codec_spec *spec, dt_comm *c, const float *x) {
    size_t maxlen = 0, total = 0, maxb = 0;
    for (int i = 0; i < g->T; i++) if (g->len[i] > maxlen) maxlen = g->len[i];
    const size_t T = (size_t)g->T;
    dt_status st;
    if ((st = dt_malloc(g->eoff, T, "the encoding tables of %d tensors", g->T)) != DT_OK ||
        (st = dt_malloc(g->ebytes, T, "the encoding tables of %d tensors", g->T)) != DT_OK ||
        (st = dt_malloc(g->send_src, T, "the encoding tables of %d tensors", g->T)) != DT_OK ||
        (st = dt_malloc(g->send_bytes, T, "the encoding tables of %d tensors", g->T)) != DT_OK ||
        (st = dt_malloc(g->cself, g->np, "the encoding tables of %d tensors", g->T)) != DT_OK)
        return st;
    for (int i = 0; i < g->T; i++) {
        g->eoff[i] = total;
        g->ebytes[i] = dt_codec_bytes(spec, g->len[i]);
        total += g->ebytes[i];
        if (g->ebytes[i] > maxb) maxb = g->ebytes[i];
    }
    DT_TRY(dt_malloc(g->enc, total, "%zu bytes of encoded payloads", total + maxb));
    DT_TRY(dt_malloc(g->rbuf, maxb, "%zu bytes of encoded payloads", total + maxb));
    if ((st = dt_codec_create(spec, maxlen, &g->codec)) != DT_OK) return st;
    memcpy(g->cself, x, g->np * sizeof(float));
    if (!g->packed && (st = dt_win_create_bytes(c, g->nbrs, g->nn, g->ebytes, g->T, &g->win)) != DT_OK) return st;
    double t0 = dt_now();
    int err = MPI_SUCCESS;
    dt_count_other(c, (uint64_t)g->nn * g->np * sizeof(float)); /* set-up: not a payload */
    for (int k = 0; k < g->nn && err == MPI_SUCCESS; k++) {
        err = MPI_Irecv(g->xhat + (size_t)k * g->np, (int)g->np, MPI_FLOAT, g->nbrs[k], TAG_INIT, c->comm, &g->req[k]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(x, (int)g->np, MPI_FLOAT, g->nbrs[k], TAG_INIT, c->comm, &g->req[g->nn + k]);
    }
    if (err == MPI_SUCCESS) err = MPI_Waitall(2 * g->nn, g->req, g->statuses);
    c->c.t_comm += dt_now() - t0;
    return dt_mpi_check(err, "gossip --compress: exchanging the starting parameters");
}

/* packed: the bytes of tensor i in a message (start_compressed's sizes, or the floats) */
static size_t packed_bytes(const dt_gossip *g, int i) { return g->codec ? g->ebytes[i] : g->len[i] * sizeof(float); }

/* packed, after start_compressed: a message holds a bitmap of the tensors in it, then their
 * payloads in tensor order */
static dt_status start_packed(dt_gossip *g) {
    g->pk_bitmap = ((size_t)g->T + 7) / 8;
    g->pk_max = g->pk_bitmap;
    for (int i = 0; i < g->T; i++) g->pk_max += packed_bytes(g, i);
    const size_t nn1 = (size_t)(g->nn ? g->nn : 1);
    DT_TRY(dt_malloc(g->pk_send, g->pk_max, "%zu-byte messages", g->pk_max));
    return dt_malloc(g->pk_recv, nn1 * g->pk_max, "%zu-byte messages", g->pk_max);
}

static dt_status gossip_create(dt_step_ctx *ctx, const char *topology, const dt_codec_spec *spec, dt_gossip *g) {
    dt_comm *c = ctx->comm;
    int n = 0;
    dt_status st = dt_topology_neighbors(topology, c->rank, c->size, NULL, 0, &n);
    if (st != DT_OK && !dt_topology_known(topology)) return st;
    DT_TRY(dt_malloc(g->nbrs, (size_t)n, "the list of %d neighbours", n));
    if ((st = dt_topology_neighbors(topology, c->rank, c->size, g->nbrs, n, &g->nn)) != DT_OK) return st;
    g->W = 1.0f / (float)(g->nn + 1);
    dt_model *m = ctx->model;
    g->T = dt_model_num_tensors(m);
    g->np = dt_model_num_params(m);
    const size_t nn1 = (size_t)(g->nn ? g->nn : 1);
    const size_t T = (size_t)g->T;
/* the one message of every buffer below */
#define COPIES "%d neighbour copies of %zu parameters", g->nn, g->np
    if ((st = dt_malloc(g->off, T, COPIES)) != DT_OK || (st = dt_malloc(g->len, T, COPIES)) != DT_OK ||
        (st = dt_malloc(g->xhat, nn1 * g->np, COPIES)) != DT_OK ||
        (st = dt_malloc(g->req, 2 * nn1, COPIES)) != DT_OK ||
        (st = dt_malloc(g->statuses, 2 * nn1, COPIES)) != DT_OK ||
        (st = dt_calloc(g->seq_out, nn1 * T, COPIES)) != DT_OK ||
        (st = dt_calloc(g->seq_in, nn1 * T, COPIES)) != DT_OK ||
        (st = dt_calloc(g->fresh_epoch, nn1, COPIES)) != DT_OK || (st = dt_calloc(g->fresh_t, T, COPIES)) != DT_OK)
        return st;
#undef COPIES
    for (int i = 0; i < g->T; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        g->off[i] = v->offset;
        g->len[i] = v->numel;
    }
    /* every rank starts from the same weights, so that is what each neighbour holds */
    const float *x = dt_model_params(m);
    for (int k = 0; k < g->nn; k++) memcpy(g->xhat + (size_t)k * g->np, x, g->np * sizeof(float));
    g->overwritten_mark = c->c.overwritten;
    if (spec->kind != DT_CODEC_NONE && (st = start_compressed(g, spec, c, x)) != DT_OK) return st;
    if (g->packed) return start_packed(g);
    if (spec->kind == DT_CODEC_NONE) return dt_win_create(c, g->nbrs, g->nn, g->np, g->off, g->len, g->T, &g->win);
    return DT_OK;
}

static dt_status create(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec, int packed, dt_gossip **out) {
    *out = NULL;
    dt_gossip *g;
    DT_TRY(dt_calloc(g, 1, "the gossip state"));
    g->packed = packed;
    /* returned even on failure: what start made with every rank is freed with every rank */
    *out = g;
    return gossip_create(c, topology, spec, g);
}

dt_status dt_gossip_create(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec, dt_gossip **out) {
    return create(c, topology, spec, 0, out);
}

dt_status dt_gossip_create_packed(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec, dt_gossip **out) {
    return create(c, topology, spec, 1, out);
}

/* packed: this step's message (bitmap, payloads; with a codec cself follows what is sent),
 * posted to every neighbour with a receive from each; dt_gossip_receive_sync completes them */
static dt_status send_packed(dt_gossip *g, dt_comm *c, const int *ts, int n, const float *x) {
    double t0 = dt_now();
    unsigned char *m = g->pk_send;
    memset(m, 0, g->pk_bitmap);
    for (int q = 0; q < n; q++) m[ts[q] / 8] |= (unsigned char)(1u << (ts[q] % 8));
    size_t pos = g->pk_bitmap;
    for (int i = 0; i < g->T; i++) { /* tensor order: the receiver walks the bitmap */
        if (!(m[i / 8] >> (i % 8) & 1)) continue;
        if (g->codec) {
            pos += dt_codec_encode_delta(g->codec, x + g->off[i], g->cself + g->off[i], g->len[i], m + pos);
        } else {
            memcpy(m + pos, x + g->off[i], g->len[i] * sizeof(float));
            pos += g->len[i] * sizeof(float);
        }
    }
    int err = MPI_SUCCESS;
    for (int k = 0; k < g->nn && err == MPI_SUCCESS; k++) {
        err = MPI_Irecv(g->pk_recv + (size_t)k * g->pk_max, (int)g->pk_max, MPI_BYTE, g->nbrs[k], TAG_PACKED, c->comm,
                        &g->req[k]);
        if (err == MPI_SUCCESS) err = MPI_Isend(m, (int)pos, MPI_BYTE, g->nbrs[k], TAG_PACKED, c->comm, &g->req[g->nn + k]);
        /* n tensors as n messages (as the one-sided transport counts them), the bytes as they go */
        if (err == MPI_SUCCESS) dt_count_send(c, (uint64_t)n, pos);
    }
    c->c.t_comm += dt_now() - t0;
    return dt_mpi_check(err, "gossip (packed): MPI_Irecv/MPI_Isend");
}

/* packed: waits for every neighbour's message and adds it to that neighbour's copies */
static dt_status receive_packed(dt_gossip *g, dt_comm *c) {
    double t0 = dt_now();
    int err = MPI_Waitall(2 * g->nn, g->req, g->statuses);
    dt_status st = dt_mpi_check(err, "gossip (packed): MPI_Waitall");
    for (int k = 0; k < g->nn && st == DT_OK; k++) {
        const unsigned char *m = g->pk_recv + (size_t)k * g->pk_max;
        int got = 0;
        MPI_Get_count(&g->statuses[k], MPI_BYTE, &got);
        size_t want = g->pk_bitmap, n = 0;
        for (int i = 0; i < g->T && (size_t)got >= g->pk_bitmap; i++)
            if (m[i / 8] >> (i % 8) & 1) {
                want += packed_bytes(g, i);
                n++;
            }
        if ((size_t)got != want) {
            st = dt_fail(DT_ERR_STATE, "gossip (packed): a message of %d bytes from rank %d, expected %zu for the "
                         "tensors its bitmap names", got, g->nbrs[k], want);
            break;
        }
        size_t pos = g->pk_bitmap;
        float *xhat = g->xhat + (size_t)k * g->np;
        for (int i = 0; i < g->T; i++) {
            if (!(m[i / 8] >> (i % 8) & 1)) continue;
            if (g->codec) dt_codec_decode_add(g->codec, m + pos, g->len[i], xhat + g->off[i]);
            else memcpy(xhat + g->off[i], m + pos, g->len[i] * sizeof(float));
            pos += packed_bytes(g, i);
            g->fresh_t[i] = 1;
        }
        g->fresh_epoch[k] += n;
        c->c.fresh_recv += n;
        dt_count_recv(c, n, (uint64_t)got);
    }
    c->c.t_comm += dt_now() - t0;
    return st;
}

dt_status dt_gossip_send(dt_gossip *g, dt_comm *c, const int *ts, int n, const float *x) {
    c->c.baseline_msgs += (uint64_t)g->nn * (uint64_t)g->T;
    g->sent_epoch += (uint64_t)g->nn * (uint64_t)n;
    if (!g->codec && !g->overlap) /* dt_gossip_keep_own_copy: the neighbours will hold what goes now */
        for (int q = 0; q < n && g->cself; q++)
            memcpy(g->cself + g->off[ts[q]], x + g->off[ts[q]], g->len[ts[q]] * sizeof(float));
    if (g->packed) return send_packed(g, c, ts, n, x);
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
    dt_count_other(c, (uint64_t)g->nn * (uint64_t)cnt * sizeof(uint64_t)); /* protocol: the sequence numbers */
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
    for (int j = 0, polls = 0; j < g->nn; j++)
        for (int i = 0; i < g->T; i++) {
            const uint64_t want = g->seq_in[(size_t)j * g->T + i];
            while (dt_win_read_seq(g->win, j, i) < want) {
                int fresh = 0;
                dt_status st = read_slot(g, c, j, i, &fresh);
                if (st != DT_OK) return st;
                g->fresh_epoch[j] += (uint64_t)fresh;
                if (fresh) { g->fresh_t[i] = 1; continue; }
                if ((st = dt_win_progress(g->win)) != DT_OK) return st;
                dt_sim_poll_idle(polls++);
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
    if (g->packed) return receive_packed(g, c);
    dt_status st = announce_and_read(g, c);
    return st == DT_OK ? exchange_tokens(g, c, TAG_READ, NULL, NULL) : st;
}

dt_status dt_gossip_receive(dt_gossip *g, dt_comm *c) {
    if (g->packed) return dt_fail(DT_ERR_STATE, "gossip (packed): lock-step only");
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

static void consensus_range(const dt_gossip *g, float *x, float gamma, size_t lo, size_t hi) {
    const float a = gamma * g->W;
    for (size_t p = lo; p < hi; p++) {
        float d = 0;
        for (int j = 0; j < g->nn; j++) d += g->xhat[(size_t)j * g->np + p];
        x[p] += a * (d - (float)g->nn * g->cself[p]);
    }
}

/* Each tensor of which something new arrived since it was last mixed, once: averaged
 * (consensus 0) or pulled by the consensus step (consensus 1, step gamma). */
static void mix_fresh_tensors(dt_gossip *g, float *x, int consensus, float gamma) {
    for (int i = 0; i < g->T; i++) {
        if (!g->fresh_t[i]) continue;
        g->fresh_t[i] = 0;
        if (consensus) consensus_range(g, x, gamma, g->off[i], g->off[i] + g->len[i]);
        else mix_range(g, x, g->off[i], g->off[i] + g->len[i]);
    }
}

void dt_gossip_mix_fresh(dt_gossip *g, float *x) { mix_fresh_tensors(g, x, 0, 0); }

void dt_gossip_mix(const dt_gossip *g, float *x) { mix_range(g, x, 0, g->np); }

void dt_gossip_mix_consensus(const dt_gossip *g, float *x, float gamma) { consensus_range(g, x, gamma, 0, g->np); }

void dt_gossip_mix_consensus_fresh(dt_gossip *g, float *x, float gamma) { mix_fresh_tensors(g, x, 1, gamma); }

/* --mix sum: each neighbour's copy is the running sum of its own updates; what a fresh tensor's
 * copies gained since they were last applied is added to x and to base (x minus this rank's own
 * updates), once */
void dt_gossip_apply_sums_fresh(dt_gossip *g, float *x, float *applied, float *base) {
    for (int i = 0; i < g->T; i++) {
        if (!g->fresh_t[i]) continue;
        g->fresh_t[i] = 0;
        for (size_t p = g->off[i]; p < g->off[i] + g->len[i]; p++) {
            float sum = 0;
            for (int j = 0; j < g->nn; j++) sum += g->xhat[(size_t)j * g->np + p];
            const float d = sum - applied[p];
            applied[p] = sum;
            x[p] += d;
            base[p] += d;
        }
    }
}

void dt_gossip_zero_copies(dt_gossip *g) {
    memset(g->xhat, 0, (size_t)g->nn * g->np * sizeof(float));
    if (g->cself) memset(g->cself, 0, g->np * sizeof(float));
}

void dt_gossip_agree(dt_gossip *g, const float *x) {
    for (int k = 0; k < g->nn; k++) memcpy(g->xhat + (size_t)k * g->np, x, g->np * sizeof(float));
    if (g->cself) memcpy(g->cself, x, g->np * sizeof(float));
}

/* With overlap and a plain own copy, the window keeps it: what arrived at the neighbours, not
 * what was handed to a put (called by whichever of the two comes second) */
static void mirror_own_copy(dt_gossip *g) {
    if (g->overlap && !g->codec && g->cself) dt_win_mirror_arrived(g->win, g->cself);
}

dt_status dt_gossip_keep_own_copy(dt_gossip *g, const float *x) {
    if (g->cself) return DT_OK; /* --compress keeps it already */
    DT_TRY(dt_malloc(g->cself, g->np, "the own copy of %zu parameters", g->np));
    memcpy(g->cself, x, g->np * sizeof(float));
    mirror_own_copy(g);
    return DT_OK;
}

const float *dt_gossip_own_copy(const dt_gossip *g) { return g->cself; }

/* Waiting for announced numbers, not a barrier: this MPICH can show a write's header before
 * its data even after the writer's flush returned (docs/transport.md). */
dt_status dt_gossip_drain(dt_gossip *g, dt_comm *c) {
    if (g->packed) return DT_OK; /* lock-step: every message was taken in its step */
    dt_status st = dt_win_complete(g->win); /* every write started or waiting has left */
    if (st == DT_OK) st = announce_and_read(g, c);
    /* nobody frees (collective) while a neighbour still reads */
    dt_status st2 = dt_win_free(&g->win);
    return st != DT_OK ? st : st2;
}

dt_status dt_gossip_overlap(dt_gossip *g, int max_lag) {
    if (g->packed) return DT_OK;
    dt_status st = dt_win_set_overlap(g->win, 1, max_lag);
    g->overlap = st == DT_OK;
    mirror_own_copy(g);
    return st;
}

dt_status dt_gossip_progress(dt_gossip *g) { return g->packed ? DT_OK : dt_win_progress(g->win); }

void dt_gossip_abandon(dt_gossip *g) {
    if (g) dt_win_free(&g->win);
}

/* ------------------------------------------------------------------ shared hooks */

static dt_gossip *of_scheme(const dt_scheme *s) { return *(dt_gossip *const *)s->impl; }

dt_status dt_gossip_hook_end_epoch(dt_scheme *s, dt_step_ctx *c) { return dt_gossip_end_epoch(of_scheme(s), c); }

dt_status dt_gossip_hook_finish(dt_scheme *s, dt_step_ctx *c) { return dt_gossip_drain(of_scheme(s), c->comm); }

dt_status dt_gossip_hook_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    (void)c;
    return dt_gossip_save(of_scheme(s), NULL, 0, out);
}

dt_status dt_gossip_hook_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    return dt_gossip_load(of_scheme(s), c->comm, NULL, 0, "--topology", f, path);
}

void dt_gossip_hook_abandon(dt_scheme *s, dt_step_ctx *c) {
    (void)c;
    dt_gossip_abandon(of_scheme(s));
}
