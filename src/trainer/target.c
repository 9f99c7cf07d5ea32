/* --target-acc and --target-loss: whether an evaluation reached it (the run stops there), agreed by every rank,
 * and where the run stood then, for the summary. The evaluations themselves and what they
 * print are report.c's. */
#include <stdio.h>

#include "trainer/trainer.h"

/* The figure the target is about: --target-acc's accuracy or --target-loss's loss, of the test
 * set or, with --target-on val, of the held-out validation set (a hyper-parameter search must
 * not choose by the test set). */
double dt_target_figure(const dt_trainer *t, double test_acc, double val_acc, double test_loss, double val_loss) {
    if (t->cfg->target_loss > 0) return t->cfg->target_on_val ? val_loss : test_loss;
    return t->cfg->target_on_val ? val_acc : test_acc;
}

/* Whether fig (dt_target_figure's) reaches the target for the first time; then where the run
 * stood is kept for the summary and said on rank 0. Not collective: dt_target_check is, a server
 * alone is not. Compared as floats, as the target is kept: --target-acc 0.6 is 0.60000002 as a
 * float, so 60.00% of the test set, a double 0.6, would miss a target the user wrote as 0.6. */
int dt_target_reached(dt_trainer *t, double fig, double train_s, long steps, double msgs, double mb, double compute_s) {
    const dt_train_config *c = t->cfg;
    const int by_loss = c->target_loss > 0;
    if (!dt_target_set(c) || t->reached || !(by_loss ? (float)fig <= c->target_loss : (float)fig >= c->target_acc)) return 0;
    t->reached = 1;
    t->target_train_s = train_s;
    t->target_steps = steps;
    t->target_msgs = msgs;
    t->target_mb = mb;
    t->target_compute_s = compute_s;
    if (!c->quiet && t->comm.rank == 0) {
        const char *set = c->target_on_val ? "validation" : "test";
        if (by_loss) printf("reached a %s loss of %.4f (--target-loss %.4g)", set, fig, (double)c->target_loss);
        else printf("reached %.2f%% %s accuracy (--target-acc %.4g)", 100 * fig, set, (double)c->target_acc);
        printf(" after %.2f s of training, %ld steps, %.0f messages, %.2f MB (evaluation, %.2f s so far, not counted)\n",
               train_s, steps, msgs, mb, t->eval_s);
        fflush(stdout);
    }
    return 1;
}

/* Collective, after rank 0 evaluated (acc there: dt_target_figure's): every rank learns whether
 * the --target-acc was reached now for the first time, and the run stops there. */
dt_status dt_target_check(dt_trainer *t, double acc, double train_s, long steps, double msgs, double mb, double compute_s) {
    if (!dt_target_set(t->cfg) || t->reached) return DT_OK;
    double v[2] = {acc, train_s};
    int err = MPI_Bcast(v, 2, MPI_DOUBLE, 0, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Bcast (target accuracy)");
    dt_target_reached(t, v[0], v[1], steps, msgs, mb, compute_s);
    return DT_OK;
}

/* Collective: a server found --target-acc reached on its own (rank 0); every rank learns
 * where, as the synchronous schemes' ranks do when they evaluate together. */
dt_status dt_target_share_server(dt_trainer *t) {
    if (t->servers == 0 || !dt_target_set(t->cfg)) return DT_OK;
    double v[6] = {t->reached, t->target_train_s, (double)t->target_steps, t->target_msgs, t->target_mb,
                   t->target_compute_s};
    int err = MPI_Bcast(v, 6, MPI_DOUBLE, 0, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Bcast (target accuracy)");
    t->reached = v[0] > 0;
    t->target_train_s = v[1];
    t->target_steps = (long)v[2];
    t->target_msgs = v[3];
    t->target_mb = v[4];
    t->target_compute_s = v[5];
    return DT_OK;
}
