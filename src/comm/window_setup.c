/* The one-sided transport's window, made and ended (window.h): its tables and layout, the
 * neighbours' slots agreed, the window memory and its one passive-target epoch; at the end the
 * epoch closed and the window freed. The protocol on it is window.c's. See docs/transport.md. */
#include "comm/window_state.h"
#include "core/alloc.h"
#include "core/sim.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static void win_release(dt_win *w) {
    if (!w) return;
    free(w->nbrs); free(w->peer_slot); free(w->boff); free(w->cap);
    free(w->sent); free(w->last); free(w->hdr_out); free(w->scratch); free(w->stage);
    free(w->stage2); free(w->which); free(w->pend); free(w->req); free(w->stat); free(w->round_bytes);
    free(w->probe); free(w->probe_want);
    free(w->soff); free(w->pack); /* the simulation build's (NULL in the ordinary one) */
    free(w);
}

/* A new window's fields and tables (w from calloc); 0 when a table could not be had. */
static int win_tables(dt_win *w, dt_comm *c, int nnbrs, int ntensors, int floats) {
    const size_t k_cap = nnbrs ? (size_t)nnbrs : 1;
    w->c = c;
    w->win = MPI_WIN_NULL;
    w->win_lower = MPI_WIN_NULL;
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
    return w->nbrs && w->peer_slot && w->boff && w->cap && w->sent && w->last && w->hdr_out;
}

/* Float layout: tensor t is floats [off[t], off[t] + len[t]) of an n-float slot; `room` bytes
 * a slot at most. */
static dt_status layout_floats(dt_win *w, size_t n, const size_t *tensor_off, const size_t *tensor_len, size_t room) {
    dt_status st = DT_OK;
    for (int t = 0; t < w->T; t++) {
        w->boff[t] = tensor_off[t] * sizeof(float);
        w->cap[t] = tensor_len[t] * sizeof(float);
        if (tensor_len[t] > (size_t)INT_MAX && st == DT_OK)
            st = dt_fail(DT_ERR_ARG, "dt_win_create: tensor %d has %zu floats, more than one "
                         "MPI_Put can carry (%d)", t, tensor_len[t], INT_MAX);
    }
    if (st == DT_OK && w->nnbrs && n > room / sizeof(float))
        st = dt_fail(DT_ERR_ARG, "dt_win_create: %d slots of %zu floats do not fit one window", w->nnbrs, n);
    w->slot_bytes = n * sizeof(float);
    return st;
}

/* Byte layout: tensor t has len[t] bytes at the running sum of the capacities before it, and a
 * slot (`room` bytes at most) is the sum of them all. */
static dt_status layout_bytes(dt_win *w, const size_t *tensor_len, size_t room) {
    dt_status st = DT_OK;
    size_t sum = 0;
    for (int t = 0; t < w->T && st == DT_OK; t++) {
        w->boff[t] = sum;
        w->cap[t] = tensor_len[t];
        if (tensor_len[t] > (size_t)INT_MAX)
            st = dt_fail(DT_ERR_ARG, "dt_win_create_bytes: tensor %d has %zu bytes, more than "
                         "one MPI_Put can carry (%d)", t, tensor_len[t], INT_MAX);
        else if (tensor_len[t] > room - sum)
            st = dt_fail(DT_ERR_ARG, "dt_win_create_bytes: %d slots of more than %zu bytes do "
                         "not fit one window", w->nnbrs, sum);
        else
            sum += tensor_len[t];
    }
    w->slot_bytes = sum;
    return st;
}

/* The simulation build's layout: each tensor's header just before its data, at 8-byte places
 * (dt_win_put_msg), and the buffer its puts go out from. */
static dt_status layout_sim(dt_win *w) {
    const size_t k_cap = w->nnbrs ? (size_t)w->nnbrs : 1;
    if (!(w->soff = malloc((size_t)w->T * sizeof *w->soff))) return dt_nomem("dt_win_create's tables");
    for (int t = 0; t < w->T; t++) {
        w->soff[t] = w->stride;
        w->stride += HDR_BYTES + ((w->cap[t] + 7) & ~(size_t)7);
    }
    if (!(w->pack = malloc(k_cap * w->stride + 1)))
        return dt_nomem("dt_win_create's %zu-byte send buffers", k_cap * w->stride);
    return DT_OK;
}

