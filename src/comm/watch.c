/* Watching a rank (watch.h): the board and the watchdog thread. The blocking MPI calls mark
 * their waits through the profiling-interface wrappers of pmpi.c. */
#include "comm/trace.h"
#include "comm/watch.h"

#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static dt_board mem_board = {.magic = DT_BOARD_MAGIC, .rank = -1, .dropped = {-1, -1, -1, -1, -1, -1, -1, -1}};
static dt_board *board = &mem_board;
static int board_is_file = 0;

/* read by the watchdog thread: static strings set by the rank's one thread */
static _Atomic(const char *) cur_wait = NULL;
static _Atomic(const char *) cur_phase = NULL;
static const char *scheme_name = "";
static int wait_depth = 0; /* the rank's thread only */
static const char *wait_name = NULL; /* the outermost wait, and its start on the timeline (--trace) */
static double wait_t0 = 0;
static double timeout_s = 0;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int dt_watch_board_open(const char *dir, int rank) {
    char path[4200];
    snprintf(path, sizeof path, "%s/rank.%d", dir, rank);
    /* in the supervisor's own folder; still never through a link planted at the name */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)sizeof(dt_board)) != 0) { close(fd); return -1; }
    void *p = mmap(NULL, sizeof(dt_board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return -1;
    board = p;
    board_is_file = 1;
    memset(board, 0, sizeof *board);
    board->rank = rank;
    board->pid = (int32_t)getpid();
    for (int i = 0; i < 8; i++) atomic_store(&board->dropped[i], -1);
    board->magic = DT_BOARD_MAGIC; /* last: a reader sees a whole board or none */
    return 0;
}

dt_board *dt_watch_board(void) { return board; }

int dt_watch_left_out(void) { return atomic_load(&board->dropped[0]) >= 0; }

void dt_watch_identify(int rank, int pid, const char *host) {
    board->rank = rank;
    board->pid = pid;
    snprintf(board->host, sizeof board->host, "%s", host ? host : "");
    atomic_store(&board->state, DT_RANK_RUNNING);
}

void dt_watch_progress(int epoch1, long step) {
    atomic_store_explicit(&board->epoch, epoch1, memory_order_relaxed);
    atomic_store_explicit(&board->step, step, memory_order_relaxed);
}

void dt_watch_phase(const char *phase) { atomic_store_explicit(&cur_phase, phase, memory_order_relaxed); }

void dt_watch_wait_begin(const char *what) {
    if (wait_depth++ > 0) return;
    wait_name = what;
    wait_t0 = dt_trace_t0();
    atomic_store_explicit(&cur_wait, what, memory_order_relaxed);
    const int64_t now = now_ns(); /* (0 says "not waiting": a simulation's clock starts at 0) */
    atomic_store_explicit(&board->wait_since_ns, now > 0 ? now : 1, memory_order_release);
}

void dt_watch_wait_end(void) {
    if (--wait_depth > 0) return;
    atomic_store_explicit(&board->wait_since_ns, 0, memory_order_release);
    dt_trace_event(DT_TRACE_MPI, wait_name, wait_t0, -1, -1, -1);
}

const char *dt_watch_waiting(double *since_s, const char **phase) {
    const int64_t since = atomic_load_explicit(&board->wait_since_ns, memory_order_acquire);
    *since_s = (double)since / 1e9;
    *phase = atomic_load_explicit(&cur_phase, memory_order_relaxed);
    return since ? atomic_load_explicit(&cur_wait, memory_order_relaxed) : NULL;
}

void dt_watch_end(int state, int exit_code) {
    if (state == DT_RANK_FINISHING) atomic_store(&board->work_done, 1);
    atomic_store(&board->exit_code, exit_code);
    atomic_store(&board->state, state);
}

void dt_watch_failed(const char *line, int exit_code) {
    snprintf(board->note, sizeof board->note, "%s", line);
    dt_watch_end(DT_RANK_FAILED, exit_code);
}

void dt_watch_left(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store(&board->left_ns, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

void dt_watch_dropped(const int *ranks, int n) {
    for (int i = 0; i < 8; i++) atomic_store(&board->dropped[i], i < n ? ranks[i] : -1);
}

/* The watchdog: once a second, is the current wait older than the timeout? It says so and
 * ends the process (_exit: the rank's thread is inside MPI, which must not be re-entered;
 * the launcher then ends the other ranks). Under a supervisor the line goes on the board
 * only, and the supervisor says it once for the job. */
static void *watchdog(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
        const int64_t now = now_ns(), last = atomic_load_explicit(&board->tick_ns, memory_order_relaxed);
        if (last > 0 && now - last > DT_WATCH_GAP_NS) {
            atomic_store_explicit(&board->gap_from_ns, last, memory_order_relaxed);
            atomic_store_explicit(&board->gap_to_ns, now, memory_order_relaxed);
        }
        atomic_store_explicit(&board->tick_ns, now, memory_order_relaxed);
        const int64_t since = atomic_load_explicit(&board->wait_since_ns, memory_order_acquire);
        if (!since) continue;
        const double waited = (double)(now - since) / 1e9;
        if (waited <= timeout_s) continue;
        const char *what = atomic_load_explicit(&cur_wait, memory_order_relaxed);
        const char *phase = atomic_load_explicit(&cur_phase, memory_order_relaxed);
        snprintf(board->note, sizeof board->note,
                 "rank %d waited %.0f s in %s (%s%s%s, epoch %d, step %lld) with no progress: --timeout %g",
                 board->rank, waited, what ? what : "MPI", scheme_name, phase ? " " : "", phase ? phase : "",
                 (int)atomic_load(&board->epoch), (long long)atomic_load(&board->step), timeout_s);
        atomic_store(&board->state, DT_RANK_TIMED_OUT);
        if (!board_is_file) {
            fprintf(stderr, "dtrain: error: %s\n", board->note);
            fflush(stderr);
        }
        _exit(4);
    }
    return NULL;
}

int dt_watch_start(double timeout, const char *scheme) {
    if (timeout <= 0) return 0;
    timeout_s = timeout;
    scheme_name = scheme ? scheme : "";
    /* the first tick is now: a rank stopped before the thread's first look (a second in; an
     * epoch of a small model takes less) must still show when it stopped ticking */
    atomic_store_explicit(&board->tick_ns, now_ns(), memory_order_relaxed);
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&th, &a, watchdog, NULL);
    pthread_attr_destroy(&a);
    return err;
}
