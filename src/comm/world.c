/* MPI_COMM_WORLD for dtrain (world.h): started and ended once a process, errors of MPI as
 * dt_status, an error of some ranks agreed by all. The counted calls are counted.c's. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "comm/world.h"

#include "comm/pmpi.h"
#include "core/sim.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int we_initialised = 0;

dt_status dt_mpi_check(int err, const char *what) {
    if (err == MPI_SUCCESS) return DT_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return dt_fail(DT_ERR_MPI, "%s failed: %.*s", what, len, msg);
}

/* Ranks that share cores wait by yielding them (comm/pmpi.h): this host's ranks against the
 * cores this process may run on. DTRAIN_WAIT=spin or =yield chooses. (Not in the simulation:
 * its hosts are simulated, and its time is SimGrid's.) */
static int choose_waits(MPI_Comm comm, int rank) {
    if (DT_SIM_BUILD) return MPI_SUCCESS;
    const char *want = getenv("DTRAIN_WAIT");
    if (want && (strcmp(want, "spin") == 0 || strcmp(want, "yield") == 0)) {
        dt_pmpi_yield_waits(want[0] == 'y');
        return MPI_SUCCESS;
    }
    if (want && *want && rank == 0) /* (said once for the job) */
        fprintf(stderr, "dtrain: warning: DTRAIN_WAIT=%s: expected spin or yield; chosen by the cores\n", want);
    MPI_Comm node;
    int err = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), local = 1;
    if (err != MPI_SUCCESS) return err;
    err = MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    cpu_set_t cpus;
    const int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
    dt_pmpi_yield_waits(cores > 0 && local > cores);
    return err;
}

dt_status dt_comm_init(int *argc, char ***argv, dt_comm *c) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        int provided;
        int err = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (err != MPI_SUCCESS) return dt_fail(DT_ERR_MPI, "MPI_Init_thread failed");
        we_initialised = 1;
        /* errors come back as codes, so they become one-line messages, not aborts */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    c->comm = MPI_COMM_WORLD;
    c->c = (dt_counters){0};
    c->timing = 0;
    int err = MPI_Comm_rank(c->comm, &c->rank);
    if (err == MPI_SUCCESS) err = MPI_Comm_size(c->comm, &c->size);
    c->world_ranks = NULL;
    c->world_size = c->size;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Comm_rank/MPI_Comm_size");
    if (c->size > 1) err = choose_waits(c->comm, c->rank);
    return dt_mpi_check(err, "MPI_Comm_split_type (this host's ranks)");
}

/* A barrier, then a pause with no MPI call, then MPI_Finalize (docs/transport.md, "Finalize
 * across hosts"). MPICH 4.0.2's UCX netmod closes every endpoint in MPI_Finalize, spins until
 * the closes complete and only then waits in the process manager's barrier, where it runs no
 * UCX progress. Over UCX's tcp transport a close sends the peer a zero-length put request and
 * completes on the peer's ack, which the peer sends only from UCX progress. A rank still in an
 * MPI call when a peer's request came acked it before sending its own, so the peer finished
 * and parked in that barrier, and the late rank's closes were never acked: rank 0, last to
 * finish (it writes the log, summary and weights), spun in MPI_Finalize for ever. After the
 * barrier no rank calls MPI, so none acks early; the pause outlasts the skew with which the
 * ranks leave the barrier, so every rank has sent its requests before any arrives. Only with
 * ranks on other hosts: between ranks on one host MPICH uses shared memory, no UCX endpoint. */
#define FINALIZE_PAUSE_S 0.5

void dt_comm_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!we_initialised || fin) return;
    int size = 1, local = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) {
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_size(node, &local);
            MPI_Comm_free(&node);
        }
        int remote = local < size, any = remote;
        /* the barrier, which also tells every rank whether any rank is on another host */
        MPI_Allreduce(&remote, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            struct timespec ts = {0, (long)(FINALIZE_PAUSE_S * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    MPI_Finalize();
}

dt_status dt_comm_agree(const dt_comm *c, dt_status st, const char *other) {
    if (c->size == 0) return st; /* MPI itself did not start */
    int bad = st != DT_OK, any = 0;
    int err = MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, c->comm);
    if (st != DT_OK) return st;
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (agreeing on an error)");
    if (any) return dt_fail(DT_ERR_STATE, "%s", other);
    return DT_OK;
}
