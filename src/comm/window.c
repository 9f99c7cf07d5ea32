/* One-sided parameter transport: one window per rank, one passive-target epoch for the whole
 * run, a {sequence, check} header per (slot, tensor); a read is accepted only when the copied
 * data hashes to the header's check. See window.h and docs/transport.md. */
#include "comm/window_state.h"
#include "core/sim.h"
#include "comm/trace.h"
#include "core/alloc.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* MPI_Win_sync: puts completed at this rank become visible to its loads. The simulation
 * build has no such call (SMPI 3.32 warns it is not implemented) and needs none: every
 * simulated rank runs on one thread, and a put is copied in when it completes. */
static int win_sync(MPI_Win win) {
#ifdef DT_SIM
    (void)win;
    return MPI_SUCCESS;
#else
    return MPI_Win_sync(win);
#endif
}

static void win_release(dt_win *w) {
    if (!w) return;
    free(w->nbrs); free(w->peer_slot); free(w->boff); free(w->cap);
    free(w->sent); free(w->last); free(w->hdr_out); free(w->scratch); free(w->stage);
    free(w->stage2); free(w->which); free(w->pend); free(w->req); free(w->stat); free(w->round_bytes);
    free(w->probe); free(w->probe_want);
#ifdef DT_SIM
    free(w->soff); free(w->pack);
#endif
    free(w);
}

/* Both layouts. Float layout (dt_win_create): tensor t is floats [off[t], off[t] + len[t]) of
 * an n-float slot. Byte layout (dt_win_create_bytes, off == NULL): tensor t has len[t] bytes
 * at the running sum of the capacities before it, and a slot is the sum of them all. */