/* The layout of both kinds (float layout when tensor_off is given) and the buffers it needs. */
static dt_status win_layout(dt_win *w, const int *nbrs, size_t n, const size_t *tensor_off,
                            const size_t *tensor_len) {
    memcpy(w->nbrs, nbrs, (size_t)w->nnbrs * sizeof *nbrs);
    w->hdr_region = (size_t)w->nnbrs * (size_t)w->T * HDR_BYTES;
    /* window bytes = headers + nnbrs slots; must fit MPI_Aint */
    const size_t room = ((size_t)PTRDIFF_MAX - w->hdr_region) / (w->nnbrs ? (size_t)w->nnbrs : 1);
    dt_status st = tensor_off ? layout_floats(w, n, tensor_off, tensor_len, room) : layout_bytes(w, tensor_len, room);
    for (int t = 0; t < w->T; t++)
        if (w->cap[t] > w->maxcap) w->maxcap = w->cap[t];
    if (st == DT_OK) {
        w->scratch = malloc(w->maxcap ? w->maxcap : 1);
        w->stage = malloc(w->slot_bytes ? w->slot_bytes : 1);
        if (!w->scratch || !w->stage)
            st = dt_nomem("dt_win_create's %zu-byte read and send buffers", w->maxcap + w->slot_bytes);
    }
    if (DT_SIM_BUILD && st == DT_OK) st = layout_sim(w);
    return st;
}

/* Where am I in each neighbour's list? mypos[j] = position of j in my list or -1; after the
 * exchange theirpos[j] = position of me in j's list or -1. The graph must be symmetric. */
static dt_status win_slots(dt_win *w, const int *nbrs, int *mypos, int *theirpos) {
    const dt_comm *c = w->c;
    dt_status st = DT_OK;
    for (int j = 0; j < c->size; j++) mypos[j] = -1;
    for (int k = 0; k < w->nnbrs; k++) mypos[nbrs[k]] = k;
    const int err = MPI_Alltoall(mypos, 1, MPI_INT, theirpos, 1, MPI_INT, c->comm);
    if (err != MPI_SUCCESS) st = dt_mpi_check(err, "MPI_Alltoall (window slots)");
    for (int j = 0; j < c->size && st == DT_OK; j++) {
        if (j == c->rank || (mypos[j] >= 0) == (theirpos[j] >= 0)) continue;
        int from = mypos[j] >= 0 ? c->rank : j, to = mypos[j] >= 0 ? j : c->rank;
        st = dt_fail(DT_ERR_ARG, "dt_win_create: neighbour lists are not symmetric: rank %d "
                     "lists rank %d but not the other way round", from, to);
    }
    for (int k = 0; k < w->nnbrs && st == DT_OK; k++) w->peer_slot[k] = theirpos[nbrs[k]];
    return st;
}

