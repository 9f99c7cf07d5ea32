/* The counted and timed calls of dtrain/comm.h: every payload a scheme sends is counted here
 * (messages, bytes: docs/accounting.md), its time is communication time, and its span is on
 * the timeline (--trace); waits are seen by the watchdog. */
#include "comm/sim_coll.h"
#include "comm/trace.h"
#include "comm/watch.h"
#include "core/sim.h"
#include "dtrain/comm.h"

#include <assert.h>
#include <limits.h>

/* ------------------------------------------------------------------ timing and waiting */

double dt_comm_time_begin(dt_comm *c) { return c->timing++ == 0 ? dt_now() : 0; }

void dt_comm_time_end(dt_comm *c, double t0) {
    if (--c->timing == 0) c->c.t_comm += dt_now() - t0;
}

/* the open waits' span (nested waits are one) */
static double wait_t0;
static int wait_depth;

void dt_wait_begin(dt_comm *c, const char *what) {
    dt_watch_wait_begin(what);
    const double t0 = dt_comm_time_begin(c);
    if (wait_depth++ == 0) wait_t0 = t0;
}

void dt_wait_end(dt_comm *c) {
    if (--wait_depth == 0) dt_comm_time_end(c, wait_t0);
    else dt_comm_time_end(c, 0);
    dt_watch_wait_end();
}

/* GCC reads MPICH's MPI_STATUSES_IGNORE ((MPI_Status *)1) as an array of no room */
#if defined(__GNUC__) && !defined(__clang__) /* clang has no such warning (and -Werror refuses the name) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
dt_status dt_wait_all(dt_comm *c, int n, MPI_Request *req, const char *what) {
    const double t0 = dt_comm_time_begin(c);
    int err = n > 0 ? MPI_Waitall(n, req, MPI_STATUSES_IGNORE) : MPI_SUCCESS; /* the watchdog times it (pmpi.c) */
    if (DT_SIM_BUILD && err == MPI_SUCCESS) { /* the simulation's own sums (sim_coll.h) */
        const dt_status st = dt_sim_iallreduce_progress(c, 1);
        if (st != DT_OK) { dt_comm_time_end(c, t0); return st; }
    }
    dt_comm_time_end(c, t0);
    return dt_mpi_check(err, what);
}

dt_status dt_probe_any(dt_comm *c, int *flag, dt_probed *m, MPI_Status *status) {
    const double t0 = dt_comm_time_begin(c);
    /* the simulation has no matched probes (dtrain/comm.h): a probe, then a receive by source and tag */
    const int err = DT_SIM_BUILD ? MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, flag, status)
                                 : MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, flag, &m->msg, status);
    if (DT_SIM_BUILD) m->msg = MPI_MESSAGE_NULL;
    if (err == MPI_SUCCESS && *flag) m->source = status->MPI_SOURCE, m->tag = status->MPI_TAG;
    const char *what = DT_SIM_BUILD ? "MPI_Iprobe" : "MPI_Improbe";
    dt_comm_time_end(c, t0);
    return dt_mpi_check(err, what);
}

dt_status dt_recv_probed(dt_comm *c, void *buf, int count, dt_probed *m) {
    const double t0 = dt_comm_time_begin(c);
    const int err = DT_SIM_BUILD ? MPI_Recv(buf, count, MPI_BYTE, m->source, m->tag, c->comm, MPI_STATUS_IGNORE)
                                 : MPI_Mrecv(buf, count, MPI_BYTE, &m->msg, MPI_STATUS_IGNORE);
    const char *what = DT_SIM_BUILD ? "MPI_Recv (probed)" : "MPI_Mrecv";
    dt_comm_time_end(c, t0);
    return dt_mpi_check(err, what);
}

dt_status dt_irecv_probed(dt_comm *c, void *buf, int count, dt_probed *m, MPI_Request *req) {
    const double t0 = dt_comm_time_begin(c);
    /* simulated: received at once, the request done: no simulated process freezes midway, and
     * polling SMPI's MPI_Test costs simulated time at every call (a simulated downpour took 60 s) */
    const int err = DT_SIM_BUILD ? MPI_Recv(buf, count, MPI_BYTE, m->source, m->tag, c->comm, MPI_STATUS_IGNORE)
                                 : MPI_Imrecv(buf, count, MPI_BYTE, &m->msg, req);
    if (DT_SIM_BUILD) *req = MPI_REQUEST_NULL;
    const char *what = DT_SIM_BUILD ? "MPI_Recv (probed)" : "MPI_Imrecv";
    dt_comm_time_end(c, t0);
    return dt_mpi_check(err, what);
}

