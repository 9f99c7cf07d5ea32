/* The guard of each rank under `dtrain run` (guard.h). */
#include "cli/guard.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/watch.h"

static int64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pause_a_second(void) {
    struct timespec ts = {1, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static volatile sig_atomic_t guard_child = 0, guard_forwarded = 0;

static void guard_forward(int sig) {
    guard_forwarded = 1;
    if (guard_child > 0) kill((pid_t)guard_child, sig);
}

/* the rank's number from the launcher's environment (MPICH/hydra, Open MPI, PMIx, Slurm) */
static int launcher_rank(void) {
    const char *names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(names[i]);
        char *end;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0 && r < 1000000) return (int)r;
    }
    return -1;
}

void dt_guard_rank(char **argv) {
    (void)argv;
    const char *dir = getenv("DTRAIN_BOARD");
    const int rank = dir ? launcher_rank() : -1;
    if (rank < 0 || dt_watch_board_open(dir, rank) != 0) return; /* unsupervised: no guard */
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) return;
    dt_board *b = dt_watch_board();
    if (child == 0) {
        /* the rank: it must not outlive its guard (the launcher ends jobs by ending guards) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        b->pid = (int32_t)getpid();
        return;
    }
    guard_child = child;
    b->pid = (int32_t)child;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = guard_forward;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (int i = 0; i < (int)(sizeof sigs / sizeof sigs[0]); i++) sigaction(sigs[i], &sa, NULL);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    atomic_store(&b->ended_ns, realtime_ns());
    const int state = atomic_load(&b->state);
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        atomic_store(&b->signal, sig);
        /* a signal we passed on is the launcher ending the job, not this rank's loss */
        if (!guard_forwarded && state != DT_RANK_TIMED_OUT && state != DT_RANK_DROPPED) atomic_store(&b->state, DT_RANK_LOST);
        /* A rank that aborted itself (MPI and UCX abort when a peer vanishes) is most often the
         * consequence of another rank's loss. Its guard's exit makes the launcher kill every
         * other guard at once, and on a loaded machine the lost rank's guard may not yet have
         * run to record its loss: wait a moment so the cause is on its board first. */
        if (sig == SIGABRT && !guard_forwarded) pause_a_second();
        _exit(128 + sig);
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    atomic_store(&b->exit_code, code);
    if (state != DT_RANK_TIMED_OUT && state != DT_RANK_DROPPED) atomic_store(&b->state, code == 0 ? DT_RANK_DONE : DT_RANK_FAILED);
    if (code != 0 && !guard_forwarded) pause_a_second(); /* as for an abort, above */
    _exit(code);
}