static dt_status win_create(dt_comm *c, const int *nbrs, int nnbrs, size_t n,
                            const size_t *tensor_off, const size_t *tensor_len, int ntensors,
                            dt_win **out) {
    assert(c && out && nnbrs >= 0 && (nbrs || nnbrs == 0) && ntensors >= 1);
    assert(tensor_len);
    *out = NULL;
    const int floats = tensor_off != NULL;
    for (int k = 0; k < nnbrs; k++) {
        assert(nbrs[k] >= 0 && nbrs[k] < c->size && nbrs[k] != c->rank);
        for (int j = 0; j < k; j++) assert(nbrs[j] != nbrs[k]);
    }
    if (floats)
        for (int t = 0; t < ntensors; t++) assert(tensor_off[t] <= n && tensor_len[t] <= n - tensor_off[t]);
    double t0 = dt_now();

    /* Local checks first; every failure is agreed on collectively below, so no rank is left
     * waiting in MPI_Win_create for one that gave up. */
    dt_status st = DT_OK;
    int err = MPI_SUCCESS;
    MPI_Aint bytes = 0;
    void *base = NULL;
    dt_win *w = calloc(1, sizeof *w);
    int *mypos = malloc((size_t)c->size * sizeof *mypos);
    int *theirpos = malloc((size_t)c->size * sizeof *theirpos);
    const size_t k_cap = nnbrs ? (size_t)nnbrs : 1;
    if (w) {
        w->c = c;
        w->win = MPI_WIN_NULL;
#ifdef DT_SIM
        w->win_lower = MPI_WIN_NULL;
#endif
        w->pcomm = MPI_COMM_NULL;
        w->nnbrs = nnbrs;
        w->T = ntensors;
        w->float_layout = floats;
        w->nbrs = malloc(k_cap * sizeof *w->nbrs);
        w->peer_slot = malloc(k_cap * sizeof *w->peer_slot);
        w->boff = malloc((size_t)ntensors * sizeof *w->boff);
        w->cap = malloc((size_t)ntensors * sizeof *w->cap);
        w->sent = calloc(k_cap * (size_t)ntensors, sizeof *w->sent);
        w->last = calloc(k_cap * (size_t)ntensors, sizeof *w->last);
        w->hdr_out = calloc(2 * k_cap * (size_t)ntensors, sizeof *w->hdr_out);
    }
    if (!w || !mypos || !theirpos || !w->nbrs || !w->peer_slot || !w->boff || !w->cap ||
        !w->sent || !w->last || !w->hdr_out) {
        st = dt_nomem("dt_win_create's tables");
    } else {
        memcpy(w->nbrs, nbrs, (size_t)nnbrs * sizeof *nbrs);
        w->hdr_region = (size_t)nnbrs * (size_t)ntensors * HDR_BYTES;
        /* window bytes = headers + nnbrs slots; must fit MPI_Aint */
        const size_t room = ((size_t)PTRDIFF_MAX - w->hdr_region) / (nnbrs ? (size_t)nnbrs : 1);
        if (floats) {
            for (int t = 0; t < ntensors; t++) {
                w->boff[t] = tensor_off[t] * sizeof(float);
                w->cap[t] = tensor_len[t] * sizeof(float);
                if (tensor_len[t] > (size_t)INT_MAX && st == DT_OK)
                    st = dt_fail(DT_ERR_ARG, "dt_win_create: tensor %d has %zu floats, more than one "
                                 "MPI_Put can carry (%d)", t, tensor_len[t], INT_MAX);
            }
            if (st == DT_OK && nnbrs && n > room / sizeof(float))
                st = dt_fail(DT_ERR_ARG, "dt_win_create: %d slots of %zu floats do not fit one window",
                             nnbrs, n);
            w->slot_bytes = n * sizeof(float);
        } else {
            size_t sum = 0;
            for (int t = 0; t < ntensors && st == DT_OK; t++) {
                w->boff[t] = sum;
                w->cap[t] = tensor_len[t];
                if (tensor_len[t] > (size_t)INT_MAX)
                    st = dt_fail(DT_ERR_ARG, "dt_win_create_bytes: tensor %d has %zu bytes, more than "
                                 "one MPI_Put can carry (%d)", t, tensor_len[t], INT_MAX);
                else if (tensor_len[t] > room - sum)
                    st = dt_fail(DT_ERR_ARG, "dt_win_create_bytes: %d slots of more than %zu bytes do "
                                 "not fit one window", nnbrs, sum);
                else
                    sum += tensor_len[t];
            }
            w->slot_bytes = sum;
        }
        for (int t = 0; t < ntensors; t++)
            if (w->cap[t] > w->maxcap) w->maxcap = w->cap[t];
        if (st == DT_OK) {
            w->scratch = malloc(w->maxcap ? w->maxcap : 1);
            w->stage = malloc(w->slot_bytes ? w->slot_bytes : 1);
            if (!w->scratch || !w->stage)
                st = dt_nomem("dt_win_create's %zu-byte read and send buffers", w->maxcap + w->slot_bytes);
        }
#ifdef DT_SIM
        /* each tensor's header just before its data, at 8-byte places (dt_win_put_msg) */
        if (st == DT_OK && !(w->soff = malloc((size_t)ntensors * sizeof *w->soff)))
            st = dt_nomem("dt_win_create's tables");
        for (int t = 0; t < ntensors && st == DT_OK; t++) {
            w->soff[t] = w->stride;
            w->stride += HDR_BYTES + ((w->cap[t] + 7) & ~(size_t)7);
        }
        if (st == DT_OK && !(w->pack = malloc(k_cap * w->stride + 1)))
            st = dt_nomem("dt_win_create's %zu-byte send buffers", k_cap * w->stride);
#endif
    }

    /* Every rank must have its buffers before the exchange below. */
    if ((st = dt_comm_agree(c, st, "dt_win_create: another rank failed to set up its window")) != DT_OK) goto fail;

    /* Where am I in each neighbour's list? mypos[j] = position of j in my list or -1; after the
     * exchange theirpos[j] = position of me in j's list or -1. The graph must be symmetric. */
    for (int j = 0; j < c->size; j++) mypos[j] = -1;
    for (int k = 0; k < nnbrs; k++) mypos[nbrs[k]] = k;
    err = MPI_Alltoall(mypos, 1, MPI_INT, theirpos, 1, MPI_INT, c->comm);
    if (err != MPI_SUCCESS) st = dt_mpi_check(err, "MPI_Alltoall (window slots)");
    for (int j = 0; j < c->size && st == DT_OK; j++) {
        if (j == c->rank || (mypos[j] >= 0) == (theirpos[j] >= 0)) continue;
        int from = mypos[j] >= 0 ? c->rank : j, to = mypos[j] >= 0 ? j : c->rank;
        st = dt_fail(DT_ERR_ARG, "dt_win_create: neighbour lists are not symmetric: rank %d "
                     "lists rank %d but not the other way round", from, to);
    }
    for (int k = 0; k < nnbrs && st == DT_OK; k++) w->peer_slot[k] = theirpos[nbrs[k]];
    if ((st = dt_comm_agree(c, st, "dt_win_create: another rank failed to set up its window")) != DT_OK) goto fail;
    free(mypos);
    free(theirpos);
    mypos = theirpos = NULL;

#ifdef DT_SIM
    bytes = (MPI_Aint)((size_t)nnbrs * w->stride);
#else
    bytes = (MPI_Aint)(w->hdr_region + (size_t)nnbrs * w->slot_bytes);
#endif

    /* MPI_Alloc_mem + MPI_Win_create, not MPI_Win_allocate: Debian's MPICH 4.0.2 (ch4:ucx)
     * maps displacements 8 bytes short in windows of MPI_Win_allocate above some size (seen
     * with cnn1's 154 kB window: every put landed 8 bytes early, over the last header). */
    err = MPI_Alloc_mem(bytes ? bytes : 8, MPI_INFO_NULL, &base);
    if (err != MPI_SUCCESS) {
        st = dt_mpi_check(err, "MPI_Alloc_mem (window memory)");
        goto fail;
    }
    err = MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, c->comm, &w->win);
    if (err != MPI_SUCCESS) {
        MPI_Free_mem(base);
        st = dt_mpi_check(err, "MPI_Win_create");
        goto fail;
    }
    w->base = base;
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    if (bytes) memset(w->base, 0, (size_t)bytes); /* all sequence numbers 0: nothing written */

    /* One epoch for the whole run; NOCHECK: no rank ever takes a conflicting lock. */
    err = MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win);
