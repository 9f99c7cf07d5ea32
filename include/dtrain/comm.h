/*
 * dtrain/comm.h - the communication a scheme does, counted and timed (dtrain/scheme.h says
 * who must use what; docs/accounting.md what is counted).
 *
 * A scheme talks to the other ranks through a dt_comm: the MPI communicator, this rank, and
 * the counters of what it sent and received. Accounting: a message is one payload handed to
 * MPI for one peer (one MPI_Put, one MPI_Send/Isend). Collectives count as the point-to-point
 * messages a standard implementation sends from this rank: allreduce of B bytes = 2(N-1)
 * messages and 2(N-1)/N*B bytes (ring); broadcast from root = N-1 messages of B bytes at the
 * root; gather = one message of B bytes from each non-root. Bytes are payload bytes as they
 * travel (after compression).
 *
 * The counted calls below (dt_allreduce_sum, dt_bcast, ...) count their messages and bytes
 * and add their time to the communication time themselves. A scheme that calls MPI itself
 * counts with dt_count_send / dt_count_recv and times with dt_comm_time_begin/end (nested
 * counted calls inside are timed once); a wait that spins (MPI_Test in a loop, polling window
 * memory) goes between dt_wait_begin and dt_wait_end, so that the watchdog (--timeout) sees it
 * and names it. Blocking MPI calls are seen by the watchdog as they are (the library wraps
 * them through MPI's profiling interface).
 */
#ifndef DTRAIN_COMM_H
#define DTRAIN_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include <dtrain.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_counters {
    uint64_t msgs_sent, bytes_sent;
    uint64_t msgs_recv, bytes_recv;
    uint64_t baseline_msgs;    /* what this rank would send communicating every tensor every step */
    uint64_t fresh_recv;       /* tensors received that were new when read (one-sided schemes) */
    uint64_t overwritten;      /* tensors sent to us that were replaced before we read them */
    uint64_t torn_retries;     /* reads that caught a write in progress and kept the old value */
    uint64_t other_bytes;      /* sent beside the payloads: set-up copies, the model averaged for an
                                * evaluation, protocol headers and tokens (docs/accounting.md) */
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
    int timing;               /* open dt_comm_time_begin spans (their time is added once) */
} dt_comm;

/* What --compress says (the payload codecs are the library's own, src/comm/codec.h: a scheme
 * of its own declares DT_COMPRESS_NO and finds DT_CODEC_NONE here). */
typedef enum { DT_CODEC_NONE, DT_CODEC_FP16, DT_CODEC_BF16, DT_CODEC_INT8, DT_CODEC_TOPK, DT_CODEC_POWERSGD } dt_codec_kind;
typedef struct dt_codec_spec {
    dt_codec_kind kind;
    double frac;            /* topk: F in (0, 1] */
    int rank;               /* powersgd: the factors' rank R >= 1 (allreduce's own: not a payload codec) */
} dt_codec_spec;

/* ---------------------------------------------------------------- counting */
static inline void dt_count_send(dt_comm *c, uint64_t msgs, uint64_t bytes) {
    c->c.msgs_sent += msgs;
    c->c.bytes_sent += bytes;
}
static inline void dt_count_recv(dt_comm *c, uint64_t msgs, uint64_t bytes) {
    c->c.msgs_recv += msgs;
    c->c.bytes_recv += bytes;
}
/* Bytes this rank sent that are not a scheme's payload (set-up, evaluation, protocol). */
static inline void dt_count_other(dt_comm *c, uint64_t bytes) { c->c.other_bytes += bytes; }
/* The messages this rank would have sent had it communicated every tensor at this step (the
 * denominator of "messages %"). Only for a scheme that sets own_baseline (dtrain/scheme.h);
 * for the others the trainer takes what they sent. */
static inline void dt_count_baseline(dt_comm *c, uint64_t msgs) { c->c.baseline_msgs += msgs; }
/* The messages one dt_allreduce_sum sends from this rank: 2(N-1), 0 alone. */
static inline uint64_t dt_allreduce_msgs(const dt_comm *c) { return c->size > 1 ? 2 * (uint64_t)(c->size - 1) : 0; }

/* ---------------------------------------------------------------- timing and waiting */
/* Everything from begin to end is communication time (comm s): a scheme's own MPI calls, its
 * encoding and decoding. Spans nest: the outermost one's time is added, once. */
DT_API double dt_comm_time_begin(dt_comm *c);
DT_API void dt_comm_time_end(dt_comm *c, double t0);
/* A wait that is not one blocking MPI call (a loop of MPI_Test, polling window memory):
 * communication time, and a wait the watchdog sees (--timeout ends it with a line naming
 * what; what is a static string). Nested waits count as the outermost. */