/* The window memory, zeroed, and its epoch open at every rank. */
static dt_status win_open(dt_win *w) {
    dt_comm *c = w->c;
    const MPI_Aint bytes = (MPI_Aint)(DT_SIM_BUILD ? (size_t)w->nnbrs * w->stride
                                                   : w->hdr_region + (size_t)w->nnbrs * w->slot_bytes);
    void *base = NULL;
    /* MPI_Alloc_mem + MPI_Win_create, not MPI_Win_allocate: Debian's MPICH 4.0.2 (ch4:ucx)
     * maps displacements 8 bytes short in windows of MPI_Win_allocate above some size (seen
     * with cnn1's 154 kB window: every put landed 8 bytes early, over the last header). */
    int err = MPI_Alloc_mem(bytes ? bytes : 8, MPI_INFO_NULL, &base);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Alloc_mem (window memory)");
    err = MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, c->comm, &w->win);
    if (err != MPI_SUCCESS) {
        MPI_Free_mem(base);
        return dt_mpi_check(err, "MPI_Win_create");
    }
    w->base = base;
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    if (bytes) memset(w->base, 0, (size_t)bytes); /* all sequence numbers 0: nothing written */

    /* One epoch for the whole run; NOCHECK: no rank ever takes a conflicting lock. */
    err = MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win);
    if (DT_SIM_BUILD) {
        /* the second window of the simulation build (win_to); never freed, as the first (dt_win_free) */
        if (err == MPI_SUCCESS) err = MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, c->comm, &w->win_lower);
        if (err == MPI_SUCCESS) MPI_Win_set_errhandler(w->win_lower, MPI_ERRORS_RETURN);
        if (err == MPI_SUCCESS) err = MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win_lower);
    }
    if (err == MPI_SUCCESS) err = dt_win_sync(w->win);
    if (err == MPI_SUCCESS) err = MPI_Comm_dup(c->comm, &w->pcomm);
    /* nobody puts before every window is zeroed */
    if (err == MPI_SUCCESS) err = MPI_Barrier(c->comm);
    if (err != MPI_SUCCESS) {
        const dt_status st = dt_mpi_check(err, "dt_win_create: opening the RMA epoch");
        MPI_Win_free(&w->win);
        MPI_Free_mem(base);
        return st;
    }
    return DT_OK;
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
    dt_win *w = calloc(1, sizeof *w);
    int *mypos = malloc((size_t)c->size * sizeof *mypos);
    int *theirpos = malloc((size_t)c->size * sizeof *theirpos);
    const int tables = w && win_tables(w, c, nnbrs, ntensors, floats);
    if (!tables || !mypos || !theirpos)
        st = dt_nomem("dt_win_create's tables");
    else
        st = win_layout(w, nbrs, n, tensor_off, tensor_len);

    /* Every rank must have its buffers before the exchange below. */
    if ((st = dt_comm_agree(c, st, "dt_win_create: another rank failed to set up its window")) != DT_OK) goto fail;
    st = win_slots(w, nbrs, mypos, theirpos);
    if ((st = dt_comm_agree(c, st, "dt_win_create: another rank failed to set up its window")) != DT_OK) goto fail;
    free(mypos);
    free(theirpos);
    mypos = theirpos = NULL;

    if ((st = win_open(w)) != DT_OK) goto fail;
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

/* The end of a window in the simulation build. SMPI 3.32 keeps every put's and get's request
 * in the target window's list until a flush from its origin, a barrier, MPI_Win_unlock_all or
 * MPI_Win_free retires them, by a waitall that is O(n^2) in SimGrid (a waitany over all of them
 * for each): for the whole run's puts (gpt-tiny's eventgrad over 100 Mbit/s: 16,000 a rank in
 * 60 steps) that took minutes of wall time at the end, hours for 500 steps; and flushing a
 * neighbour retires its puts to this rank too, waiting for those in flight (the simulated time
 * of a step 5x). Every put is done once the ranks agree here: the window is left to the
 * simulation's end, unfreed. */
static dt_status sim_win_end(dt_comm *c, dt_status st) {
    const int err = MPI_Allreduce(MPI_IN_PLACE, &(int){0}, 1, MPI_INT, MPI_MAX, c->comm);
    if (st == DT_OK) st = dt_mpi_check(err, "MPI_Allreduce (the window's end)");
    return st;
}

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
    if (DT_SIM_BUILD) {
        st = sim_win_end(c, st);
    } else {
        err = MPI_Win_unlock_all(w->win);
        if (st == DT_OK) st = dt_mpi_check(err, "MPI_Win_unlock_all");
        err = MPI_Win_free(&w->win); /* collective: returns once nobody accesses the window */
        if (st == DT_OK) st = dt_mpi_check(err, "MPI_Win_free");
        MPI_Free_mem(w->base);
    }
    if (w->pcomm != MPI_COMM_NULL) MPI_Comm_free(&w->pcomm);
    win_release(w);
    c->c.t_comm += dt_now() - t0;
    return st;
}
