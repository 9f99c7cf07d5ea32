/* Waiting by polling in the simulation build (sim_poll.h). Only in dtrain-sim (CMakeLists.txt):
 * it defines SMPI's polling calls (MPI_Test and its kin, MPI_Iprobe) over their PMPI_ twins, as
 * pmpi.c does the blocking ones, to count the polls that find nothing at one simulated
 * instant. Every simulated rank has its own copy of the statics here (SMPI's privatization). */
#include "comm/sim_poll.h"

#include "comm/watch.h"
#include "core/sim.h"

#include <mpi.h>
#include <simgrid/engine.h> /* simgrid_get_clock: the simulated clock, read at no cost */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double limit_s = 0;
static const char *scheme_name = "";

/* A stall made for the tests (DTRAIN_TEST_SIM_STALL=R, R:idle or R:block): rank R waits for a
 * message no rank sends, polling at no simulated cost (a loop without dt_sim_poll_idle: the
 * stall line), with it (:idle: the --timeout line), or blocked (:block: SimGrid's deadlock). */
static void test_stall(void) {
    const char *spec = getenv("DTRAIN_TEST_SIM_STALL");
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!spec || atoi(spec) != rank || size < 2) return;
    const int idle = strstr(spec, ":idle") != NULL;
    int never = 0, done = 0;
    MPI_Request q;
    MPI_Irecv(&never, 1, MPI_INT, (rank + 1) % size, 32767, MPI_COMM_WORLD, &q);
    dt_watch_wait_begin("a message no rank sends (DTRAIN_TEST_SIM_STALL)");
    if (strstr(spec, ":block")) MPI_Wait(&q, MPI_STATUS_IGNORE);
    for (int polls = 0; !done; polls++) {
        MPI_Test(&q, &done, MPI_STATUS_IGNORE);
        if (idle) dt_sim_poll_idle(polls);
    }
}

void dt_sim_poll_limits(double timeout_s, const char *scheme) {
    limit_s = timeout_s;
    scheme_name = scheme ? scheme : "";
    test_stall();
}

/* Where the rank is, for the lines: " (eventgrad after_backward, epoch 2, step 118)" */
static void where(char *out, size_t len) {
    const dt_board *b = dt_watch_board();
    double since = 0;
    const char *phase = NULL;
    dt_watch_waiting(&since, &phase);
    snprintf(out, len, "%s%s%s, epoch %d, step %lld", scheme_name, phase ? " " : "", phase ? phase : "",
             (int)atomic_load(&b->epoch), (long long)atomic_load(&b->step));
}

/* Ends the simulation (every rank is in this process) with the watchdog's status. */
static void end_run(const char *line) {
    fprintf(stderr, "dtrain: error: %s\n", line);
    fflush(stderr);
    fflush(stdout);
    _exit(4);
}

/* ------------------------------------------------------------------ host failures */

static int fail_known = 0;
static double fail_at = -1;
static char fail_host[128];

static void read_failure(void) {
    fail_known = 1;
    const char *spec = getenv("DTRAIN_SIM_FAILURES");
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (const char *p = spec; p && *p;) {
        int r, used = 0;
        double at;
        char host[128];
        if (sscanf(p, "%d:%lf:%127[^,]%n", &r, &at, host, &used) != 3) return;
        if (r == rank && (fail_at < 0 || at < fail_at)) {
            fail_at = at;
            snprintf(fail_host, sizeof fail_host, "%s", host);
        }
        p += used;
        if (*p == ',') p++;
    }
}

void dt_sim_check_failure(void) {
    if (!fail_known) read_failure();
    if (fail_at < 0) return;
    const double now = dt_sim_clock();
    if (now < fail_at) return;
    const dt_board *b = dt_watch_board();
    const long long step = (long long)atomic_load(&b->step);
    const char *fd = getenv("DTRAIN_SIM_FAILURE_FD");
    if (fd) dprintf(atoi(fd), "%d %.17g %s %lld\n", b->rank, fail_at, fail_host, step);
    char line[400];
    snprintf(line, sizeof line, "rank %d lost: its host %s failed at simulated time %g s (the cluster file's [failure %s]; "
             "epoch %d, step %lld, noticed at %.6f s)", b->rank, fail_host, fail_at, fail_host, (int)atomic_load(&b->epoch),
             step, now);
    end_run(line);
}

void dt_sim_poll_idle(int polls) {
    dt_sim_check_failure();
    double cost_s = DT_SIM_POLL_S;
    for (int i = 0; i < polls && cost_s < DT_SIM_POLL_MAX_S; i++) cost_s *= 2;
    if (cost_s > DT_SIM_POLL_MAX_S) cost_s = DT_SIM_POLL_MAX_S;
    const struct timespec cost = {0, (long)(cost_s * 1e9 + 0.5)};
    nanosleep(&cost, NULL); /* SMPI's: simulated time on this rank's host */
    if (!(limit_s > 0)) return;
    double since = 0;
    const char *phase = NULL, *what = dt_watch_waiting(&since, &phase);
    const double now = simgrid_get_clock();
    if (!what || now - since <= limit_s) return;
    char at[200], line[600];
    where(at, sizeof at);
    snprintf(line, sizeof line, "rank %d waited %.0f simulated s in %s (%s) with no progress: --timeout %g, at simulated time %.6f s",
             dt_watch_board()->rank, now - since, what, at, limit_s, now);
    end_run(line);
}

/* ------------------------------------------------------------------ the polls, counted */

static double still_at = -1; /* the simulated instant of the fruitless polls counted */
static long fruitless = 0;

static void polled(const char *call, int found) {
    const double now = simgrid_get_clock();
    if (found || now != still_at) {
        still_at = now;
        fruitless = 0;
        return;
    }
    if (++fruitless < DT_SIM_STALL_POLLS) return;
    double since = 0;
    const char *phase = NULL, *what = dt_watch_waiting(&since, &phase);
    char at[200], line[700];
    where(at, sizeof at);
    snprintf(line, sizeof line, "dtrain sim: rank %d stalled: %ld polls of %s%s%s%s found nothing and the simulated clock "
             "did not move (at simulated time %.6f s; %s): a wait that costs no simulated time never ends",
             dt_watch_board()->rank, fruitless, call, what ? " (" : "", what ? what : "", what ? ")" : "", now, at);
    end_run(line);
}

int MPI_Test(MPI_Request *q, int *flag, MPI_Status *s) {
    const int rc = PMPI_Test(q, flag, s);
    polled("MPI_Test", rc != MPI_SUCCESS || *flag);
    return rc;
}

int MPI_Testall(int n, MPI_Request q[], int *flag, MPI_Status s[]) {
    const int rc = PMPI_Testall(n, q, flag, s);
    polled("MPI_Testall", rc != MPI_SUCCESS || *flag);
    return rc;
}

int MPI_Testany(int n, MPI_Request q[], int *index, int *flag, MPI_Status *s) {
    const int rc = PMPI_Testany(n, q, index, flag, s);
    polled("MPI_Testany", rc != MPI_SUCCESS || *flag);
    return rc;
}

int MPI_Testsome(int n, MPI_Request q[], int *outcount, int *indices, MPI_Status s[]) {
    const int rc = PMPI_Testsome(n, q, outcount, indices, s);
    polled("MPI_Testsome", rc != MPI_SUCCESS || *outcount != 0);
    return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm c, int *flag, MPI_Status *s) {
    const int rc = PMPI_Iprobe(source, tag, c, flag, s);
    polled("MPI_Iprobe", rc != MPI_SUCCESS || *flag);
    return rc;
}
