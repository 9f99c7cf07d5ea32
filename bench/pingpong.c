/* MPI ping-pong between ranks 0 and 1 (scripts/sim-validate calibrate): for each size, the
 * one-way time of a message, half the round trip, the median of R trips, each after a pause
 * of G ms (training computes between its messages: a shaped link's token bucket refills).
 * Prints "SIZE SECONDS" lines. Usage: pingpong R G SIZE... */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: pingpong R GAP_MS SIZE...\n");
        MPI_Finalize();
        return 2;
    }
    const int reps = atoi(argv[1]);
    const double gap = atof(argv[2]) / 1e3;
    for (int a = 3; a < argc; a++) {
        const int size = atoi(argv[a]);
        char *buf = calloc((size_t)size + 1, 1);
        double *t = calloc((size_t)reps, sizeof *t);
        for (int r = 0; r < reps; r++) {
            const struct timespec pause = {(time_t)gap, (long)((gap - (double)(time_t)gap) * 1e9)};
            nanosleep(&pause, NULL);
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
        qsort(t, (size_t)reps, sizeof *t, cmp);
        if (rank == 0) printf("%d %.9f\n", size, t[reps / 2]);
        free(buf);
        free(t);
    }
    /* as dt_comm_finalize (src/comm/comm.c): a barrier, then no MPI call for half a second, or
     * MPICH's UCX netmod can spin in MPI_Finalize for ever across hosts */
    MPI_Barrier(MPI_COMM_WORLD);
    const struct timespec settle = {0, 500000000L};
    nanosleep(&settle, NULL);
    MPI_Finalize();
    return 0;
}