dt_status dt_test_all(dt_comm *c, int n, MPI_Request *req, int *done, const char *what) {
    const double t0 = dt_comm_time_begin(c);
    *done = 1;
    const int err = n > 0 ? MPI_Testall(n, req, done, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    if (DT_SIM_BUILD && err == MPI_SUCCESS) { /* the simulation's own sums (sim_coll.h) */
        const dt_status st = dt_sim_iallreduce_progress(c, 0);
        if (st != DT_OK) { dt_comm_time_end(c, t0); return st; }
    }
    dt_comm_time_end(c, t0);
    return dt_mpi_check(err, what);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* ------------------------------------------------------------------ counted collectives */

/* MPI counts are int: large buffers go in chunks. */
#define CHUNK ((size_t)1 << 28)

static void count_allreduce(dt_comm *c, size_t n) {
    if (c->size < 2) return;
    const uint64_t bytes = (uint64_t)n * sizeof(float);
    dt_count_send(c, 2 * (uint64_t)(c->size - 1), 2 * (uint64_t)(c->size - 1) * bytes / (uint64_t)c->size);
    dt_count_recv(c, 2 * (uint64_t)(c->size - 1), 2 * (uint64_t)(c->size - 1) * bytes / (uint64_t)c->size);
}

dt_status dt_allreduce_sum(dt_comm *c, float *buf, size_t n) {
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    /* simulated: a large sum as MPICH sums it, not as SMPI's MPI_Allreduce (sim_coll.h) */
    const int mpich = dt_sim_sums_as_mpich(c, n, n * sizeof(float));
    if (mpich) {
        dt_status st = dt_sim_iallreduce_start(c, buf, n);
        if (st == DT_OK) st = dt_sim_iallreduce_progress(c, 1);
        if (st != DT_OK) { dt_comm_time_end(c, t0); return st; }
    }
    for (size_t off = 0; !mpich && off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        int err = MPI_Allreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, MPI_SUM, c->comm);
        if (err != MPI_SUCCESS) { dt_comm_time_end(c, t0); return dt_mpi_check(err, "MPI_Allreduce"); }
    }
    count_allreduce(c, n);
    dt_comm_time_end(c, t0);
    dt_trace_event(DT_TRACE_COMM, "allreduce", tt, (int64_t)(n * sizeof(float)), -1, -1);
    return DT_OK;
}

dt_status dt_iallreduce_sum(dt_comm *c, float *buf, size_t n, MPI_Request *req) {
    assert(n <= (size_t)INT_MAX);
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_SUCCESS;
    if (DT_SIM_BUILD) {
        /* SMPI's own would lose the bucket (comm/sim_coll.h): ours, moved along by dt_test_all
         * and dt_wait_all, which see it as MPI_REQUEST_NULL */
        *req = MPI_REQUEST_NULL;
        dt_status sst = dt_sim_iallreduce_start(c, buf, n);
        if (sst != DT_OK) { dt_comm_time_end(c, t0); return sst; }
    } else {
        err = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm, req);
    }
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Iallreduce");
    count_allreduce(c, n);
    dt_trace_event(DT_TRACE_COMM, "iallreduce (start)", tt, (int64_t)(n * sizeof(float)), -1, -1);
    return DT_OK;
}

dt_status dt_allreduce_mean(dt_comm *c, float *buf, size_t n) {
    dt_status st = dt_allreduce_sum(c, buf, n);
    if (st != DT_OK) return st;
    const float inv = 1.0f / (float)c->size;
    for (size_t i = 0; i < n; i++) buf[i] *= inv;
    return DT_OK;
}

dt_status dt_reduce_sum(dt_comm *c, const float *buf, float *sum, size_t n) {
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_Reduce(buf, sum, (int)n, MPI_FLOAT, MPI_SUM, 0, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Reduce");
    uint64_t bytes = (uint64_t)n * sizeof(float);
    if (c->rank == 0) dt_count_recv(c, (uint64_t)(c->size - 1), (uint64_t)(c->size - 1) * bytes);
    else dt_count_send(c, 1, bytes);
    dt_trace_event(DT_TRACE_COMM, "reduce", tt, (int64_t)bytes, 0, -1);
    return DT_OK;
}

static dt_status bcast_floats(dt_comm *c, float *buf, size_t n, int root, const char *what) {
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        int err = MPI_Bcast(buf + off, cnt, MPI_FLOAT, root, c->comm);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, what);
    }
    return DT_OK;
}

dt_status dt_bcast_setup(dt_comm *c, float *buf, size_t n, int root, const char *what) {
    /* not a payload, but it crosses the links: as a broadcast from the root is counted */
    if (c->rank == root && c->size > 1) dt_count_other(c, (uint64_t)(c->size - 1) * n * sizeof(float));
    return bcast_floats(c, buf, n, root, what);
}

