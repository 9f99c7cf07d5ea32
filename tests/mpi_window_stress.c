/* Stress test of the one-sided transport (src/comm/window.c), run under mpiexec with 2 or more
 * ranks on a ring. Every rank repeatedly puts random tensors of a ~20,000-float vector to its
 * neighbours, every element of a put carrying the same value rank * 1e6 + sequence number,
 * and between puts reads every slot of its own window. Fails on:
 *   - a fresh read whose elements are not all equal (a torn copy), or whose value names the
 *     wrong sender or a sequence number other than the one reported;
 *   - a non-fresh read that changed the destination;
 *   - no fresh tensor from some neighbour before the final barrier (puts must land during the
 *     run, not only at the end);
 *   - after the run, reading until every slot reaches its sender's announced count (at most
 *     30 s): a slot that never does; any (neighbour, tensor) whose final sequence number
 *     differs from the sender's number of puts, or whose fresh + overwritten differs from it;
 *     total puts (all ranks) != total final sequence numbers; library counters that disagree.
 * Usage: mpi_window_stress [iterations] [--bytes] [--no-progress] [--probe-progress]
 *   --bytes           the byte API (dt_win_create_bytes, dt_win_put_bytes,
 *                     dt_win_put_tensors_bytes, dt_win_read_bytes): each put of tensor t
 *                     carries its floats plus 1..3 tail bytes (an odd size, below a capacity
 *                     5 bytes larger), the tail bytes derived from the value, so a fresh copy
 *                     must also carry the tail of its own write
 *   --no-progress     never call dt_win_progress (puts then complete only while the target
 *                     is inside some other MPI call)
 *   --probe-progress  instead of the test: time one put to a neighbour that computes for 1 s
 *                     without MPI calls (does this MPI need target-side progress?)
 * Prints one summary line on rank 0; exit 0 on success, 1 on failure (all ranks agree). */
#include "dtrain.h"
#include "comm/world.h"
#include "comm/topology.h"
#include "comm/window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 8
/* cnn1's tensor layout (38,390 floats, small and large tensors): with it, MPICH 4.0.2 MPI_Win_allocate
 * windows received every put 8 bytes early (window.c now uses MPI_Win_create) */
static const size_t LENS[T] = {250, 10, 5000, 20, 32000, 100, 1000, 10};
#define MAXNB 64

static int failures = 0;
#define FAIL(...) do { if (failures++ < 20) { fprintf(stderr, "mpi_window_stress rank %d: ", rank); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static int rank;