#ifdef DT_SIM
    /* the second window of the simulation build (win_to); never freed, as the first (dt_win_free) */
    if (err == MPI_SUCCESS) err = MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, c->comm, &w->win_lower);
    if (err == MPI_SUCCESS) MPI_Win_set_errhandler(w->win_lower, MPI_ERRORS_RETURN);
    if (err == MPI_SUCCESS) err = MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win_lower);
#endif
    if (err == MPI_SUCCESS) err = win_sync(w->win);
    if (err == MPI_SUCCESS) err = MPI_Comm_dup(c->comm, &w->pcomm);
    /* nobody puts before every window is zeroed */
    if (err == MPI_SUCCESS) err = MPI_Barrier(c->comm);
    if (err != MPI_SUCCESS) {
        st = dt_mpi_check(err, "dt_win_create: opening the RMA epoch");
        MPI_Win_free(&w->win);
        MPI_Free_mem(base);
        goto fail;
    }
    c->c.t_comm += dt_now() - t0;
    *out = w;
    return DT_OK;

fail:
    free(mypos);
    free(theirpos);
    win_release(w);
    c->c.t_comm += dt_now() - t0;
    return st;
}

dt_status dt_win_create(dt_comm *c, const int *nbrs, int nnbrs, size_t n,
                        const size_t *tensor_off, const size_t *tensor_len, int ntensors,
                        dt_win **out) {
    assert(tensor_off && tensor_len);
    return win_create(c, nbrs, nnbrs, n, tensor_off, tensor_len, ntensors, out);
}

dt_status dt_win_create_bytes(dt_comm *c, const int *nbrs, int nnbrs, const size_t *tensor_cap,
                              int ntensors, dt_win **out) {
    assert(tensor_cap);
    return win_create(c, nbrs, nnbrs, 0, NULL, tensor_cap, ntensors, out);
}

#ifndef DT_SIM
/* The header of tensor t for neighbour k (its sequence number and check word) into k's slot. */
static int put_header(dt_win *w, int k, int t) {
    const uint64_t *hdr = w->hdr_out + 2 * ((size_t)k * (size_t)w->T + (size_t)t);
    return MPI_Put(hdr, 2, MPI_UINT64_T, w->nbrs[k], hdr_disp(w, w->peer_slot[k], t), 2, MPI_UINT64_T,
                   win_to(w, w->nbrs[k]));
}
#endif

/* Data and header in one round trip: dt_win_read accepts a copy only when it hashes to the
 * header, so it needs no order between the two. The data goes out from a staging copy that
 * stays unchanged until the next write of the same tensor: this MPICH (ch4:ucx) was seen to
 * take a large put's bytes from the origin buffer after MPI_Win_flush had returned (the
 * target fetches them when it next runs MPI), so a caller's buffer changed after the flush
 * could land under the old header (docs/transport.md). */