DT_API void dt_wait_begin(dt_comm *c, const char *what);
DT_API void dt_wait_end(dt_comm *c);
/* MPI_Waitall, timed, an error naming what. */
DT_API dt_status dt_wait_all(dt_comm *c, int n, MPI_Request *req, const char *what);
/* MPI_Testall, timed (lets non-blocking calls progress): *done set when all completed. */
DT_API dt_status dt_test_all(dt_comm *c, int n, MPI_Request *req, int *done, const char *what);

/* A message from any rank, matched (MPI_Improbe) and then received (MPI_Mrecv) by a rank
 * that serves others. In the simulation build, which has neither, MPI_Iprobe and a receive of
 * the probed source and tag: the same message, as MPI keeps a sender's order and only the
 * serving thread receives on c. Not counted: the caller counts what the message is. */
typedef struct dt_probed {
    MPI_Message msg;
    int source, tag;
} dt_probed;
/* *flag set when a message is there; then *status has its source, tag and size. */
DT_API dt_status dt_probe_any(dt_comm *c, int *flag, dt_probed *m, MPI_Status *status);
/* The probed message into buf (count bytes, its size from the status). */
DT_API dt_status dt_recv_probed(dt_comm *c, void *buf, int count, dt_probed *m);
/* The same, started (MPI_Imrecv): a large message moves in pieces that each need its sender,
 * so a sender stopped in the middle would hold a blocking receive for ever; the caller polls
 * *req and may give up on it. (The simulation build receives at once: *req is done.) */
DT_API dt_status dt_irecv_probed(dt_comm *c, void *buf, int count, dt_probed *m, MPI_Request *req);

/* ---------------------------------------------------------------- counted calls */
/* Collectives on floats (in place), counted and timed. */
DT_API dt_status dt_allreduce_sum(dt_comm *c, float *buf, size_t n);
/* Mean of buf over all ranks, in place (allreduce / N). */
DT_API dt_status dt_allreduce_mean(dt_comm *c, float *buf, size_t n);
DT_API dt_status dt_bcast(dt_comm *c, float *buf, size_t n, int root);
/* Sum of buf over all ranks into sum on rank 0 (MPI_Reduce), counted as a gather: each other
 * rank sends its buffer once, rank 0 receives N-1. */
DT_API dt_status dt_reduce_sum(dt_comm *c, const float *buf, float *sum, size_t n);
/* The sum of dt_allreduce_sum, started (MPI_Iallreduce, in place): counted when started; buf
 * is not to be touched until *req completes (dt_wait_all). n < 2^31. In the simulation build
 * (docs/simulation.md) *req is MPI_REQUEST_NULL and the sum is MPICH's schedule in messages
 * that dt_test_all and dt_wait_all move along (SMPI 3.32's own MPI_Iallreduce loses an
 * in-place buffer); the buffer is final after dt_wait_all. */
DT_API dt_status dt_iallreduce_sum(dt_comm *c, float *buf, size_t n, MPI_Request *req);
/* The broadcast of dt_bcast for set-up traffic (e.g. equal starting copies): not a payload
 * and not timed, counted beside the payloads (other_bytes, at the root as a broadcast is).
 * what names the call in an error. */
DT_API dt_status dt_bcast_setup(dt_comm *c, float *buf, size_t n, int root, const char *what);
/* Encoded payloads: B bytes from every rank.
 * allgather: every rank gets all N payloads in rank order (recv holds N*B bytes), counted as a
 *   ring allgather: N-1 messages and (N-1)*B bytes sent and received per rank;
 * gather to rank 0 (recv: N*B bytes on rank 0, unused elsewhere): one message of B bytes from
 *   every other rank, N-1 received at rank 0;
 * broadcast from root: N-1 messages of B bytes at the root, one received elsewhere. */
DT_API dt_status dt_allgather_bytes(dt_comm *c, const void *send, void *recv, size_t bytes);
DT_API dt_status dt_gather_bytes(dt_comm *c, const void *send, void *recv, size_t bytes);
DT_API dt_status dt_bcast_bytes(dt_comm *c, void *buf, size_t bytes, int root);
/* Blocks of different sizes (bytes; the displacements are filled in by the call, from the counts).
 * alltoallv: rank r sends send_counts[j] bytes to each j and gets recv_counts[i] from each i,
 *   counted as N-1 messages each way and the bytes of the other ranks' blocks;
 * allgatherv: every rank gets every rank's block (counts[i] bytes) in rank order (send NULL:
 *   this rank's block is in recv already, at its place), counted as a
 *   ring allgather: N-1 messages, every block but the next rank's sent, every block but this
 *   rank's received. */
DT_API dt_status dt_alltoallv_bytes(dt_comm *c, const void *send, const int *send_counts, int *send_displ, void *recv,
                             const int *recv_counts, int *recv_displ);
DT_API dt_status dt_allgatherv_bytes(dt_comm *c, const void *send, void *recv, const int *counts, int *displ);

/* An MPI error code as a dt_status with a message naming the call (DT_OK for MPI_SUCCESS). */
DT_API dt_status dt_mpi_check(int err, const char *what);

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_COMM_H */
