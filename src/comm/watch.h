/* Watching a rank: where it is (epoch, step, phase), what it is waiting for, and a watchdog
 * that ends a wait which makes no progress.
 *
 * Every blocking MPI call dtrain makes (collectives, waits, window flushes, finalize) goes
 * through the MPI profiling interface (pmpi.c defines MPI_Allreduce and friends, which call
 * PMPI_Allreduce...), so each one is timed without a wrapper at its call site; the few
 * waits that spin on non-blocking calls (gossip's lock-step, downpour's replies) mark
 * themselves with dt_watch_wait_begin/end. A watchdog thread (no MPI calls) checks once a
 * second: a wait older than --timeout ends the process with a line naming what it waited for
 * (as NCCL's and torch.distributed's timeouts do), instead of a hang.
 *
 * Under `dtrain run` each rank also has a board: a small shared file (the supervisor's run
 * folder, rank.R) that the rank keeps up to date and its guard (the parent process that
 * watches it die) signs, so the supervisor can say "rank 2 on HOST was killed by signal 9
 * during epoch 2, step 118". Without a supervisor the board lives in memory. */
#ifndef DT_WATCH_H
#define DT_WATCH_H

#include <stdatomic.h>
#include <stdint.h>

enum {
    DT_RANK_STARTING = 0,
    DT_RANK_RUNNING = 1,
    DT_RANK_DONE = 2,      /* ended with status 0 */
    DT_RANK_FAILED = 3,    /* ended with its own error (said on stderr), exit_code set */
    DT_RANK_LOST = 4,      /* killed by a signal (the guard saw it), signal set */
    DT_RANK_TIMED_OUT = 5, /* the watchdog ended it, note says why */
    DT_RANK_DROPPED = 6,   /* dropped by the scheme (downpour --worker-timeout) and ended */
    DT_RANK_FINISHING = 7, /* its work is done (weights written); finalising MPI */
    DT_RANK_GUARD_LOST = 8, /* its guard was killed, and the rank with it (the rank saw it) */
    DT_RANK_PROXY_LOST = 9, /* the launcher's process above its guard died (the guard saw it) */
    DT_RANK_STATES = 10,
};

#define DT_BOARD_MAGIC 0x31425444u /* "DTB1" */
/* A watchdog that ticks once a second and has not for this long was stopped or frozen. */
#define DT_WATCH_GAP_NS 2500000000LL

/* The board's layout is shared by the rank, its guard and the supervisor (same binary). */
typedef struct dt_board {
    uint32_t magic;
    int32_t rank, pid; /* pid of the rank process (not its guard) */
    char host[64];
    _Atomic int32_t state;
    _Atomic int32_t epoch;          /* 1-based epoch in progress; 0 before training */
    _Atomic int64_t step;           /* global step count */
    _Atomic int64_t wait_since_ns;  /* CLOCK_MONOTONIC of the current wait's start; 0: not waiting */
    _Atomic int64_t tick_ns;        /* CLOCK_MONOTONIC of the watchdog's last look: a stopped
                                     * process stops ticking */
    _Atomic int32_t signal, exit_code;
    _Atomic int64_t ended_ns;       /* CLOCK_REALTIME when the guard saw the rank end */
    char note[320];                 /* the watchdog's line, or the rank's last word */
    /* the supervisor's own fields (the run's outcome, written by rank 0 before exit) */
    _Atomic int32_t dropped[8];     /* ranks a scheme dropped for good, -1 padded */
    /* the processes around the rank, for naming the one that was lost or stopped */
    int32_t guard_pid;              /* the guard (0: none) */
    int32_t proxy_pid;              /* the guard's parent: the launcher's proxy (hydra_pmi_proxy) */
    _Atomic int64_t left_ns;        /* CLOCK_REALTIME when the rank process left (0: not yet) */
    _Atomic int32_t work_done;      /* reached DT_RANK_FINISHING: trained, saved, evaluated */
    /* the last time the watchdog did not tick for over 2.5 s (a stopped or frozen process),
     * CLOCK_MONOTONIC: kept because a launcher may continue a stopped rank before ending it
     * (Open MPI sends SIGCONT first), after which its ticks alone no longer show it */
    _Atomic int64_t gap_from_ns, gap_to_ns;
} dt_board;

/* Attaches this process to its board file DIR/rank.R (created), before fork/MPI. 0 on
 * success. The mapping is shared with children. */
int dt_watch_board_open(const char *dir, int rank);
/* This process's board (a file's, or one in memory). */
dt_board *dt_watch_board(void);
/* The rank's identity, after MPI_Init. */
void dt_watch_identify(int rank, int pid, const char *host);
/* Starts the watchdog thread: a wait longer than timeout_s (> 0) ends the process with
 * status 4. what_scheme names the scheme in its line. */
int dt_watch_start(double timeout_s, const char *scheme);

/* Where the rank is: cheap (a few stores), called every step. phase is a static string
 * (e.g. "after_backward"). */
void dt_watch_progress(int epoch1, long step);
void dt_watch_phase(const char *phase);
/* A wait that is not a blocking MPI call (a spin on non-blocking calls or window memory).
 * Nested waits count as the outermost. what is a static string. */
void dt_watch_wait_begin(const char *what);
void dt_watch_wait_end(void);
/* The rank's current wait (NULL: none), when it began (seconds, CLOCK_MONOTONIC: the
 * simulated clock in dtrain-sim) and the phase it is in (NULL: none), for a line. */
const char *dt_watch_waiting(double *since_s, const char **phase);
/* How the rank ended (state DT_RANK_*), before exit. */
void dt_watch_end(int state, int exit_code);
/* The rank failed on its own with this line (printed on stderr too): kept in its board's note,
 * so that the supervisor can say it when the launcher lost it on its way (MPI_Abort may end
 * MPICH's proxy before it forwarded the rank's last output), then DT_RANK_FAILED. */
void dt_watch_failed(const char *line, int exit_code);
/* The rank process leaves now (its last act: a guard that cannot sign the board any more,
 * stopped, still leaves the supervisor knowing the rank ended; its status is the guard's to
 * record). */
void dt_watch_left(void);
/* The ranks the scheme dropped for good (a supervisor ends them, reading rank 0's board). */
void dt_watch_dropped(const int *ranks, int n);
/* Did the scheme drop ranks for good? Then MPI_Finalize would wait for them forever. */
int dt_watch_left_out(void);

#endif