dt_status dt_win_put_bytes(dt_win *w, int k, int t, const void *src, size_t bytes) {
    assert(w && k >= 0 && k < w->nnbrs && t >= 0 && t < w->T && bytes <= w->cap[t] && (src || bytes == 0));
    assert(!w->overlap); /* one neighbour's put would share tensor t's copies with the others' */
    double t0 = dt_now(), tt = dt_trace_t0();
    const int target = w->nbrs[k], slot = w->peer_slot[k];
    const size_t idx = (size_t)k * (size_t)w->T + (size_t)t;
    uint64_t *hdr = w->hdr_out + 2 * idx;
    unsigned char *stage = w->stage + w->boff[t];
    if (bytes) memcpy(stage, src, bytes);
    hdr[0] = ++w->sent[idx];
    hdr[1] = check_word(dt_hash64(stage, bytes, 0), hdr[0]);
#ifdef DT_SIM
    (void)slot;
    const char *what = "MPI_Put (tensor and header)";
    int err = dt_win_put_msg(w, k, t, bytes, stage, NULL);
#else
    const char *what = "MPI_Put (tensor data)";
    int err = dt_win_put_data(w, target, slot, t, bytes, stage, NULL);
    if (err == MPI_SUCCESS) {
        what = "MPI_Put (header)";
        err = put_header(w, k, t);
    }
#endif
    if (err == MPI_SUCCESS) { what = "MPI_Win_flush"; err = MPI_Win_flush(target, win_to(w, target)); }
    w->c->c.t_comm += dt_now() - t0;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, what);

    dt_win_count_puts(w, 1, bytes);
    w->st.flushes++;
    dt_trace_event(DT_TRACE_COMM, "put", tt, (int64_t)bytes, target, t);
    return DT_OK;
}

dt_status dt_win_put(dt_win *w, int k, int t, const float *src) {
    assert(w && w->float_layout && t >= 0 && t < w->T);
    return dt_win_put_bytes(w, k, t, src, w->cap[t]);
}

/* Tensors ts[0..nt) to every neighbour, one flush for all: from src[i] (bytes[i] bytes), or,
 * when x is given (float layout), from x's own bytes at each tensor's place. */
static dt_status put_batch_now(dt_win *w, const int *ts, int nt, const void *const *src,
                               const size_t *nbytes, const unsigned char *x) {
    assert(w && nt >= 0 && (ts || nt == 0));
    for (int i = 0; i < nt; i++) {
        assert(ts[i] >= 0 && ts[i] < w->T);
        assert(x || nbytes[i] <= w->cap[ts[i]]);
        assert(x || src[i] || nbytes[i] == 0);
        for (int j = 0; j < i; j++) assert(ts[j] != ts[i]); /* one write per (k, t) per round */
    }
    if (nt == 0 || w->nnbrs == 0) return DT_OK;
    if (w->overlap) return dt_win_put_overlapped(w, ts, nt, src, nbytes, x);
    double t0 = dt_now();
    /* every neighbour gets the same bytes: hash each tensor once */
    for (int i = 0; i < nt; i++) {
        const int t = ts[i];
        const size_t bytes = x ? w->cap[t] : nbytes[i];
        const void *from = x ? (const void *)(x + w->boff[t]) : src[i];
        if (bytes) memcpy(w->stage + w->boff[t], from, bytes);
        const uint64_t h = dt_hash64(w->stage + w->boff[t], bytes, 0);
        for (int k = 0; k < w->nnbrs; k++) {
            const size_t idx = (size_t)k * (size_t)w->T + (size_t)t;
            uint64_t *hdr = w->hdr_out + 2 * idx;
            hdr[0] = ++w->sent[idx];
            hdr[1] = check_word(h, hdr[0]);
        }
    }
    const char *what = "MPI_Put";
    int err = MPI_SUCCESS;
    for (int k = 0; k < w->nnbrs && err == MPI_SUCCESS; k++) {
        for (int i = 0; i < nt && err == MPI_SUCCESS; i++) {
            const int t = ts[i];
            const size_t bytes = x ? w->cap[t] : nbytes[i];
#ifdef DT_SIM
            err = dt_win_put_msg(w, k, t, bytes, w->stage + w->boff[t], NULL);
#else
            err = dt_win_put_data(w, w->nbrs[k], w->peer_slot[k], t, bytes, w->stage + w->boff[t], NULL);
            if (err == MPI_SUCCESS) err = put_header(w, k, t);
#endif
        }
    }
#ifdef DT_SIM
    if (err == MPI_SUCCESS) {
        what = "MPI_Win_flush";
        err = dt_win_flush_nbrs(w);
    }
#else
    if (err == MPI_SUCCESS) {
        what = "MPI_Win_flush_all";
        err = MPI_Win_flush_all(w->win);
        w->st.flushes++;
    }
#endif
    w->c->c.t_comm += dt_now() - t0;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, what);
    for (int i = 0; i < nt; i++) dt_win_count_puts(w, w->nnbrs, x ? w->cap[ts[i]] : nbytes[i]);
    return DT_OK;
}