dt_status dt_bcast(dt_comm *c, float *buf, size_t n, int root) {
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    dt_status st = bcast_floats(c, buf, n, root, "MPI_Bcast");
    if (st != DT_OK) { dt_comm_time_end(c, t0); return st; }
    if (c->size > 1) {
        uint64_t bytes = (uint64_t)n * sizeof(float);
        if (c->rank == root) dt_count_send(c, (uint64_t)(c->size - 1), (uint64_t)(c->size - 1) * bytes);
        else dt_count_recv(c, 1, bytes);
    }
    dt_comm_time_end(c, t0);
    dt_trace_event(DT_TRACE_COMM, "bcast", tt, (int64_t)(n * sizeof(float)), root, -1);
    return DT_OK;
}

/* ------------------------------------------------------------------ encoded payloads */

static dt_status fits_int(size_t bytes, const char *what) {
    if (bytes > (size_t)INT_MAX)
        return dt_fail(DT_ERR_ARG, "%s: a payload of %zu bytes is too large for one MPI message", what, bytes);
    return DT_OK;
}

dt_status dt_allgather_bytes(dt_comm *c, const void *send, void *recv, size_t bytes) {
    dt_status st = fits_int(bytes, "MPI_Allgather");
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allgather");
    if (c->size > 1) {
        const uint64_t m = (uint64_t)(c->size - 1);
        dt_count_send(c, m, m * bytes);
        dt_count_recv(c, m, m * bytes);
    }
    dt_trace_event(DT_TRACE_COMM, "allgather", tt, (int64_t)bytes, -1, -1);
    return DT_OK;
}

dt_status dt_gather_bytes(dt_comm *c, const void *send, void *recv, size_t bytes) {
    dt_status st = fits_int(bytes, "MPI_Gather");
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, 0, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Gather");
    if (c->size > 1) {
        if (c->rank == 0) dt_count_recv(c, (uint64_t)(c->size - 1), (uint64_t)(c->size - 1) * bytes);
        else dt_count_send(c, 1, bytes);
    }
    dt_trace_event(DT_TRACE_COMM, "gather", tt, (int64_t)bytes, 0, -1);
    return DT_OK;
}

dt_status dt_bcast_bytes(dt_comm *c, void *buf, size_t bytes, int root) {
    dt_status st = fits_int(bytes, "MPI_Bcast");
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Bcast");
    if (c->size > 1) {
        if (c->rank == root) dt_count_send(c, (uint64_t)(c->size - 1), (uint64_t)(c->size - 1) * bytes);
        else dt_count_recv(c, 1, bytes);
    }
    dt_trace_event(DT_TRACE_COMM, "bcast", tt, (int64_t)bytes, root, -1);
    return DT_OK;
}

/* sum of counts[0..n), checked against MPI's int displacements */
static dt_status displacements(const int *counts, int n, int *displ, const char *what) {
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        displ[i] = (int)at;
        at += (size_t)counts[i];
        if (at > (size_t)INT_MAX) return fits_int(at, what);
    }
    return DT_OK;
}

dt_status dt_alltoallv_bytes(dt_comm *c, const void *send, const int *send_counts, int *send_displ, void *recv,
                             const int *recv_counts, int *recv_displ) {
    dt_status st = displacements(send_counts, c->size, send_displ, "MPI_Alltoallv");
    if (st == DT_OK) st = displacements(recv_counts, c->size, recv_displ, "MPI_Alltoallv");
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_Alltoallv(send, send_counts, send_displ, MPI_BYTE, recv, recv_counts, recv_displ, MPI_BYTE, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Alltoallv");
    uint64_t sent = 0, received = 0;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank) sent += (uint64_t)send_counts[r], received += (uint64_t)recv_counts[r];
    if (c->size > 1) {
        dt_count_send(c, (uint64_t)(c->size - 1), sent);
        dt_count_recv(c, (uint64_t)(c->size - 1), received);
    }
    dt_trace_event(DT_TRACE_COMM, "alltoallv", tt, (int64_t)sent, -1, -1);
    return DT_OK;
}

dt_status dt_allgatherv_bytes(dt_comm *c, const void *send, void *recv, const int *counts, int *displ) {
    dt_status st = displacements(counts, c->size, displ, "MPI_Allgatherv");
    if (st != DT_OK) return st;
    double t0 = dt_comm_time_begin(c), tt = dt_trace_t0();
    int err = MPI_Allgatherv(send ? send : MPI_IN_PLACE, counts[c->rank], MPI_BYTE, recv, counts, displ, MPI_BYTE, c->comm);
    dt_comm_time_end(c, t0);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allgatherv");
    if (c->size > 1) { /* a ring: every block but the successor's goes out, every block but ours comes in */
        uint64_t total = 0;
        for (int r = 0; r < c->size; r++) total += (uint64_t)counts[r];
        const uint64_t m = (uint64_t)(c->size - 1);
        dt_count_send(c, m, total - (uint64_t)counts[(c->rank + 1) % c->size]);
        dt_count_recv(c, m, total - (uint64_t)counts[c->rank]);
    }
    dt_trace_event(DT_TRACE_COMM, "allgatherv", tt, (int64_t)counts[c->rank], -1, -1);
    return DT_OK;
}
