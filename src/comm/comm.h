/* The communication context every distributed scheme uses: the MPI communicator, this rank,
 * and the counters of what this rank sent and received.
 *
 * Accounting (docs/accounting.md): a message is one payload handed to MPI for one peer: one
 * MPI_Put, one MPI_Send/Isend. Collectives are counted as the point-to-point messages a
 * standard implementation sends from this rank: allreduce of B bytes = 2(N-1) messages and
 * 2(N-1)/N*B bytes (ring); broadcast from root = N-1 messages of B bytes at the root; gather
 * = one message of B bytes from each non-root. Bytes are payload bytes as they travel (after
 * compression). Every call site counts through dt_count_send / dt_count_recv. */
#ifndef DT_COMM_H
#define DT_COMM_H

#include <mpi.h>
#include <stdint.h>

#include "dtrain.h"

typedef struct dt_counters {
    uint64_t msgs_sent, bytes_sent;
    uint64_t msgs_recv, bytes_recv;
    uint64_t baseline_msgs;    /* what this rank would send communicating every tensor every step */
    uint64_t fresh_recv;       /* tensors received that were new when read (one-sided schemes) */
    uint64_t overwritten;      /* tensors sent to us that were replaced before we read them */
    uint64_t torn_retries;     /* reads that caught a write in progress and kept the old value */
    double t_comm, t_compute;  /* seconds */
} dt_counters;

typedef struct dt_comm {
    MPI_Comm comm;
    int rank, size;
    dt_counters c;
    /* NULL, or when a scheme left ranks out of the end of a run (downpour's gone workers) and
     * comm holds the others: each rank's number in the job, for reports */
    const int *world_ranks;
    int world_size;           /* ranks the job started with */
} dt_comm;

/* Initialises MPI (if not yet) and the context on MPI_COMM_WORLD. */
dt_status dt_comm_init(int *argc, char ***argv, dt_comm *c);
/* Finalises MPI if this process initialised it. */
void dt_comm_finalize(void);

static inline void dt_count_send(dt_comm *c, uint64_t msgs, uint64_t bytes) {
    c->c.msgs_sent += msgs;
    c->c.bytes_sent += bytes;
}
static inline void dt_count_recv(dt_comm *c, uint64_t msgs, uint64_t bytes) {
    c->c.msgs_recv += msgs;
    c->c.bytes_recv += bytes;
}

/* Counted collectives on floats (in place). They add their time to t_comm. */
dt_status dt_allreduce_sum(dt_comm *c, float *buf, size_t n);
dt_status dt_bcast(dt_comm *c, float *buf, size_t n, int root);
/* The same broadcast, neither counted nor timed: set-up traffic (e.g. starting copies of
 * compressed schemes). what names the call in an error. */
dt_status dt_bcast_setup(dt_comm *c, float *buf, size_t n, int root, const char *what);
/* Sum of buf over all ranks into sum on rank 0 (MPI_Reduce), counted as a gather: each other
 * rank sends its buffer once, rank 0 receives N-1. */
dt_status dt_reduce_sum(dt_comm *c, const float *buf, float *sum, size_t n);
/* The sum of dt_allreduce_sum, started (MPI_Iallreduce, in place): counted when started; buf
 * is not to be touched until *req completes. n < 2^31. */
dt_status dt_iallreduce_sum(dt_comm *c, float *buf, size_t n, MPI_Request *req);
/* Mean of buf over all ranks, in place (allreduce / N). */
dt_status dt_allreduce_mean(dt_comm *c, float *buf, size_t n);

/* Counted collectives on encoded payloads (--compress): B bytes from every rank.
 * allgather: every rank gets all N payloads in rank order (recv holds N*B bytes), counted as a
 *   ring allgather: N-1 messages and (N-1)*B bytes sent and received per rank;
 * gather to rank 0 (recv: N*B bytes on rank 0, unused elsewhere): one message of B bytes from
 *   every other rank, N-1 received at rank 0;
 * broadcast from root: N-1 messages of B bytes at the root, one received elsewhere. */
dt_status dt_allgather_bytes(dt_comm *c, const void *send, void *recv, size_t bytes);
dt_status dt_gather_bytes(dt_comm *c, const void *send, void *recv, size_t bytes);
dt_status dt_bcast_bytes(dt_comm *c, void *buf, size_t bytes, int root);

/* Turns an MPI error code into a dt_status with a message naming the call. */
dt_status dt_mpi_check(int err, const char *what);

#endif
