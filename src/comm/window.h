/* One-sided parameter transport for decentralized schemes (eventgrad, dpsgd); protocol and
 * accounting in docs/transport.md.
 *
 * Every rank exposes ONE MPI window (MPI_Alloc_mem + MPI_Win_create, displacement unit 1)
 * holding, for each of its neighbours, one slot that mirrors that neighbour's full flat
 * parameter vector (n floats, T tensors given as offsets/lengths), plus per-(slot, tensor)
 * headers {uint64 seq, uint64 check}, check = mix(XXH64(data) ^ seq * K). One passive-target
 * epoch (MPI_Win_lock_all, MPI_MODE_NOCHECK) is open from dt_win_create to dt_win_free; a put
 * is
 *     copy to a staging buffer; data, header; flush
 * into this rank's slot in the neighbour's window, and a read copies a tensor out of local
 * window memory and accepts it only when the copy hashes to the header's check for the
 * header's seq, so a tensor is never used half-written or mixed from two writes, whatever
 * order the MPI library makes the bytes visible in. The receiver takes no part in a put.
 *
 * Two layouts: dt_win_create's tensors are float ranges of an n-float vector (the float API:
 * dt_win_put, dt_win_put_tensors, dt_win_read); dt_win_create_bytes's tensors are byte
 * capacities, and a put carries any number of bytes up to the capacity (compressed payloads:
 * dt_win_put_bytes, dt_win_put_tensors_bytes, dt_win_read_bytes; they also work on a float
 * window, in bytes). The float API is the byte API with bytes = 4 * tensor_len[t].
 *
 * Neighbours are indexed k = 0..nnbrs-1 in the order of the nbrs list given to
 * dt_win_create; slot k of this rank's window holds neighbour nbrs[k]'s vector.
 * Not thread-safe: one thread per dt_win. */
#ifndef DT_WINDOW_H
#define DT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "comm/world.h"

typedef struct dt_win dt_win;

/* Transport statistics of this rank, beyond dt_counters (which hold the data messages). */
typedef struct dt_win_stats {
    uint64_t puts;           /* data puts (= messages counted by dt_count_send) */
    uint64_t put_bytes;      /* their payload bytes */
    uint64_t header_puts;    /* header puts (protocol overhead, 1 of 16 bytes per data put) */
    uint64_t header_bytes;   /* their bytes (not in dt_counters) */
    uint64_t flushes;        /* MPI_Win_flush / MPI_Win_flush_all calls */
    uint64_t reads;          /* dt_win_read calls */
    uint64_t fresh;          /* reads that returned a new complete tensor */
    uint64_t stale;          /* reads with nothing new */
    uint64_t torn;           /* reads that caught a write in progress (dst kept) */
    uint64_t overwritten;    /* writes replaced before this rank read them */
    uint64_t coalesced;      /* overlap: writes replaced by a newer one before they left */
    uint64_t probes;         /* overlap: 16-byte read-backs of a neighbour's header */
} dt_win_stats;

/* Collective over c->comm. nbrs: this rank's neighbours (distinct, none equal to c->rank),
 * and the graph must be symmetric: each neighbour must list this rank too (checked: an
 * asymmetric graph is DT_ERR_ARG on every rank). tensor_off/tensor_len: T tensors inside the
 * n-float vector (in floats, each inside [0, n), need not cover it). c must outlive the
 * window; its counters receive the transport's messages and time. */
dt_status dt_win_create(dt_comm *c, const int *nbrs, int nnbrs, size_t n,
                        const size_t *tensor_off, const size_t *tensor_len, int ntensors,
                        dt_win **out);

/* Collective, like dt_win_create, with the byte layout: tensor t has tensor_cap[t] bytes
 * (<= INT_MAX), placed one after the other in each slot. Only the byte API applies. */
dt_status dt_win_create_bytes(dt_comm *c, const int *nbrs, int nnbrs, const size_t *tensor_cap,
                              int ntensors, dt_win **out);

/* Writes tensor t of this rank's vector (src = start of that tensor, tensor_len[t] floats)
 * into this rank's slot in neighbour k's window. Returns when the write is complete at the
 * target. One counted message of tensor_len[t] * 4 bytes. */
dt_status dt_win_put(dt_win *w, int k, int t, const float *src);

/* Writes the tensors ts[0..nt) (distinct) of this rank's full vector x (n floats) to EVERY
 * neighbour, with the same protocol but one MPI_Win_flush_all for the whole batch: 1 round
 * trip per call instead of 1 per (neighbour, tensor); each tensor is hashed once. Counted as nnbrs * nt messages. Returns
 * when every write is complete at its target. */
