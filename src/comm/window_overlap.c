/* The one-sided transport's overlap engine (dt_win_set_overlap): puts started, not waited for,
 * one round on the link at a time, newer values coalesced. The protocol itself (headers,
 * checks, the reader) is window.c's, unchanged. */
#include "comm/window_state.h"

#include "comm/watch.h"
#include "core/alloc.h"
#include "core/sim.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* With overlap on, a put call does not wait for the link: it leaves each tensor's newest value
 * in a staging copy and starts a round of puts (MPI_Rput) when none is in flight; every later
 * call into the window (a put, dt_win_progress) lets MPI move the round along, and once it has
 * arrived, starts the next with what waited. A round is in flight until each neighbour's
 * window shows it: after its puts, the rank reads back (MPI_Rget, 16 bytes) the header of the
 * round's last tensor in its slot at the neighbour, and the round has arrived when that header
 * holds the sequence number just sent (otherwise the read is made again). Completing the
 * puts locally is not enough: their bytes would only be queued in the socket's buffers, and a
 * link offered more than it carries delivers everything late. So at most one round is on the
 * link, a tensor asked for again while it waits is coalesced (the newer value replaces the
 * one waiting, counted, never sent), and what goes out is always the newest value. The
 * reader's check (hash and sequence) is unchanged. */

static dt_status overlap_alloc(dt_win *w) {
    const size_t nn = (size_t)(w->nnbrs ? w->nnbrs : 1), nreq = 2 * (size_t)w->T * nn + nn;
    w->stage2 = malloc(w->slot_bytes ? w->slot_bytes : 1);
    w->which = calloc((size_t)w->T, 1);
    w->pend = calloc((size_t)w->T, sizeof *w->pend);
    w->req = malloc(nreq * sizeof *w->req);
    w->stat = malloc(nreq * sizeof *w->stat);
    w->probe = calloc(2 * nn, sizeof *w->probe);
    w->probe_want = calloc(nn, sizeof *w->probe_want);
    w->round_bytes = calloc((size_t)w->T, sizeof *w->round_bytes);
    if (!w->stage2 || !w->which || !w->pend || !w->req || !w->stat || !w->probe || !w->probe_want || !w->round_bytes)
        return dt_nomem("dt_win_set_overlap's %zu bytes of second copies", w->slot_bytes);
    for (size_t i = 0; i < nreq; i++) w->req[i] = MPI_REQUEST_NULL;
    w->probe_t = -1;
    return DT_OK;
}

dt_status dt_win_set_overlap(dt_win *w, int on, int max_lag) {
    assert(w && (!on || max_lag >= 1));
    w->max_lag = max_lag;
    if (!on) {
        dt_status st = dt_win_complete(w);
        w->overlap = 0;
        return st;
    }
    if (!w->req) {
        dt_status st = overlap_alloc(w);
        if (st != DT_OK) return st;
    }
    w->overlap = 1;
    return DT_OK;
}

static unsigned char *copy_of(const dt_win *w, int t, int which) {
    return (which ? w->stage2 : w->stage) + w->boff[t];
}

/* What a read-back's sequence word holds until its bytes land (no write of a run reaches it). */
#define PROBE_PENDING UINT64_MAX

/* The read-back of neighbour k's slot header for the round's last tensor. */
static int start_probe(dt_win *w, int k) {
    MPI_Request *pq = dt_win_probe_req(w, k);
    w->st.probes++;
    if (DT_SIM_BUILD) w->probe[2 * k] = PROBE_PENDING; /* sim_testall */
    return MPI_Rget(w->probe + 2 * k, 2, MPI_UINT64_T, w->nbrs[k], hdr_disp(w, w->peer_slot[k], w->probe_t), 2,
                    MPI_UINT64_T, win_to(w, w->nbrs[k]), pq);
}

/* Starts a round: every tensor waiting, from its staging copy, to every neighbour; then the
 * read-backs. */
