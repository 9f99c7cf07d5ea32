/* The ranks of `dtrain sim calibrate` (cmd_calibrate.c starts two under the launcher, one a
 * host): ranks 0 and 1 measure the link between them as SimGrid's calibration procedure does
 * (the one-way time of each message size, median of a ping-pong's trips, each after a pause as
 * training computes between its messages; the time MPI_Isend takes to return; the time
 * MPI_Recv takes for a message already there; the largest both ways at once), how much of a
 * non-blocking sum moves while the ranks compute, then the hosts' speed on a model (both ranks
 * computing at once, as a cluster's hosts do), and rank 0 writes the calibration file
 * (calib_file.h). A hidden subcommand: `dtrain sim calibrate` gives its flags. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/calib_file.h"
#include "cli/cli.h"
#include "core/alloc.h"
#include "core/flag_table.h"
#include "dtrain.h"

typedef struct {
    const char *out, *model;
    int batch, reps, steps;
    double gap_ms, longest_s;
} rank_opts;

#define O rank_opts
static const dt_flag rank_flags[] = {
    {"out", DT_AT_TEXT(O, out), .metavar = "FILE", .help = "the calibration file"},
    {"model", DT_AT_TEXT(O, model), .def = "cnn1", .help = "the speed's model"},
    {"batch", DT_AT_INT(O, batch), .def = "64", .min = 1, .max = 1e5, .help = "its batch"},
    {"reps", DT_AT_INT(O, reps), .def = "15", .min = 3, .max = 10000, .help = "trips a size"},
    {"steps", DT_AT_INT(O, steps), .def = "30", .min = 3, .max = 100000, .help = "timed steps"},
    {"gap-ms", DT_AT_FLOAT(O, gap_ms), .def = "8", .min = 0, .max = 10000, .help = "pause before a trip"},
    {"longest", DT_AT_FLOAT(O, longest_s), .def = "0.25", .min = 0.001, .max = 100, .help = "largest message's time"},
};
#undef O

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

static void pause_ms(double ms) {
    const double s = ms / 1e3;
    const struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

/* one size: its one-way time, MPI_Isend's return time and MPI_Recv's on an arrived message
 * (rank 0's figures; rank 1 times the receive and sends it over) */
