/* One-sided parameter transport: one window per rank, one passive-target epoch for the whole
 * run, a {sequence, check} header per (slot, tensor); a read is accepted only when the copied
 * data hashes to the header's check. See window.h and docs/transport.md. The window's making
 * and its end are window_setup.c's. */
#include "comm/trace.h"
#include "comm/window_state.h"
#include "core/sim.h"

#include <assert.h>
#include <limits.h>
#include <string.h>

/* The header of tensor t for neighbour k (its sequence number and check word) into k's slot;
 * the simulation sends it with the data instead (dt_win_put_msg). */
static int put_header(dt_win *w, int k, int t) {
    const uint64_t *hdr = w->hdr_out + 2 * ((size_t)k * (size_t)w->T + (size_t)t);
    return MPI_Put(hdr, 2, MPI_UINT64_T, w->nbrs[k], hdr_disp(w, w->peer_slot[k], t), 2, MPI_UINT64_T,
                   win_to(w, w->nbrs[k]));
}

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
    const char *what = "MPI_Put (tensor and header)";
    int err;
    if (DT_SIM_BUILD) {
        err = dt_win_put_msg(w, k, t, bytes, stage, NULL);
    } else {
        what = "MPI_Put (tensor data)";
        err = dt_win_put_data(w, target, slot, t, bytes, stage, NULL);
        if (err == MPI_SUCCESS) {
            what = "MPI_Put (header)";
            err = put_header(w, k, t);
        }
    }
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
            if (DT_SIM_BUILD) {
                err = dt_win_put_msg(w, k, t, bytes, w->stage + w->boff[t], NULL);
            } else {
                err = dt_win_put_data(w, w->nbrs[k], w->peer_slot[k], t, bytes, w->stage + w->boff[t], NULL);
                if (err == MPI_SUCCESS) err = put_header(w, k, t);
            }
        }
    }
    if (err == MPI_SUCCESS && DT_SIM_BUILD) {
        what = "MPI_Win_flush";
        err = dt_win_flush_nbrs(w);
    } else if (err == MPI_SUCCESS) {
        what = "MPI_Win_flush_all";
        err = MPI_Win_flush_all(w->win);
        w->st.flushes++;
    }
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
    int err = dt_win_sync(w->win);
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
    dt_win_sync(w->win);
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