static void die(const char *what) {
    fprintf(stderr, "mpi_window_stress rank %d: %s: %s\n", rank, what, dt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* byte mode: the tail bytes of a put of value v (0 for the zeroed start) */
static unsigned tail_byte(float v) { return (unsigned)((long)v % 251); }

/* index of the first element of x[0..n) that differs from x[0], or n */
static size_t first_mismatch(const float *x, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (x[i] != x[0]) return i;
    return n;
}

int main(int argc, char **argv) {
    dt_comm c;
    if (dt_comm_init(&argc, &argv, &c) != DT_OK) {
        fprintf(stderr, "mpi_window_stress: %s\n", dt_last_error());
        return 1;
    }
    rank = c.rank;
    long iters = 300;
    int use_progress = 1, probe = 0, bytes_mode = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-progress")) use_progress = 0;
        else if (!strcmp(argv[i], "--bytes")) bytes_mode = 1;
        else if (!strcmp(argv[i], "--probe-progress")) probe = 1;
        else iters = strtol(argv[i], NULL, 10);
    }
    if (iters < 1 || iters >= 100000) iters = 300; /* values rank*1e6+seq stay < 2^24 */
    if (c.size < 2 || c.size > 16) {
        if (rank == 0) fprintf(stderr, "mpi_window_stress: needs 2..16 ranks, got %d\n", c.size);
        dt_comm_finalize();
        return 1;
    }

    size_t off[T], n = 0;
    for (int t = 0; t < T; t++) { off[t] = n; n += LENS[t]; }
    if (probe) bytes_mode = 0;
    /* byte mode: bytes per put, capacity, and where tensor t sits in the test's byte buffers
     * (8-aligned, so its floats can be read in place) */
    size_t pb[T], capb[T], boffr[T], nb = 0;
    for (int t = 0; t < T; t++) {
        pb[t] = LENS[t] * sizeof(float) + 1 + (size_t)(t % 3);
        capb[t] = pb[t] + 5;
        boffr[t] = nb;
        nb += (capb[t] + 7) / 8 * 8;
    }

    int nbrs[MAXNB], nn = 0;
    if (dt_topology_neighbors("ring", rank, c.size, nbrs, MAXNB, &nn) != DT_OK) die("topology");
    dt_win *w = NULL;
    if (bytes_mode) {
        if (dt_win_create_bytes(&c, nbrs, nn, capb, T, &w) != DT_OK) die("dt_win_create_bytes");
    } else if (dt_win_create(&c, nbrs, nn, n, off, LENS, T, &w) != DT_OK) die("dt_win_create");

    if (probe) {
        /* Does a put complete while its target computes without calling MPI? Rank 1 computes
         * for 1 s; rank 0 times one dt_win_put to it. Informational, no pass/fail. */
        MPI_Barrier(c.comm);
        static float payload[7001];
        if (rank == 1) {
            volatile double x = 0;
            double ts0 = dt_now();
            while (dt_now() - ts0 < 1.0) for (int i = 0; i < 1000; i++) x += i * 1e-9;
        } else if (rank == 0) {
            double ts0 = dt_now();
            if (dt_win_put(w, 0, 0, payload) != DT_OK) die("dt_win_put");
            printf("mpi_window_stress: one put to a neighbour computing for 1 s without MPI calls "
                   "took %.1f ms\n", (dt_now() - ts0) * 1e3);
        }
        MPI_Barrier(c.comm);
        dt_win_free(&w);
        dt_comm_finalize();
        return 0;
    }

    float *mine = malloc(n * sizeof *mine);
    float *recv = calloc((size_t)nn * n, sizeof *recv);  /* what we hold of each neighbour */
    unsigned char *mineb = NULL, *recvb = NULL;           /* the same in byte mode */
    if (bytes_mode) {
        mineb = malloc(nb);
        recvb = calloc((size_t)nn * nb, 1);
        if (!mineb || !recvb) die("out of memory");
    }
    uint64_t fresh_cnt[MAXNB][T] = {{0}}, gaps[MAXNB][T] = {{0}}, lastseq[MAXNB][T] = {{0}};
    uint64_t fresh_during[MAXNB] = {0};
    if (!mine || !recv) die("out of memory");
    dt_rng rng;
    dt_rng_seed(&rng, dt_seed_mix(12345, (uint64_t)rank, 0, 0));

    /* reads every slot (k, t), checking each result; returns the number of fresh reads */
    #define READ_ALL() do { \
        for (int k = 0; k < nn; k++) for (int t = 0; t < T; t++) { \
            float *dst = bytes_mode ? (float *)(void *)(recvb + (size_t)k * nb + boffr[t]) \
                                    : recv + (size_t)k * n + off[t]; \
            const float before = dst[0]; \
            uint64_t seq = 0; int fresh = 0; \
            if (bytes_mode) { \
                if (dt_win_read_bytes(w, k, t, dst, pb[t], &seq, &fresh) != DT_OK) die("dt_win_read_bytes"); \
            } else if (dt_win_read(w, k, t, dst, &seq, &fresh) != DT_OK) die("dt_win_read"); \
            size_t bad = first_mismatch(dst, LENS[t]); \
            if (bad != LENS[t]) \
                FAIL("%s copy from rank %d tensor %d: element 0 = %.0f, element %zu = %.0f", \
                     fresh ? "TORN fresh" : "changed non-fresh", nbrs[k], t, dst[0], bad, dst[bad]); \
            if (bytes_mode) { \
                const unsigned char *tail = (const unsigned char *)dst + LENS[t] * sizeof(float); \
                for (size_t b = 0; b < pb[t] - LENS[t] * sizeof(float); b++) \
                    if (tail[b] != tail_byte(dst[0])) \
                        FAIL("%s copy from rank %d tensor %d: tail byte %zu is %u, value %.0f wants %u", \
                             fresh ? "TORN fresh" : "changed non-fresh", nbrs[k], t, b, tail[b], dst[0], \
                             tail_byte(dst[0])); \
            } \
            if (fresh) { \
                long v = (long)dst[0], sender = v / 1000000, s = v % 1000000; \
                if (sender != nbrs[k] || (uint64_t)s != seq || seq <= lastseq[k][t]) \
                    FAIL("fresh read from rank %d tensor %d: value %.0f (sender %ld, seq %ld), " \
                         "reported seq %llu, previous %llu", nbrs[k], t, dst[0], sender, s, \
                         (unsigned long long)seq, (unsigned long long)lastseq[k][t]); \
                fresh_cnt[k][t]++; \
                gaps[k][t] += seq - lastseq[k][t] - 1; \
                lastseq[k][t] = seq; \
            } else if (dst[0] != before || seq != lastseq[k][t]) { \
                FAIL("non-fresh read from rank %d tensor %d changed dst (%.0f -> %.0f) or seq", \
                     nbrs[k], t, before, dst[0]); \
            } \
        } } while (0)

    MPI_Barrier(c.comm);
    double t0 = dt_now();
    for (long it = 0; it < iters; it++) {
        /* a quarter of the iterations: one random tensor with dt_win_put to each neighbour; the
         * rest: a random set of tensors to all neighbours at once with dt_win_put_tensors */
        int ts[T], nt = 0;
        const int batch = dt_rng_below(&rng, 4) != 0;
        if (batch) {
            for (int t = 0; t < T; t++)
                if (dt_rng_below(&rng, 2)) ts[nt++] = t;
            if (nt == 0) ts[nt++] = (int)dt_rng_below(&rng, T);
        } else {
            ts[nt++] = (int)dt_rng_below(&rng, T);
        }
        for (int i = 0; i < nt; i++) {
            const int t = ts[i];
            /* every neighbour receives every put, so all (k, t) counters move together */
            const uint64_t s = dt_win_sent_seq(w, 0, t) + 1;
            for (int k = 1; k < nn; k++)
                if (dt_win_sent_seq(w, k, t) + 1 != s) FAIL("sent counters of tensor %d diverge", t);
            const float v = (float)((double)rank * 1e6 + (double)s);
            for (size_t j = 0; j < LENS[t]; j++) mine[off[t] + j] = v;
            if (bytes_mode) {
                memcpy(mineb + boffr[t], mine + off[t], LENS[t] * sizeof(float));
                memset(mineb + boffr[t] + LENS[t] * sizeof(float), (int)tail_byte(v), pb[t] - LENS[t] * sizeof(float));
            }
        }
        if (bytes_mode) {
            const void *src[T];
            size_t sz[T];
            for (int i = 0; i < nt; i++) { src[i] = mineb + boffr[ts[i]]; sz[i] = pb[ts[i]]; }
            if (batch) {
                if (dt_win_put_tensors_bytes(w, ts, nt, src, sz) != DT_OK) die("dt_win_put_tensors_bytes");
            } else {
                for (int k = 0; k < nn; k++)
                    if (dt_win_put_bytes(w, k, ts[0], src[0], sz[0]) != DT_OK) die("dt_win_put_bytes");
            }
        } else if (batch) {
            if (dt_win_put_tensors(w, ts, nt, mine) != DT_OK) die("dt_win_put_tensors");
        } else {
            for (int k = 0; k < nn; k++)
                if (dt_win_put(w, k, ts[0], mine + off[ts[0]]) != DT_OK) die("dt_win_put");
        }
        if (use_progress && dt_win_progress(w) != DT_OK) die("dt_win_progress");
        READ_ALL();
    }
    for (int k = 0; k < nn; k++)
        for (int t = 0; t < T; t++) fresh_during[k] += fresh_cnt[k][t];
    const double elapsed = dt_now() - t0;

    /* the senders' put counts for us, per (k, t); then read until every slot has reached
     * its sender's count. Not "one read after a barrier": a flushed write is complete at the
     * target, but this MPICH can still show its header before its data for a while. */
    uint64_t sent_to[MAXNB][T], sent_by[MAXNB][T];
    MPI_Request req[2 * MAXNB];
    MPI_Status sts[2 * MAXNB]; /* not MPI_STATUSES_IGNORE: GCC 12 -Wstringop-overflow false positive */
    for (int k = 0; k < nn; k++) {
        for (int t = 0; t < T; t++) sent_to[k][t] = dt_win_sent_seq(w, k, t);
        MPI_Irecv(sent_by[k], T, MPI_UINT64_T, nbrs[k], 7, c.comm, &req[2 * k]);
        MPI_Isend(sent_to[k], T, MPI_UINT64_T, nbrs[k], 7, c.comm, &req[2 * k + 1]);
    }
    MPI_Waitall(2 * nn, req, sts);
    const uint64_t torn_run = c.c.torn_retries;
    const double drain0 = dt_now();
    int pending = 1;
    while (pending && dt_now() - drain0 < 30.0) {
        READ_ALL();
        pending = 0;
        for (int k = 0; k < nn; k++)
            for (int t = 0; t < T; t++) pending += lastseq[k][t] < sent_by[k][t];
        if (pending && dt_win_progress(w) != DT_OK) die("dt_win_progress");
    }
    if (pending) FAIL("%d slots still short of their senders' counts 30 s after the run", pending);
    const uint64_t torn_drain = c.c.torn_retries - torn_run;
    MPI_Barrier(c.comm);

    uint64_t puts = 0, final_seq = 0, fresh_total = 0, gap_total = 0;
    for (int k = 0; k < nn; k++) {
        if (fresh_during[k] == 0)
            FAIL("no fresh tensor from rank %d before the final barrier", nbrs[k]);
        for (int t = 0; t < T; t++) {
            const uint64_t fin = dt_win_slot_seq(w, k, t);
            puts += sent_to[k][t];
            final_seq += fin;
            fresh_total += fresh_cnt[k][t];
            gap_total += gaps[k][t];
            if (fin != sent_by[k][t] || dt_win_read_seq(w, k, t) != fin || lastseq[k][t] != fin)
                FAIL("rank %d tensor %d: sender made %llu puts, slot ends at %llu, last read %llu",
                     nbrs[k], t, (unsigned long long)sent_by[k][t], (unsigned long long)fin,
                     (unsigned long long)dt_win_read_seq(w, k, t));
            if (fresh_cnt[k][t] + gaps[k][t] != fin)
                FAIL("rank %d tensor %d: fresh %llu + overwritten %llu != %llu puts", nbrs[k], t,
                     (unsigned long long)fresh_cnt[k][t], (unsigned long long)gaps[k][t],
                     (unsigned long long)fin);
        }
    }
    /* the library's counters agree with what the test saw */
    const dt_win_stats *ws = dt_win_get_stats(w);
    if (c.c.fresh_recv != fresh_total || c.c.overwritten != gap_total || c.c.msgs_sent != puts ||
        c.c.msgs_recv != fresh_total || ws->puts != puts || ws->header_puts != puts ||
        ws->torn != c.c.torn_retries || ws->header_bytes != 16 * puts || c.c.fresh_recv + c.c.overwritten != final_seq)
        FAIL("counters: fresh %llu/%llu overwritten %llu/%llu sent %llu/%llu",
             (unsigned long long)c.c.fresh_recv, (unsigned long long)fresh_total,
             (unsigned long long)c.c.overwritten, (unsigned long long)gap_total,
             (unsigned long long)c.c.msgs_sent, (unsigned long long)puts);
    uint64_t bytes_expect = 0;
    for (int k = 0; k < nn; k++)
        for (int t = 0; t < T; t++) bytes_expect += sent_to[k][t] * (bytes_mode ? pb[t] : LENS[t] * sizeof(float));
    if (bytes_mode) {
        uint64_t recv_expect = 0;
        for (int k = 0; k < nn; k++)
            for (int t = 0; t < T; t++) recv_expect += fresh_cnt[k][t] * pb[t];
        if (c.c.bytes_recv != recv_expect) FAIL("bytes received %llu, expected %llu",
            (unsigned long long)c.c.bytes_recv, (unsigned long long)recv_expect);
    }
    if (c.c.bytes_sent != bytes_expect) FAIL("bytes sent %llu, expected %llu",
        (unsigned long long)c.c.bytes_sent, (unsigned long long)bytes_expect);

    uint64_t loc[6] = {puts, final_seq, fresh_total, gap_total, c.c.torn_retries, torn_drain}, glob[6];
    uint64_t fd_min = UINT64_MAX;
    for (int k = 0; k < nn; k++) if (fresh_during[k] < fd_min) fd_min = fresh_during[k];
    MPI_Allreduce(loc, glob, 6, MPI_UINT64_T, MPI_SUM, c.comm);
    uint64_t gfd_min = 0;
    MPI_Allreduce(&fd_min, &gfd_min, 1, MPI_UINT64_T, MPI_MIN, c.comm);
    double tmax = 0;
    MPI_Allreduce(&elapsed, &tmax, 1, MPI_DOUBLE, MPI_MAX, c.comm);
    if (rank == 0 && glob[0] != glob[1])
        FAIL("total puts %llu != total final sequence numbers %llu", (unsigned long long)glob[0],
             (unsigned long long)glob[1]);

    if (dt_win_free(&w) != DT_OK) die("dt_win_free");
    int bad = failures > 0, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, c.comm);
    if (rank == 0)
        printf("mpi_window_stress: %d ranks, %llu puts, %llu fresh reads (min %llu from one "
               "neighbour during the run), %llu overwritten, %llu torn reads avoided (%llu while "
               "draining), %.2f s%s%s: %s\n",
               c.size, (unsigned long long)glob[0], (unsigned long long)glob[2],
               (unsigned long long)gfd_min, (unsigned long long)glob[3],
               (unsigned long long)glob[4], (unsigned long long)glob[5], tmax, use_progress ? "" : " (no dt_win_progress)", bytes_mode ? " (byte API)" : "",
               anybad ? "FAILED" : "OK");
    free(mine);
    free(recv);
    free(mineb);
    free(recvb);
    dt_comm_finalize();
    return anybad ? 1 : 0;
}