/* put_batch_now on the timeline (--trace): the tensors' bytes to each neighbour, the
 * neighbour when there is one, the tensor when there is one */
static dt_status put_batch(dt_win *w, const int *ts, int nt, const void *const *src,
                           const size_t *nbytes, const unsigned char *x) {
    const double tt = dt_trace_t0();
    const dt_status st = put_batch_now(w, ts, nt, src, nbytes, x);
    if (tt == 0 || st != DT_OK || nt == 0 || w->nnbrs == 0) return st;
    int64_t bytes = 0;
    for (int i = 0; i < nt; i++) bytes += (int64_t)(x ? w->cap[ts[i]] : nbytes[i]);
    dt_trace_event(DT_TRACE_COMM, w->overlap ? "put (queued, overlapped)" : "put", tt, bytes * w->nnbrs,
                   w->nnbrs == 1 ? w->nbrs[0] : -1, nt == 1 ? ts[0] : -1);
    return st;
}

dt_status dt_win_put_tensors(dt_win *w, const int *ts, int nt, const float *x) {
    assert(w && w->float_layout && (x || nt == 0));
    return put_batch(w, ts, nt, NULL, NULL, (const unsigned char *)x);
}

dt_status dt_win_put_tensors_bytes(dt_win *w, const int *ts, int nt, const void *const *src,
                                   const size_t *bytes) {
    assert(w && (nt == 0 || (src && bytes)));
    return put_batch(w, ts, nt, src, bytes, NULL);
}

/* A write is accepted only if the copied bytes hash to the header's check word for the
 * header's sequence number. That holds whatever order the data and header puts land in, and
 * however a concurrent write interleaves with the copy: this MPICH (ch4:ucx) was seen to make
 * the data of write s+1 visible while both words of an older begin/end seqlock still said s,
 * so ordering-based seqlocks are not safe on it. */
dt_status dt_win_read_bytes(dt_win *w, int k, int t, void *dst, size_t bytes, uint64_t *seq, int *fresh) {
    assert(w && k >= 0 && k < w->nnbrs && t >= 0 && t < w->T && fresh && bytes <= w->cap[t] &&
           (dst || bytes == 0));
    double t0 = dt_now(), tt = dt_trace_t0();
    const size_t idx = (size_t)k * (size_t)w->T + (size_t)t;
    const uint64_t last = w->last[idx];
    uint64_t *h = hdr_ptr(w, k, t);
    dt_status st = DT_OK;
    uint64_t e, chk;
    *fresh = 0;
    w->st.reads++;

    /* Win_sync: puts that completed at this target become visible to local loads */
    int err = win_sync(w->win);
    if (err != MPI_SUCCESS) { st = dt_mpi_check(err, "MPI_Win_sync"); goto done; }
    e = __atomic_load_n(&h[0], __ATOMIC_ACQUIRE);
    chk = __atomic_load_n(&h[1], __ATOMIC_ACQUIRE);
    if (e == last) {                      /* nothing new */
        w->st.stale++;
        goto done;
    }
    if (e < last) {
        st = dt_fail(DT_ERR_STATE, "dt_win_read: slot of rank %d, tensor %d went back from "
                     "sequence %llu to %llu", w->nbrs[k], t, (unsigned long long)last,
                     (unsigned long long)e);
        goto done;
    }
    if (bytes) memcpy(w->scratch, w->base + data_byte_off(w, k, t), bytes);
    if (check_word(dt_hash64(w->scratch, bytes, 0), e) != chk) {
        /* the data is not (all) write e's: a newer write is landing, or write e's data has
         * not. Keep dst; a later read finds the complete write. */
        w->st.torn++;
        w->c->c.torn_retries++;
        goto done;
    }
    if (bytes) memcpy(dst, w->scratch, bytes);
    w->last[idx] = e;
    *fresh = 1;
    w->st.fresh++;
    w->st.overwritten += e - last - 1;
    w->c->c.fresh_recv++;
    w->c->c.overwritten += e - last - 1;
    dt_count_recv(w->c, 1, (uint64_t)bytes);

done:
    if (seq) *seq = w->last[idx];
    w->c->c.t_comm += dt_now() - t0;
    /* a fresh copy is a message received; a read that found none is a poll */
    dt_trace_event(DT_TRACE_COMM, *fresh ? "receive" : "poll", tt, *fresh ? (int64_t)bytes : 0, w->nbrs[k], t);
    return st;
}

