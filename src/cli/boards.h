/* The supervisor's reading of the ranks' boards (comm/watch.h): a small shared file per rank
 * in the job's folder, kept by the rank and signed by its guard. From them the supervisor says
 * which rank the job lost, where, and how, and ends the ranks a scheme dropped for good. A
 * board is written by other processes: every field is checked before it is used. */
#ifndef DT_BOARDS_H
#define DT_BOARDS_H

#include <stdio.h>
#include <sys/types.h>

#include "comm/watch.h"

typedef struct dt_boards {
    int n;
    dt_board **b;                 /* NULL until the rank made its file */
    char dir[4096];
    int (*kill)(pid_t, int);      /* how a dropped rank is ended (kill; a fuzz target's stub) */
} dt_boards;

/* Maps the boards that appeared since the last call. */
void dt_boards_map(dt_boards *bs);
/* Unmaps and removes every board file (before a restart, and at the end). */
void dt_boards_clear(dt_boards *bs);
/* The rank that reached `state` (DT_RANK_*) first, as far as the job's cause goes, or -1. */
int dt_boards_first(const dt_boards *bs, int state);
/* The furthest step any rank reached. */
long dt_boards_furthest_step(const dt_boards *bs);
/* Ends the ranks a scheme dropped for good (rank 0's board) once every other rank has
 * finished its work: they are stopped or hung, and the job would wait for them forever. */
void dt_boards_end_dropped(dt_boards *bs, FILE *noise);
/* How each rank ended, one line each into the noise file. */
void dt_boards_record(const dt_boards *bs, FILE *noise);
/* What ended an attempt that failed, said on `err` in one line (two for a stall); 1 when a
 * rank was lost or stalled (a restart may help), 0 when the ranks said why themselves. */
int dt_boards_explain(const dt_boards *bs, const char *noise_path, FILE *err);
/* A rank that failed on its own (DT_RANK_FAILED) keeps its line in its note: said on err as
 * "dtrain: error: NOTE" for the first such rank, when its line did not come through the
 * launcher. 1 when a line was said. */
int dt_boards_say_failure(const dt_boards *bs, FILE *err);
/* Every rank ended well, except those the scheme dropped and we ended. */
int dt_boards_completed_with_drops(const dt_boards *bs);

/* How many ranks started (MPI initialised: their board says so). */
int dt_boards_started(const dt_boards *bs);
/* Every rank the scheme kept finished its work (trained, saved, evaluated), whatever
 * happened after (a finalize that could not complete). */
int dt_boards_work_done(const dt_boards *bs);
/* Every rank the scheme kept has left (its process ended). */
int dt_boards_all_left(const dt_boards *bs);
/* Sends sig to the ranks of this host that still run (their own processes, not the launcher):
 * how many were sent it */
int dt_boards_signal_ranks(const dt_boards *bs, int sig);
/* 1 when every rank ended by exiting with this status (as its guard saw it) */
int dt_boards_all_exited(const dt_boards *bs, int code);
/* SIGTERM or SIGINT, when a rank was ended by it passed on by its guard (the launcher's signal
 * from outside: the guard got it from the launcher's process and passed it on) and every
 * other rank that ended did so too or exited with status 0; else 0 */
int dt_boards_passed_signal(const dt_boards *bs);
/* What holds a job whose ranks left (or gave up in MPI_Finalize): a rank whose guard, or the
 * launcher's process above it, is stopped, or whose guard did not end; described in `why`,
 * that process in *pid; or -1. */
int dt_boards_held(const dt_boards *bs, char *why, size_t len, int *pid);
/* The rank whose watchdog stopped ticking longest ago, when every running rank's has been
 * silent for more than limit_s (the whole job frozen), or -1. */
int dt_boards_frozen(const dt_boards *bs, double limit_s);
/* "during epoch E, step S" of the rank furthest on, or "before training started". */
void dt_boards_where(const dt_boards *bs, char *out, size_t len);
/* "rank R on HOST (pid P)", the board's fields made safe to print. */
void dt_boards_name(const dt_boards *bs, int r, char *out, size_t len);
/* Kills (SIGKILL) every process of this machine still carrying the job's DTRAIN_BOARD: what
 * the launcher left when it was killed (MPICH's hydra_pmi_proxy, guards, ranks), once it has
 * exited. How many were ended. */
int dt_boards_end_leftovers(const dt_boards *bs);
/* A process's state letter from /proc (R, S, T, Z, ...), or 0 when it is gone or elsewhere. */
char dt_proc_state(int pid);

#endif
