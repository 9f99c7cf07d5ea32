/* `dtrain run` supervises its job instead of handing the terminal to mpiexec: it starts
 * mpiexec, keeps the launcher's and MPI's own messages in a file, passes dtrain's lines on,
 * and when a rank is lost or stalls says which in one line (from the ranks' boards,
 * comm/watch.h), and with --max-restarts starts the job again from the newest checkpoint
 * every rank has. Each rank runs under a guard: the parent process that sees how it ended. */
#ifndef DT_SUPERVISE_H
#define DT_SUPERVISE_H

typedef struct dt_job {
    char **argv;          /* mpiexec ... dtrain train FLAGS, NULL-terminated, 8 spare slots at the end */
    int ranks;
    int max_restarts;
    const char *checkpoint; /* the run's --checkpoint, or NULL */
    const char *resume;     /* the run's --resume, or NULL */
    int resume_auto;        /* ... was auto (resume: what it came to): the first attempt passes
                             * it on, for the ranks to decide and say (a finished run ends) */
    double timeout;         /* the ranks' --timeout, seconds (0: none): a job with every rank
                             * silent longer than this (+5 s) is ended */
    double start_timeout;   /* every rank must have started (MPI initialised) within this */
} dt_job;

/* Runs the job (and its restarts); returns the exit status for `dtrain run`:
 * 0 (every rank did its work), the ranks' own status (2: an error they reported, 3:
 * divergence, 5: every rank stopped on a signal with its checkpoint committed, whoever got
 * the signal), 4: a rank was lost or made no progress within --timeout, or 128 + the signal
 * that interrupted a job without a checkpoint (this process's, or the launcher's passed on). */
int dt_supervise(const dt_job *job);

/* Where the newest checkpoint at path (a set's manifest with ranks > 1) stands: 0 and its
 * epoch and step, or -1 when there is none that reads. */
int dt_checkpoint_point(const char *path, int ranks, int *epoch, long *step);

#endif
