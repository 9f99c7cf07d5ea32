/* A stop asked for by a signal: SIGTERM is what Slurm sends at preemption and before a job's
 * time limit (--signal=TERM@S), SIGINT is Ctrl-C. With --checkpoint the ranks agree to stop
 * after one and the same step, save a checkpoint set of that step (mid-epoch: the resumed run
 * trains no step twice) and end with DT_ERR_STOPPED.
 *
 * Every rank may get the signal or only some (srun signals every task; a launcher may pass
 * it to one): the ranks agree by an MPI_Iallreduce (MAX) of "asked" started after each step
 * on a communicator of its own and completed after the next, so the agreement costs no wait
 * of its own (it travels during a step) and every rank reads the same answer after the same
 * step. The price: no rank runs more than one step ahead of the slowest (asynchronous
 * schemes keep that lag bound while --checkpoint is on). The agreement is control, like an
 * evaluation's: not counted as the scheme's messages. */
#include <signal.h>

#include "core/sim.h"
#include "trainer/trainer.h"

static volatile sig_atomic_t asked;

void dt_trainer_request_stop(int sig) { asked = sig; }

int dt_trainer_stop_requested(void) { return asked; }

/* Only where a signal can arrive and a checkpoint can keep the run: simulated ranks get none. */
static int active(const dt_trainer *t) { return t->cfg->checkpoint && !dt_sim_active(); }

dt_status dt_stop_begin(dt_trainer *t) {
    t->stop_comm = MPI_COMM_NULL;
    t->stop_req = MPI_REQUEST_NULL;
    if (!active(t) || t->comm.size == 1) return DT_OK;
    return dt_mpi_check(MPI_Comm_dup(t->comm.comm, &t->stop_comm), "MPI_Comm_dup (the stop agreement)");
}

dt_status dt_stop_agreed(dt_trainer *t, int *stop) {
    *stop = 0;
    if (!active(t)) return DT_OK;
    if (t->comm.size == 1) {
        *stop = (t->stop_signal = asked) != 0;
        return DT_OK;
    }
    if (t->stop_req != MPI_REQUEST_NULL) {
        const int err = MPI_Wait(&t->stop_req, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Wait (the stop agreement)");
        *stop = (t->stop_signal = t->stop_all) != 0;
    }
    if (*stop) return DT_OK;
    t->stop_mine = asked;
    return dt_mpi_check(MPI_Iallreduce(&t->stop_mine, &t->stop_all, 1, MPI_INT, MPI_MAX, t->stop_comm, &t->stop_req),
                        "MPI_Iallreduce (the stop agreement)");
}

dt_status dt_stop_end(dt_trainer *t) {
    int err = MPI_SUCCESS;
    if (t->stop_req != MPI_REQUEST_NULL) err = MPI_Wait(&t->stop_req, MPI_STATUS_IGNORE);
    if (t->stop_comm != MPI_COMM_NULL) MPI_Comm_free(&t->stop_comm);
    return dt_mpi_check(err, "MPI_Wait (the stop agreement)");
}
