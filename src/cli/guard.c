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

/* The guard retitles itself, so that ps and top tell it from its rank ("dtrain guard rank 2",
 * comm "dtrain-guard"): its command line is written over its own argument strings, which
 * the kernel shows in /proc/PID/cmdline (the rank, after fork, keeps its own copy). */
static void retitle(char **argv, int rank) {
    char title[64];
    snprintf(title, sizeof title, "dtrain guard rank %d", rank);
    prctl(PR_SET_NAME, "dtrain-guard");
    if (!argv || !argv[0]) return;
    char *start = argv[0], *end = argv[0] + strlen(argv[0]);
    for (int i = 1; argv[i] && argv[i] == end + 1; i++) end = argv[i] + strlen(argv[i]);
    const size_t room = (size_t)(end - start); /* bytes before the last NUL */
    if (room == 0) return;
    memset(start, 0, room);
    memcpy(start, title, strlen(title) < room ? strlen(title) : room);
}

/* The rank learns of its guard's death from the kernel (PR_SET_PDEATHSIG) and signs its own
 * board before it follows: otherwise nobody would, and the job would end unnamed. */
#define GUARD_GONE_SIGNAL (SIGRTMIN + 5)
/* The guard learns of its parent's death (the launcher's proxy) the same way. */
#define PROXY_GONE_SIGNAL (SIGRTMIN + 6)

static pid_t guard_pid_seen = 0, proxy_pid_seen = 0;

/* An end already on the board (by the rank, its watchdog, the supervisor or a handler here)
 * is the cause, and stays: what follows it is its consequence. */
static int end_signed(int state) {
    return state == DT_RANK_DONE || state == DT_RANK_FAILED || state == DT_RANK_TIMED_OUT || state == DT_RANK_DROPPED ||
           state == DT_RANK_PROXY_LOST;
}

static void mark_lost(int state) {
    dt_board *b = dt_watch_board();
    if (end_signed(atomic_load(&b->state))) return;
    atomic_store(&b->ended_ns, realtime_ns());
    atomic_store(&b->state, state);
}

static void on_guard_gone(int sig) {
    (void)sig;
    if (getppid() == guard_pid_seen) return; /* not from the kernel: the guard is there */
    mark_lost(DT_RANK_GUARD_LOST);
    kill(getpid(), SIGKILL); /* the rank must not outlive its guard */
}

static void on_proxy_gone(int sig) {
    (void)sig;
    if (getppid() == proxy_pid_seen) return;
    mark_lost(DT_RANK_PROXY_LOST);
    guard_forwarded = 1; /* the rank's end that follows is this loss's consequence */
    if (guard_child > 0) kill((pid_t)guard_child, SIGKILL);
}

static void on_signal(int sig, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigaction(sig, &sa, NULL);
}

void dt_guard_rank(char **argv) {
    const char *dir = getenv("DTRAIN_BOARD");
    const int rank = dir ? launcher_rank() : -1;
    if (rank < 0 || dt_watch_board_open(dir, rank) != 0) return; /* unsupervised: no guard */
    const pid_t parent = getpid(), proxy = getppid();
    dt_board *b = dt_watch_board();
    b->guard_pid = (int32_t)parent;
    b->proxy_pid = (int32_t)proxy;
    proxy_pid_seen = proxy;
    /* before fork: a proxy lost from here on is seen */
    on_signal(PROXY_GONE_SIGNAL, on_proxy_gone);
    prctl(PR_SET_PDEATHSIG, PROXY_GONE_SIGNAL);
    if (getppid() != proxy) _exit(1);
    /* SIGTERM and SIGINT wait while the two processes take up their handlers: the rank keeps
     * what it had (a stop asked with --checkpoint: cmd_train.c), the guard passes them on; one
     * that came in between would otherwise be taken by the guard as the rank's own */
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    sigprocmask(SIG_BLOCK, &stops, &old);
    const pid_t child = fork();
    if (child < 0) { sigprocmask(SIG_SETMASK, &old, NULL); return; }
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        guard_pid_seen = parent;
        signal(PROXY_GONE_SIGNAL, SIG_DFL);
        on_signal(GUARD_GONE_SIGNAL, on_guard_gone);
        prctl(PR_SET_PDEATHSIG, GUARD_GONE_SIGNAL);
        if (getppid() != parent) _exit(1);
        b->pid = (int32_t)getpid();
        return;
    }
    guard_child = child;
    b->pid = (int32_t)child;
    retitle(argv, rank);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (int i = 0; i < (int)(sizeof sigs / sizeof sigs[0]); i++) on_signal(sigs[i], guard_forward);
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    const int state = atomic_load(&b->state), kept = end_signed(state);
    if (state != DT_RANK_PROXY_LOST) atomic_store(&b->ended_ns, realtime_ns());
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        atomic_store(&b->signal, sig);
        /* a signal we passed on is the launcher ending the job, not this rank's loss */
        if (!guard_forwarded && !kept) atomic_store(&b->state, DT_RANK_LOST);
        /* A rank that aborted itself (MPI and UCX abort when a peer vanishes) is most often the
         * consequence of another rank's loss. Its guard's exit makes the launcher kill every
         * other guard at once, and on a loaded machine the lost rank's guard may not yet have
         * run to record its loss: wait a moment so the cause is on its board first. */
        if (sig == SIGABRT && !guard_forwarded) pause_a_second();
        _exit(128 + sig);
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    atomic_store(&b->exit_code, code);
    if (!kept) atomic_store(&b->state, code == 0 ? DT_RANK_DONE : DT_RANK_FAILED);
    if (code != 0 && !guard_forwarded) pause_a_second(); /* as for an abort, above */
    _exit(code);
}
