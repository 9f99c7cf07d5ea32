/* The guard of a rank under `dtrain run`: the parent process that sees how the rank ends
 * and signs the rank's board with it (comm/watch.h), so the supervisor can name a rank that
 * was killed. The launcher ends a job by ending the guards; the rank must not outlive its. */
#ifndef DT_GUARD_H
#define DT_GUARD_H

/* In `dtrain train` before MPI starts: under a supervisor ($DTRAIN_BOARD) the process forks;
 * the child returns and becomes the rank, the parent stays as its guard and exits with the
 * rank's status once it ended, after writing how it ended on the rank's board. argv is the
 * process's own (the guard retitles itself in ps). */
void dt_guard_rank(char **argv);

#endif