static void measure(int rank, int size, const rank_opts *o, char *buf, double *t, double out[3]) {
    const int R = o->reps;
    for (int r = 0; r < R; r++) { /* the ping-pong */
        pause_ms(o->gap_ms);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
        t[r] = (MPI_Wtime() - t0) / 2;
    }
    out[0] = median(t, R);
    for (int r = 0; r < R; r++) { /* MPI_Isend's return, to a posted receive */
        MPI_Request q = MPI_REQUEST_NULL;
        if (rank == 1) MPI_Irecv(buf, size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &q);
        pause_ms(o->gap_ms);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            const double t0 = MPI_Wtime();
            MPI_Isend(buf, size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &q);
            t[r] = MPI_Wtime() - t0;
        }
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
    out[1] = rank == 0 ? median(t, R) : 0;
    /* MPI_Recv of a message already there: rank 1 waits out its transfer first */
    const double wait_ms = 2e3 * out[0] + 2;
    for (int r = 0; r < R; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) MPI_Send(buf, size, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
        if (rank == 1) {
            pause_ms(wait_ms);
            const double t0 = MPI_Wtime();
            MPI_Recv(buf, size, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            t[r] = MPI_Wtime() - t0;
        }
    }
    double recv = rank == 1 ? median(t, R) : 0;
    if (rank == 1) MPI_Send(&recv, 1, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD);
    if (rank == 0) MPI_Recv(&recv, 1, MPI_DOUBLE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    out[2] = recv;
}

/* The sizes: 0, 64 B, then 4x up to 64 kB, then doubling until a message takes longest_s (or
 * 64 MB): the megabyte-to-100 MB buckets of large models are where the rate is reached. */
static int next_size(int size) { return size == 0 ? 64 : size < 65536 ? size * 4 : size * 2; }

static dt_status links(int rank, const rank_opts *o, dt_calibration *c) {
    const int largest = 64 << 20;
    char *buf = calloc((size_t)largest + 1, 1);
    double *t = calloc((size_t)o->reps, sizeof *t);
    if (!buf || !t) { free(buf); free(t); return dt_nomem("the calibration's buffers"); }
    for (int size = 0; c->nsizes < DT_CALIB_SIZES; size = next_size(size)) {
        double v[3];
        measure(rank, size, o, buf, t, v);
        const int i = c->nsizes++;
        c->size[i] = size, c->oneway_s[i] = v[0], c->isend_s[i] = v[1], c->recv_s[i] = v[2];
        int more = rank == 0 && v[0] < o->longest_s && next_size(size) <= largest;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) break;
    }
    /* the largest size both ways at once (MPI_Sendrecv on both ranks), the median of 5: what
     * a sum's exchanges get, where the ping-pong above measured one way at a time */
    const int big = (int)c->size[c->nsizes - 1];
    char *back = calloc((size_t)big + 1, 1);
    if (!back) { free(buf); free(t); return dt_nomem("the calibration's buffers"); }
    const int R = o->reps < 5 ? o->reps : 5;
    for (int r = 0; r < R; r++) {
        pause_ms(o->gap_ms);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (rank < 2)
            MPI_Sendrecv(buf, big, MPI_BYTE, 1 - rank, 5, back, big, MPI_BYTE, 1 - rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t[r] = MPI_Wtime() - t0;
    }
    c->duplex_s = rank == 0 ? median(t, R) : 0;
    free(back);
    free(buf);
    free(t);
    return DT_OK;
}

/* both ranks go on, or neither: this rank's st, or the line that the other could not (what it
 * could not do with --model) */
static dt_status both_ranks(dt_status st, const rank_opts *o, const char *what) {
    int bad = st != DT_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return DT_OK;
    return st != DT_OK ? st : dt_fail(DT_ERR_ARG, "--model %s: the other rank could not %s it", o->model, what);
}

/* seconds that n steps of the model take on this rank, both ranks computing and nothing crossing:
 * the median of 3 (as the steps beside a sum are timed: the fastest would count their spread
 * as stolen) */
static double steps_alone(dt_bench_rig *g, int n) {
    double t[3];
    for (int r = 0; r < 3; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        dt_bench_rig_steps(g, n);
        t[r] = MPI_Wtime() - t0;
    }
    return median(t, 3);
}

/* How much of a non-blocking sum the MPI moves while the rank computes (comm/sim_coll.c):
 * K buckets of 1 MB (below UCX's rendezvous threshold, as dtrain run sets it; a large model's
 * tensors are of this size), each started (MPI_Iallreduce), then computing for twice its
 * blocking sum's time with one MPI_Testall, as allreduce's buckets go during backward; then
 * MPI_Waitall. The share of the blocking sums' time that the wait no longer takes ran while
 * computing (the median of 5); a call then moved hidden x bucket / 2 bytes (two calls a bucket:
 * its start and its test, each rank sending the bucket's size in all). Nearly all of it (from
 * 90%): the MPI moves messages in the background, bytes_per_call 0; at least 16 kB a call.
 * The computing is training steps of the model (--model, on random data), as many as last
 * about that long: what they took beyond their time with nothing crossing is what the
 * network's work (the kernel's TCP, on the same core where a host has one core a rank; its
 * copies in the same caches) took from them, and over the bytes that crossed meanwhile
 * (hidden x the bucket, each rank sending the bucket's size in all) its cost a byte. On
 * 2026-12-01's namespace hosts a gradient sum hidden behind backward made backward as much
 * longer (docs/results.md). (A scalar loop for the computing measured about as much, 5.2-7.3
 * ns a byte at 1 Gbit/s against the steps' 5.6-6.1: the steps are kept as what training
 * computes.) */
static dt_status progress(int rank, const rank_opts *o, dt_calibration *c) {
    enum { K = 8, REPS = 5 };
    const size_t bucket = 1 << 20, n = bucket / sizeof(float);
    dt_bench_rig *g = NULL;
    float *buf = NULL;
    dt_status st = dt_bench_rig_new(o->model, o->batch, &g);
    if (st == DT_OK && !(buf = calloc(K * n, sizeof *buf))) st = dt_nomem("the progress measurement's buffers");
    if ((st = both_ranks(st, o, "make")) != DT_OK) {
        free(buf);
        dt_bench_rig_free(g);
        return st;
    }
    dt_bench_rig_steps(g, 3); /* warm */
    const double step_s = steps_alone(g, 3) / 3;
    MPI_Request q[K];
    MPI_Status sts[K]; /* not MPI_STATUSES_IGNORE: GCC 12 takes it for an array of size 0 */
    double hidden[REPS], per_byte[REPS];
    int costed = 0, ranks = 2;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int r = 0; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int b = 0; b < K; b++) MPI_Allreduce(MPI_IN_PLACE, buf + b * n, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double blocking = MPI_Wtime() - t0;
        /* both ranks compute as long: the slower one's time */
        MPI_Allreduce(MPI_IN_PLACE, &blocking, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        /* steps for twice a bucket's blocking time (at least one), the same on both ranks */
        int steps = (int)fmax(1, round(2 * blocking / K / step_s));
        MPI_Allreduce(MPI_IN_PLACE, &steps, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        const double compute = steps_alone(g, steps);
        MPI_Barrier(MPI_COMM_WORLD);
        double stolen = 0;
        for (int b = 0; b < K; b++) {
            MPI_Iallreduce(MPI_IN_PLACE, buf + b * n, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q[b]);
            const double w0 = MPI_Wtime();
            dt_bench_rig_steps(g, steps);
            stolen += MPI_Wtime() - w0 - compute;
            int done = 0;
            MPI_Testall(b + 1, q, &done, sts);
        }
        t0 = MPI_Wtime();
        MPI_Waitall(K, q, sts);
        double wait = MPI_Wtime() - t0, stolen_sum = 0;
        /* the slower wait; the ranks' stolen time, summed (their mean below) */
        MPI_Allreduce(MPI_IN_PLACE, &wait, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&stolen, &stolen_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        hidden[r] = 1 - wait / blocking;
        /* too little crossed while computing to tell (under 5% of the bytes): not this repeat */
        if (hidden[r] >= 0.05) per_byte[costed++] = fmax(0, stolen_sum / ranks) / (hidden[r] * (double)bucket * K);
    }
    free(buf);
    dt_bench_rig_free(g);
    if (rank != 0) return DT_OK;
    const double h = median(hidden, REPS);
    c->progress_bucket = (double)bucket;
    c->progress_hidden = h;
    /* a share at or below 0 (the wait as long as the blocking sums, or longer: noise) is
     * nothing moved while computing, which a piece of 16 kB a call stands for */
    c->progress_bytes = h >= 0.9 ? 0 : fmax(16384, h * (double)bucket / 2);
    /* from 3 repeats that moved enough */
    c->progress_cpu_per_byte = costed >= 3 ? median(per_byte, costed) : 0;
    return DT_OK;
}

/* the hosts' speed: each rank times training steps of the model, all at once */
static dt_status speed(int rank, const rank_opts *o, dt_calibration *c) {
    double *secs = calloc((size_t)o->steps, sizeof *secs), fwd = 0, mine = 0, all[2] = {0, 0};
    if (!secs) return dt_nomem("%d step times", o->steps);
    MPI_Barrier(MPI_COMM_WORLD);
    dt_status st = rank < 2 ? dt_bench_time_steps(o->model, o->batch, 3, o->steps, secs, &fwd) : DT_OK;
    if (st == DT_OK && rank < 2) mine = 3 * fwd * o->batch / median(secs, o->steps);
    free(secs);
    if ((st = both_ranks(st, o, "time")) != DT_OK) return st;
    MPI_Gather(&mine, 1, MPI_DOUBLE, rank == 0 ? all : NULL, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0) return DT_OK;
    c->rank_speed[0] = all[0];
    c->rank_speed[1] = all[1];
    c->speed = (all[0] + all[1]) / 2;
    snprintf(c->model, sizeof c->model, "%s", o->model);
    c->batch = o->batch;
    return DT_OK;
}

int dt_cmd_sim_calibrate_rank(int argc, char **argv) {
    static rank_opts o;
    const dt_flag_list list = {.flags = rank_flags, .n = NOPTS(rank_flags), .base = &o};
    int help = 0;
    dt_status st = dt_flags_defaults(rank_flags, NOPTS(rank_flags), &o);
    if (st == DT_OK) st = dt_flags_parse_argv("sim calibrate", argc, argv, 2, &list, 1, &help);
    if (st == DT_OK && !o.out) st = dt_fail(DT_ERR_ARG, "--out FILE: expected the calibration file");
    if (st != DT_OK || help) return st != DT_OK ? dt_cli_fail() : 0;
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static dt_calibration c;
    if (size < 2) st = dt_fail(DT_ERR_ARG, "dtrain sim calibrate: needs 2 ranks, one on each of two hosts (got %d)", size);
    /* the hosts' names: whether the two ranks are on two hosts is the user's to know (the file says) */
    char name[MPI_MAX_PROCESSOR_NAME] = "", names[2 * MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(name, &len);
    if (st == DT_OK && size >= 2) {
        MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, rank == 0 ? names : NULL, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
                   MPI_COMM_WORLD);
        if (rank == 0) snprintf(c.hosts, sizeof c.hosts, "%s and %s", names, names + MPI_MAX_PROCESSOR_NAME);
        st = links(rank, &o, &c);
        if (st == DT_OK) st = progress(rank, &o, &c);
    }
    if (st == DT_OK) st = speed(rank, &o, &c);
    if (st == DT_OK && rank == 0) {
        const time_t now = time(NULL);
        strftime(c.when, sizeof c.when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        dt_calib_fit(&c);
        st = dt_calib_write(&c, o.out);
    }
    /* as dt_comm_finalize: a barrier, then no MPI call for half a second, or MPICH's UCX netmod
     * can spin in MPI_Finalize for ever across hosts */
    MPI_Barrier(MPI_COMM_WORLD);
    pause_ms(500);
    MPI_Finalize();
    return st == DT_OK ? 0 : dt_cli_fail();
}