dt_status dt_win_read(dt_win *w, int k, int t, float *dst, uint64_t *seq, int *fresh) {
    assert(w && w->float_layout && t >= 0 && t < w->T);
    return dt_win_read_bytes(w, k, t, dst, w->cap[t], seq, fresh);
}

dt_status dt_win_progress(dt_win *w) {
    assert(w);
    double t0 = dt_now();
    int flag = 0;
    /* Any call into the progress engine serves incoming RMA that needs the target's help
     * (active-message puts); the private communicator never carries messages. */
    int err = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w->pcomm, &flag, MPI_STATUS_IGNORE);
    dt_status st = dt_mpi_check(err, "MPI_Iprobe (RMA progress)");
    if (st == DT_OK && w->overlap) st = dt_win_overlap_advance(w);
    w->c->c.t_comm += dt_now() - t0;
    return st;
}

uint64_t dt_win_sent_seq(const dt_win *w, int k, int t) {
    assert(w && k >= 0 && k < w->nnbrs && t >= 0 && t < w->T);
    return w->sent[(size_t)k * (size_t)w->T + (size_t)t];
}

uint64_t dt_win_slot_seq(dt_win *w, int k, int t) {
    assert(w && k >= 0 && k < w->nnbrs && t >= 0 && t < w->T);
    win_sync(w->win);
    return __atomic_load_n(&hdr_ptr(w, k, t)[0], __ATOMIC_ACQUIRE);
}

uint64_t dt_win_read_seq(const dt_win *w, int k, int t) {
    assert(w && k >= 0 && k < w->nnbrs && t >= 0 && t < w->T);
    return w->last[(size_t)k * (size_t)w->T + (size_t)t];
}

int dt_win_num_neighbors(const dt_win *w) { assert(w); return w->nnbrs; }
int dt_win_neighbor(const dt_win *w, int k) {
    assert(w && k >= 0 && k < w->nnbrs);
    return w->nbrs[k];
}
int dt_win_num_tensors(const dt_win *w) { assert(w); return w->T; }
size_t dt_win_capacity(const dt_win *w, int t) {
    assert(w && t >= 0 && t < w->T);
    return w->cap[t];
}
const dt_win_stats *dt_win_get_stats(const dt_win *w) { assert(w); return &w->st; }

dt_status dt_win_free(dt_win **wp) {
    assert(wp);
    dt_win *w = *wp;
    if (!w) return DT_OK;
    *wp = NULL;
    double t0 = dt_now();
    dt_comm *c = w->c;
    dt_status st = DT_OK;
    int err;
    if (w->req) { /* what is in flight leaves first; what waits is dropped */
        err = MPI_Waitall(dt_win_nreq(w), w->req, w->stat);
        st = dt_mpi_check(err, "MPI_Waitall (puts in flight)");
    }
#ifdef DT_SIM
    /* SMPI 3.32 keeps every put's and get's request in the target window's list until a flush
     * from its origin, a barrier, MPI_Win_unlock_all or MPI_Win_free retires them, by a waitall
     * that is O(n^2) in SimGrid (a waitany over all of them for each): for the whole run's puts
     * (gpt-tiny's eventgrad over 100 Mbit/s: 16,000 a rank in 60 steps) that took minutes of
     * wall time at the end, hours for 500 steps; and flushing a neighbour retires its puts to
     * this rank too, waiting for those in flight (the simulated time of a step 5x). Every put
     * is done once the ranks agree here: the window is left to the simulation's end, unfreed. */
    err = MPI_Allreduce(MPI_IN_PLACE, &(int){0}, 1, MPI_INT, MPI_MAX, c->comm);
    if (st == DT_OK) st = dt_mpi_check(err, "MPI_Allreduce (the window's end)");
#else
    err = MPI_Win_unlock_all(w->win);
    if (st == DT_OK) st = dt_mpi_check(err, "MPI_Win_unlock_all");
    err = MPI_Win_free(&w->win); /* collective: returns once nobody accesses the window */
    if (st == DT_OK) st = dt_mpi_check(err, "MPI_Win_free");
    MPI_Free_mem(w->base);
#endif
    if (w->pcomm != MPI_COMM_NULL) MPI_Comm_free(&w->pcomm);
    win_release(w);
    c->c.t_comm += dt_now() - t0;
    return st;
}