static dt_status start_round(dt_win *w) {
    int err = MPI_SUCCESS, last = -1;
    for (int t = 0; t < w->T && err == MPI_SUCCESS; t++) {
        if (!w->pend[t]) continue;
        const size_t bytes = w->pend[t] - 1;
        const int which = !w->which[t];
        const unsigned char *from = copy_of(w, t, which);
        const uint64_t h = dt_hash64(from, bytes, 0);
        MPI_Request *rq = w->req + 2 * (size_t)t * (size_t)w->nnbrs;
        for (int k = 0; k < w->nnbrs && err == MPI_SUCCESS; k++) {
            const size_t idx = (size_t)k * (size_t)w->T + (size_t)t;
            uint64_t *hdr = w->hdr_out + 2 * idx;
            hdr[0] = ++w->sent[idx];
            hdr[1] = check_word(h, hdr[0]);
            if (DT_SIM_BUILD) {
                err = dt_win_put_msg(w, k, t, bytes, from, &rq[2 * k]);
            } else {
                const int target = w->nbrs[k], slot = w->peer_slot[k];
                err = dt_win_put_data(w, target, slot, t, bytes, from, &rq[2 * k]);
                if (err == MPI_SUCCESS)
                    err = MPI_Rput(hdr, 2, MPI_UINT64_T, target, hdr_disp(w, slot, t), 2, MPI_UINT64_T,
                                   win_to(w, target), &rq[2 * k + 1]);
            }
        }
        w->which[t] = (unsigned char)which;
        w->round_bytes[t] = w->pend[t];
        w->pend[t] = 0;
        /* the tensor whose header is read back: the last put (a real MPI's stream keeps their
         * order); in the simulation the largest, whose flow, started with the others on the
         * same links and sharing them fairly, ends last */
        if (last < 0 || !DT_SIM_BUILD || bytes >= w->round_bytes[last] - 1) last = t;
        dt_win_count_puts(w, w->nnbrs, bytes);
    }
    if (last < 0 || err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Rput (a round of puts)");
    w->probe_t = last;
    for (int k = 0; k < w->nnbrs && err == MPI_SUCCESS; k++) {
        w->probe_want[k] = w->sent[(size_t)k * (size_t)w->T + (size_t)last];
        err = start_probe(w, k);
    }
    w->in_flight = 1;
    w->round_call = w->calls;
    return dt_mpi_check(err, "MPI_Rget (has the round arrived?)");
}

/* The round in flight has arrived: its values are what the neighbours' windows show (the
 * copies it went from stay unchanged until the next round starts), so into the mirror. */
static void round_done(dt_win *w) {
    w->in_flight = 0;
    for (int t = 0; t < w->T; t++) {
        if (w->mirror && w->round_bytes[t] > 1) memcpy(w->mirror + w->boff[t], copy_of(w, t, w->which[t]), w->round_bytes[t] - 1);
        w->round_bytes[t] = 0;
    }
}

void dt_win_mirror_arrived(dt_win *w, void *mirror) {
    assert(w && w->overlap);
    w->mirror = mirror;
}

/* The simulation retires a round that arrived from the neighbours' windows (win_to): SMPI
 * keeps each put's receiving request there until a flush, and SimGrid's cost grows with them.
 * Every one of them is done, so the flushes wait for nothing. */
static dt_status sim_retire(dt_win *w) {
    if (!DT_SIM_BUILD) return DT_OK;
    return dt_mpi_check(dt_win_flush_nbrs(w), "MPI_Win_flush (a round that arrived)");
}

/* The simulation's MPI_Testall of a round's requests, which SimGrid 3.32 cannot be given: a test
 * that finds a request done retires it without taking it off the rank's list of activities
 * (ActivityImpl::test calls finish() with no simcall registered; a wait takes it off), and
 * every later computation and message of the rank walks that list. A read-back a round (two a
 * step at 16 hosts) piled up there: gpt-tiny's eventgrad, 16 hosts, spent most of its time
 * walking it by the end of 500 steps (5,600 left after 20 s at 2 hosts). The puts' requests are
 * done when made (SMPI sends one-sided puts detached); a read-back is done when its bytes have
 * landed, which SMPI does in the same instant as it completes the request, so the read-backs'
 * buffers say it (PROBE_PENDING until then), and a wait then retires every request at once,
 * blocking for nothing: the same answer at the same simulated instant as MPI_Testall's. The
 * wait hands the turn to SimGrid's scheduler, though, so ranks acting at that same instant may
 * go in another order: a run's numbers move a little, as another seed's would. */
static int sim_testall(dt_win *w, int n, int *done) {
    *done = 0;
    for (int k = 0; k < w->nnbrs; k++)
        if (*dt_win_probe_req(w, k) != MPI_REQUEST_NULL && w->probe[2 * k] == PROBE_PENDING)
            return MPI_SUCCESS;
    *done = 1;
    return MPI_Waitall(n, w->req, w->stat);
}

/* Has the round in flight arrived (its puts done, every neighbour's header read back)? Lets
 * MPI progress; makes a read-back again where it came back older. */
static dt_status round_arrived(dt_win *w, int *arrived) {
    *arrived = 1;
    if (!w->in_flight) return DT_OK;
    const int n = dt_win_nreq(w);
    int done = 0;
    int err = DT_SIM_BUILD ? sim_testall(w, n, &done) : MPI_Testall(n, w->req, &done, w->stat);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Testall (puts in flight)");
    if (!done) { *arrived = 0; return DT_OK; }
    for (int k = 0; k < w->nnbrs; k++) {
        if (w->probe[2 * k] >= w->probe_want[k]) continue;
        *arrived = 0;
        if ((err = start_probe(w, k)) != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Rget (has the round arrived?)");
    }
    if (*arrived) {
        round_done(w);
        return sim_retire(w);
    }
    return DT_OK;
}

static int anything_waits(const dt_win *w) {
    for (int t = 0; t < w->T; t++)
        if (w->pend[t]) return 1;
    return 0;
}

/* Retires the round that arrived, and starts the next with what waits. */
dt_status dt_win_overlap_advance(dt_win *w) {
    int arrived;
    dt_status st = round_arrived(w, &arrived);
    if (st == DT_OK && arrived && anything_waits(w)) st = start_round(w);
    return st;
}

/* Waits until the round in flight has arrived: spinning, so that MPI progresses. The simulation
 * flushes each neighbour instead, which blocks until every put of the round has landed: a spin
 * costs no simulated time, so SimGrid's clock stood still while it waited for puts that need
 * time to arrive (comm/sim_poll.h), and a read-back made again at each turn stayed in SimGrid's
 * lists until the round's flush (16 hosts at 100 Mbit/s, computing a step faster than their
 * link carries it: thousands a round). It knows of the arrival at once, where a real rank's
 * next read-back does, a round trip later at most. */
static dt_status wait_round(dt_win *w) {
    dt_status st = DT_OK;
    dt_watch_wait_begin("a round of one-sided puts (--max-lag)");
    if (DT_SIM_BUILD) {
        int err = MPI_Waitall(dt_win_nreq(w), w->req, w->stat);
        if (err == MPI_SUCCESS) err = dt_win_flush_nbrs(w);
        st = dt_mpi_check(err, "MPI_Win_flush (a round of puts)");
        if (st == DT_OK) round_done(w);
        dt_watch_wait_end();
        return st;
    }
    const double deadline = dt_now() + 120.0;
    for (int arrived = 0; st == DT_OK && !arrived;) {
        st = round_arrived(w, &arrived);
        if (st == DT_OK && !arrived && dt_now() > deadline)
            st = dt_fail(DT_ERR_MPI, "one-sided puts to rank %d and the other neighbours did not arrive within 120 s",
                         w->nnbrs ? w->nbrs[0] : -1);
    }
    dt_watch_wait_end();
    return st;
}

dt_status dt_win_put_overlapped(dt_win *w, const int *ts, int nt, const void *const *src, const size_t *nbytes,
                                const unsigned char *x) {
    double t0 = dt_now();
    w->calls++;
    /* bounded staleness: a round that has been on its way for max_lag calls is waited for */
    dt_status st = DT_OK;
    if (w->in_flight && w->calls - w->round_call >= (uint64_t)w->max_lag) st = wait_round(w);
    for (int i = 0; i < nt && st == DT_OK; i++) {
        const int t = ts[i];
        const size_t bytes = x ? w->cap[t] : nbytes[i];
        const void *from = x ? (const void *)(x + w->boff[t]) : src[i];
        if (w->pend[t]) w->st.coalesced++; /* this newer value replaces the one waiting */
        /* the copy the last put did not go from: free, whether or not that put is in flight */
        if (bytes) memcpy(copy_of(w, t, !w->which[t]), from, bytes);
        w->pend[t] = bytes + 1;
    }
    if (st == DT_OK) st = dt_win_overlap_advance(w);
    w->c->c.t_comm += dt_now() - t0;
    return st;
}

dt_status dt_win_complete(dt_win *w) {
    assert(w);
    if (!w->req) return DT_OK;
    double t0 = dt_now();
    const double deadline = t0 + 120.0;
    dt_status st = DT_OK;
    while (st == DT_OK && (w->in_flight || anything_waits(w))) {
        st = w->in_flight ? wait_round(w) : dt_win_overlap_advance(w);
        if (st == DT_OK && dt_now() > deadline)
            st = dt_fail(DT_ERR_MPI, "one-sided puts to rank %d and the other neighbours did not arrive within 120 s",
                         w->nnbrs ? w->nbrs[0] : -1);
    }
    w->c->c.t_comm += dt_now() - t0;
    return st;
}
