/* The MPI profiling interface (MPI-3 section 14.2): libdtrain defines these MPI functions
 * itself, and each calls its PMPI_ twin, the MPI library's own, between dt_watch_wait_begin and
 * dt_watch_wait_end. So every blocking call, the library's and (linked with libdtrain) the
 * program's own, is a wait the watchdog can time (--timeout: a wait with no progress ends the
 * rank with a line naming the call, not a hang) and a span on --trace's MPI lane, without a
 * wrapper at any call site. What a program linking libdtrain gets from them is said in
 * include/dtrain.h ("MPI calls libdtrain intercepts"); keep the list there the same as here.
 *
 * Only calls that can wait on another rank are here; the non-blocking ones (MPI_Isend, MPI_Put,
 * MPI_Test*) return at once, and the spins on them mark their waits themselves.
 *
 * With more ranks on a host than it has cores (comm/pmpi.h), the waits for requests and the
 * point-to-point calls poll and give the core away between polls: MPI's own wait spins for
 * its whole time slice while the rank it waits for is not running (3 ranks on 2 cores, Zen 5:
 * cnn1's 40 steps in 0.5 s spinning, 0.2 s yielding). Collectives stay MPI's own:
 * their non-blocking twins may add in another order, and their sums must stay bit for bit. */
#include "comm/pmpi.h"

#include "comm/watch.h"
#include "core/sim.h"

#include <mpi.h>
#include <sched.h>

#define TIMED(name, call)            \
    do {                             \
        dt_watch_wait_begin(name);   \
        int rc_ = (call);            \
        dt_watch_wait_end();         \
        return rc_;                  \
    } while (0)

static int yielding = 0;

void dt_pmpi_yield_waits(int on) { yielding = on; }
int dt_pmpi_yielding(void) { return yielding; }

/* A request polled to completion, the core given away after the first few polls (a reply
 * that is on its way is taken without a system call). */
#define POLLS_BEFORE_YIELD 16
static int poll_one(MPI_Request *q, MPI_Status *s) {
    for (int polls = 0;; polls++) {
        int done = 0;
        const int rc = PMPI_Test(q, &done, s);
        if (rc != MPI_SUCCESS || done) return rc;
        if (polls >= POLLS_BEFORE_YIELD) sched_yield();
    }
}
static int poll_all(int n, MPI_Request q[], MPI_Status s[]) {
    for (int polls = 0;; polls++) {
        int done = 0;
        const int rc = PMPI_Testall(n, q, &done, s);
        if (rc != MPI_SUCCESS || done) return rc;
        if (polls >= POLLS_BEFORE_YIELD) sched_yield();
    }
}
static int wait_one(MPI_Request *q, MPI_Status *s) { return yielding ? poll_one(q, s) : PMPI_Wait(q, s); }
/* SMPI 3.32's MPI_Waitall waits for its requests one waitany at a time, each a simcall over
 * every request still pending: O(n^2) for eventgrad's rounds of hundreds of puts (gpt-tiny at
 * 100 Mbit/s took 3.7 s of wall time a step, most of it in SimGrid's waitany). Each request in
 * turn comes to the same end, every one done with the simulated clock where the last finished,
 * in O(n). */
static int sim_wait_all(int n, MPI_Request q[], MPI_Status s[]) {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        const int r = PMPI_Wait(&q[i], s == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &s[i]);
        if (r != MPI_SUCCESS && rc == MPI_SUCCESS) rc = r;
    }
    return rc;
}
/* (the simulation's ranks do not share cores: no yielding there) */
static int wait_all(int n, MPI_Request q[], MPI_Status s[]) {
    if (DT_SIM_BUILD) return sim_wait_all(n, q, s);
    return yielding ? poll_all(n, q, s) : PMPI_Waitall(n, q, s);
}
static int send_waiting(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
    if (!yielding) return PMPI_Send(b, n, t, dest, tag, c);
    MPI_Request q;
    const int rc = PMPI_Isend(b, n, t, dest, tag, c, &q);
    return rc == MPI_SUCCESS ? poll_one(&q, MPI_STATUS_IGNORE) : rc;
}
static int recv_waiting(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *s) {
    if (!yielding) return PMPI_Recv(b, n, t, src, tag, c, s);
    MPI_Request q;
    const int rc = PMPI_Irecv(b, n, t, src, tag, c, &q);
    return rc == MPI_SUCCESS ? poll_one(&q, s) : rc;
}

DT_API int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    TIMED("MPI_Allreduce", PMPI_Allreduce(s, r, n, t, op, c));
}
DT_API int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
    TIMED("MPI_Reduce", PMPI_Reduce(s, r, n, t, op, root, c));
}
DT_API int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) { TIMED("MPI_Bcast", PMPI_Bcast(b, n, t, root, c)); }
DT_API int MPI_Barrier(MPI_Comm c) { TIMED("MPI_Barrier", PMPI_Barrier(c)); }
DT_API int MPI_Gather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
    TIMED("MPI_Gather", PMPI_Gather(s, sn, st, r, rn, rt, root, c));
}
DT_API int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    TIMED("MPI_Allgather", PMPI_Allgather(s, sn, st, r, rn, rt, c));
}
DT_API int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    TIMED("MPI_Alltoall", PMPI_Alltoall(s, sn, st, r, rn, rt, c));
}
DT_API int MPI_Wait(MPI_Request *q, MPI_Status *s) { TIMED("MPI_Wait", wait_one(q, s)); }
DT_API int MPI_Waitall(int n, MPI_Request q[], MPI_Status s[]) { TIMED("MPI_Waitall", wait_all(n, q, s)); }
DT_API int MPI_Win_flush(int rank, MPI_Win w) { TIMED("MPI_Win_flush", PMPI_Win_flush(rank, w)); }
DT_API int MPI_Win_flush_all(MPI_Win w) { TIMED("MPI_Win_flush_all", PMPI_Win_flush_all(w)); }
DT_API int MPI_Win_free(MPI_Win *w) { TIMED("MPI_Win_free", PMPI_Win_free(w)); }
DT_API int MPI_Win_create(void *b, MPI_Aint size, int unit, MPI_Info info, MPI_Comm c, MPI_Win *w) {
    TIMED("MPI_Win_create", PMPI_Win_create(b, size, unit, info, c, w));
}
DT_API int MPI_Win_lock_all(int a, MPI_Win w) { TIMED("MPI_Win_lock_all", PMPI_Win_lock_all(a, w)); }
DT_API int MPI_Win_unlock_all(MPI_Win w) { TIMED("MPI_Win_unlock_all", PMPI_Win_unlock_all(w)); }
DT_API int MPI_Comm_dup(MPI_Comm c, MPI_Comm *n) { TIMED("MPI_Comm_dup", PMPI_Comm_dup(c, n)); }
DT_API int MPI_Comm_create_group(MPI_Comm c, MPI_Group g, int tag, MPI_Comm *n) {
    TIMED("MPI_Comm_create_group", PMPI_Comm_create_group(c, g, tag, n));
}
DT_API int MPI_Send(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
    TIMED("MPI_Send", send_waiting(b, n, t, dest, tag, c));
}
DT_API int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *s) {
    TIMED("MPI_Recv", recv_waiting(b, n, t, src, tag, c, s));
}
DT_API int MPI_Finalize(void) { TIMED("MPI_Finalize", PMPI_Finalize()); }
