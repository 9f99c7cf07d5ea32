/* The overlap engine's mirror (dt_win_mirror_arrived, src/comm/window_overlap.c), under
 * mpiexec with 2 or more ranks on a ring: the copy of a rank's own tensors that its
 * neighbours' windows show, which eventgrad's consensus mixing pulls against. Every rank puts
 * random sets of tensors with overlap on (a round on the link at a time, newer values
 * coalesced), each put of tensor t carrying the value rank * 1e6 + iteration in every
 * element, and now and then computes without MPI calls so that rounds lag. Fails on:
 *   - a mirrored tensor whose elements are not all equal, whose value this rank never put,
 *     that went backwards, or that is newer than the last value put;
 *   - after dt_win_complete: a mirrored tensor other than the last value put;
 *   - a neighbour whose window, read until it settles (at most 30 s), ends with another value
 *     of a tensor than this rank's mirror holds.
 * Also reports how often the mirror trailed the last put during the run (the point of it).
 * Prints one line on rank 0; exit 0 on success, 1 on failure (all ranks agree). */
#include "dtrain.h"
#include "comm/world.h"
#include "comm/topology.h"
#include "comm/window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 6
static const size_t LENS[T] = {250, 10, 5000, 32000, 100, 10};
#define MAXNB 16

static int rank, failures;
#define FAIL(...) do { if (failures++ < 20) { fprintf(stderr, "mpi_window_mirror rank %d: ", rank); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void die(const char *what) {
    fprintf(stderr, "mpi_window_mirror rank %d: %s: %s\n", rank, what, dt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int uniform(const float *x, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (x[i] != x[0]) return 0;
    return 1;
}

int main(int argc, char **argv) {
    dt_comm c;
    if (dt_comm_init(&argc, &argv, &c) != DT_OK) {
        fprintf(stderr, "mpi_window_mirror: %s\n", dt_last_error());
        return 1;
    }
    rank = c.rank;
    const long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 400;
    if (c.size < 2 || c.size > 16 || iters < 1 || iters > 100000) {
        if (rank == 0) fprintf(stderr, "mpi_window_mirror: needs 2..16 ranks and 1..100000 iterations\n");
        dt_comm_finalize();
        return 1;
    }
    size_t off[T], n = 0;
    for (int t = 0; t < T; t++) { off[t] = n; n += LENS[t]; }
    int nbrs[MAXNB], nn = 0;
    if (dt_topology_neighbors("ring", rank, c.size, nbrs, MAXNB, &nn) != DT_OK) die("topology");
    dt_win *w = NULL;
    if (dt_win_create(&c, nbrs, nn, n, off, LENS, T, &w) != DT_OK) die("dt_win_create");
    if (dt_win_set_overlap(w, 1, 3) != DT_OK) die("dt_win_set_overlap");
    float *mine = calloc(n, sizeof *mine), *mirror = calloc(n, sizeof *mirror);
    float *recv = calloc(n, sizeof *recv);
    if (!mine || !mirror || !recv) die("out of memory");
    dt_win_mirror_arrived(w, mirror);
    dt_rng rng;
    dt_rng_seed(&rng, dt_seed_mix(777, (uint64_t)rank, 0, 0));

    long trailing = 0, checks = 0;
    MPI_Barrier(c.comm);
    for (long it = 1; it <= iters; it++) {
        int ts[T], nt = 0;
        for (int t = 0; t < T; t++)
            if (dt_rng_below(&rng, 2)) ts[nt++] = t;
        const float v = (float)((double)rank * 1e6 + (double)it);
        for (int i = 0; i < nt; i++)
            for (size_t j = 0; j < LENS[ts[i]]; j++) mine[off[ts[i]] + j] = v;
        if (dt_win_put_tensors(w, ts, nt, mine) != DT_OK) die("dt_win_put_tensors");
        if (dt_rng_below(&rng, 4) == 0) { /* compute without MPI: rounds to and from us lag */
            volatile double x = 0;
            for (int i = 0; i < 20000; i++) x += i * 1e-9;
        }
        if (dt_win_progress(w) != DT_OK) die("dt_win_progress");
        for (int t = 0; t < T; t++) {
            const float *m = mirror + off[t];
            const long val = (long)m[0], who = val / 1000000, when = val % 1000000;
            checks++;
            if (!uniform(m, LENS[t])) FAIL("tensor %d: a torn mirror (element 0 %.0f)", t, m[0]);
            else if (m[0] != 0 && who != rank) FAIL("tensor %d: mirror value %.0f names rank %ld", t, m[0], who);
            else if (m[0] > mine[off[t]]) FAIL("tensor %d: mirror %.0f newer than the last put %.0f", t, m[0], mine[off[t]]);
            else if (m[0] != 0 && when > it) FAIL("tensor %d: mirror %.0f from the future", t, m[0]);
            if (m[0] < mine[off[t]]) trailing++;
        }
        /* never backwards: remember each tensor's mirrored value */
        static float seen[T];
        for (int t = 0; t < T; t++) {
            if (mirror[off[t]] < seen[t]) FAIL("tensor %d: mirror went back from %.0f to %.0f", t, seen[t], mirror[off[t]]);
            seen[t] = mirror[off[t]];
        }
    }
    if (dt_win_complete(w) != DT_OK) die("dt_win_complete");
    for (int t = 0; t < T; t++)
        if (memcmp(mirror + off[t], mine + off[t], LENS[t] * sizeof(float)))
            FAIL("after dt_win_complete tensor %d: mirror %.0f, last put %.0f", t, mirror[off[t]], mine[off[t]]);

    /* every neighbour's window ends with what this rank's mirror holds: exchange mirrors, then
     * read each slot until it shows the neighbour's (a header can show before its data) */
    float *theirs = malloc((size_t)nn * n * sizeof *theirs);
    if (!theirs) die("out of memory");
    MPI_Request req[2 * MAXNB];
    MPI_Status sts[2 * MAXNB];
    for (int k = 0; k < nn; k++) {
        MPI_Irecv(theirs + (size_t)k * n, (int)n, MPI_FLOAT, nbrs[k], 9, c.comm, &req[2 * k]);
        MPI_Isend(mirror, (int)n, MPI_FLOAT, nbrs[k], 9, c.comm, &req[2 * k + 1]);
    }
    MPI_Waitall(2 * nn, req, sts);
    const double t0 = dt_now();
    for (int k = 0; k < nn; k++)
        for (int t = 0; t < T; t++) {
            const float want = theirs[(size_t)k * n + off[t]];
            for (;;) {
                uint64_t seq;
                int fresh;
                if (dt_win_read(w, k, t, recv + off[t], &seq, &fresh) != DT_OK) die("dt_win_read");
                if (recv[off[t]] == want || dt_now() - t0 > 30) break;
                if (dt_win_progress(w) != DT_OK) die("dt_win_progress");
            }
            if (recv[off[t]] != want)
                FAIL("rank %d's tensor %d: its mirror holds %.0f, this window shows %.0f", nbrs[k], t, want, recv[off[t]]);
        }
    MPI_Barrier(c.comm);
    if (dt_win_free(&w) != DT_OK) die("dt_win_free");

    long loc[2] = {trailing, checks}, glob[2];
    MPI_Allreduce(loc, glob, 2, MPI_LONG, MPI_SUM, c.comm);
    int bad = failures > 0, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, c.comm);
    if (rank == 0)
        printf("mpi_window_mirror: %d ranks, %ld iterations, the mirror trailed the last put in %ld of %ld "
               "looks: %s\n", c.size, iters, glob[0], glob[1], anybad ? "FAILED" : "OK");
    free(mine); free(mirror); free(recv); free(theirs);
    dt_comm_finalize();
    return anybad ? 1 : 0;
}