dt_status dt_win_put_tensors(dt_win *w, const int *ts, int nt, const float *x);

/* The byte API. A put of tensor t carries `bytes` <= capacity bytes from src (copied to the
 * staging copy first; the check hashes exactly these bytes) and counts one message of
 * `bytes` bytes; the reader must ask for the same number of bytes (a payload size both sides
 * know: per tensor and codec), else the check fails and the read stays "torn". */
dt_status dt_win_put_bytes(dt_win *w, int k, int t, const void *src, size_t bytes);
/* Tensors ts[0..nt) (distinct) to EVERY neighbour, one MPI_Win_flush_all for the batch:
 * tensor ts[i] carries bytes[i] bytes from src[i]. nnbrs * nt messages. */
dt_status dt_win_put_tensors_bytes(dt_win *w, const int *ts, int nt, const void *const *src,
                                   const size_t *bytes);
/* dt_win_read of `bytes` bytes into dst; counts `bytes` received on a fresh read. */
dt_status dt_win_read_bytes(dt_win *w, int k, int t, void *dst, size_t bytes, uint64_t *seq, int *fresh);
/* Capacity of tensor t in bytes (4 * tensor_len[t] in the float layout). */
size_t dt_win_capacity(const dt_win *w, int t);

/* Reads tensor t of neighbour k's slot from local window memory. If a complete write newer
 * than the last one read is there: copies it into dst (tensor_len[t] floats), *fresh = 1,
 * *seq = its sequence number. Otherwise dst is left unchanged and *fresh = 0 (*seq = the
 * last sequence number read): nothing new, or a write in progress (counted as torn; read
 * again later). seq may be NULL. */
dt_status dt_win_read(dt_win *w, int k, int t, float *dst, uint64_t *seq, int *fresh);

/* Overlap (off by default): dt_win_put_tensors(_bytes) return without waiting for the link;
 * every later call into the window moves the puts along. One round of puts is on the link at
 * a time, until each neighbour's window shows it (a 16-byte read-back); a tensor asked for
 * meanwhile waits in a second staging copy, where a newer value replaces it (counted as
 * coalesced, never sent). Bounded staleness: a put call finding a round that has been on its
 * way for max_lag (>= 1) put calls waits for it first. Turning it off waits for everything
 * (dt_win_complete).
 * dt_win_put and dt_win_put_bytes need it off. */
dt_status dt_win_set_overlap(dt_win *w, int on, int max_lag);
/* Overlap on: from now on, when a round has arrived at every neighbour, its tensors' values
 * are copied into mirror (the caller's, slot_bytes, tensor t at its place in the slot), so
 * mirror holds what the neighbours' windows show of this rank, not what was last handed to a
 * put (a round may be on its way, a newer value waiting). NULL stops it. */
void dt_win_mirror_arrived(dt_win *w, void *mirror);
/* Waits until every write started or waiting has left (their origin copies are free; the
 * targets see them once they next run MPI): before announcing sequence numbers. */
dt_status dt_win_complete(dt_win *w);

/* Lets MPI progress incoming RMA (call regularly, e.g. once per training step); with overlap,
 * also this rank's writes in flight, and starts those that waited. */
dt_status dt_win_progress(dt_win *w);

/* Number of puts this rank made for (k, t). */
uint64_t dt_win_sent_seq(const dt_win *w, int k, int t);
/* Sequence number in the header of slot (k, t) of this rank's window, now; its data may still
 * be landing (dt_win_read tells). Once the sender's last write has completed it equals the
 * sender's dt_win_sent_seq for this rank and t. */
uint64_t dt_win_slot_seq(dt_win *w, int k, int t);
/* Sequence number of the last fresh read of (k, t) (0: none yet). */
uint64_t dt_win_read_seq(const dt_win *w, int k, int t);

int dt_win_num_neighbors(const dt_win *w);
int dt_win_neighbor(const dt_win *w, int k);  /* rank of neighbour k */
int dt_win_num_tensors(const dt_win *w);
const dt_win_stats *dt_win_get_stats(const dt_win *w);

/* Collective: closes the epoch (MPI_Win_unlock_all), frees the window; *w = NULL. Every
 * window must be freed before MPI_Finalize, also on error paths: with MPICH/UCX a window
 * still locked at finalize aborts the process (UCX "destroying inuse region"). */
dt_status dt_win_free(dt_win **w);

#endif
