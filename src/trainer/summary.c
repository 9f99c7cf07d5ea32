/* The run's end: the per-rank table on the console (rank 0) and the log's summary line, with
 * where the run stands against its physical limit: the compute-only bound (the run's computing
 * alone, communication free) and the compute utilisation (docs/accounting.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm/pmpi.h"
#include "core/alloc.h"
#include "trainer/trainer.h"

enum { R_MSGS_SENT, R_BYTES_SENT, R_MSGS_RECV, R_BYTES_RECV, R_BASELINE, R_FRESH, R_OVERWRITTEN, R_TORN, R_COMM,
       R_COMPUTE, R_STEPS, R_OTHER, R_TRAIN, R_N };

/* Exposed communication: the share of a training step's time spent waiting in communication
 * calls (MPI, and the codecs' encoding and decoding), in %; what overlaps the computation is
 * not in it (docs/accounting.md). */
static double exposed_pct(double comm_s, double compute_s) {
    return comm_s + compute_s > 0 ? 100 * comm_s / (comm_s + compute_s) : 0;
}

/* The summary's figures of where the target was reached (target.c keeps them), null where it
 * was not. Here, beside the rest of the summary, so that target.c needs nothing of report.c. */
static void target_json(const dt_trainer *t, dt_json *j) {
    if (!dt_target_set(t->cfg)) return;
    if (t->reached) {
        dt_json_fixed(j, "time_to_target_s", t->target_train_s, 3);
        dt_json_int(j, "steps_to_target", t->target_steps);
        dt_json_fixed(j, "msgs_to_target", t->target_msgs, 0);
        dt_json_fixed(j, "mb_to_target", t->target_mb, 4);
        /* the compute-only bound of the time to the target: communication free */
        dt_report_seconds(j, "compute_to_target_s", t->target_compute_s);
    } else {
        const char *unknown[] = {"time_to_target_s", "steps_to_target", "msgs_to_target", "mb_to_target",
                                 "compute_to_target_s"};
        for (int i = 0; i < 5; i++) dt_json_null(j, unknown[i]);
    }
}

/* The compute-only bound: the most computing any training rank did (a rank that took no step,
 * a server, computes for others), which no communication scheme can go below; the compute
 * utilisation: the training ranks' computing over their training time, in %. */
static void bound(const double *rows, int n, double *bound_s, double *util_pct) {
    double most = 0, sum = 0;
    int training = 0;
    for (int r = 0; r < n; r++) {
        const double *q = rows + (size_t)r * R_N;
        if (q[R_STEPS] <= 0) continue;
        training++;
        sum += q[R_TRAIN] > 0 ? q[R_COMPUTE] / q[R_TRAIN] : 0; /* each over its own training time */
        if (q[R_COMPUTE] > most) most = q[R_COMPUTE];
    }
    *bound_s = most;
    *util_pct = training ? 100 * sum / training : 0;
}

/* row r's rank in the job (a scheme may have left ranks out of the end: comm.h) */
static int job_rank(const dt_trainer *t, int r) { return t->comm.world_ranks ? t->comm.world_ranks[r] : r; }

static void print_table(const dt_trainer *t, const double *rows, const double *tot, double pct, double spread_before,
                        double wall) {
    printf("\n%-5s %12s %12s %10s %10s %8s %9s %9s %9s\n", "rank", "msgs sent", "msgs recv", "MB sent", "MB recv",
           "msgs %", "comm s", "compute s", "exposed %");
    for (int r = 0; r < t->comm.size; r++) {
        const double *q = rows + (size_t)r * R_N;
        printf("%-5d %12.0f %12.0f %10.2f %10.2f %8.2f %9.2f %9.2f %9.1f\n", job_rank(t, r), q[R_MSGS_SENT],
               q[R_MSGS_RECV], q[R_BYTES_SENT] / 1e6, q[R_BYTES_RECV] / 1e6,
               q[R_BASELINE] > 0 ? 100 * q[R_MSGS_SENT] / q[R_BASELINE] : 0, q[R_COMM], q[R_COMPUTE],
               exposed_pct(q[R_COMM], q[R_COMPUTE]));
    }
    printf("%-5s %12.0f %12.0f %10.2f %10.2f %8.2f %9.2f %9.2f %9.1f\n", "all", tot[R_MSGS_SENT], tot[R_MSGS_RECV],
           tot[R_BYTES_SENT] / 1e6, tot[R_BYTES_RECV] / 1e6, pct, tot[R_COMM], tot[R_COMPUTE],
           exposed_pct(tot[R_COMM], tot[R_COMPUTE]));
    if (t->scheme->decentralized)
        printf("largest distance of a rank's parameters from their mean before the final averaging: %.4g\n", spread_before);
    char result[96];
    if (t->train.text) dt_report_lm_loss_text(t, result, sizeof result, "test", t->last.test_loss);
    else snprintf(result, sizeof result, "  test accuracy %.2f%%", 100 * t->last.test_acc);
    printf("%s:%s with %.1f%% of the messages (%.2f MB) in %.1f s\n", t->scheme->def->name, result, pct,
           tot[R_BYTES_SENT] / 1e6, wall);
    double bound_s, util;
    bound(rows, t->comm.size, &bound_s, &util);
    printf("compute-only bound %.2f s of the %.2f s of training: compute utilisation %.1f%%\n", bound_s,
           wall - t->eval_s, util);
    if (tot[R_OTHER] > 0)
        printf("sent beside the payloads: %.2f MB (set-up copies, models averaged for evaluation, protocol headers "
               "and tokens)\n", tot[R_OTHER] / 1e6);
}

static void summary_line(dt_trainer *t, dt_json *j, const double *rows, const double *tot, double pct,
                         double spread_before, double spread_after, double wall) {
    const dt_train_config *c = t->cfg;
    static const char *const per_rank[R_N] = {"msgs_sent", "bytes_sent", "msgs_recv", "bytes_recv", "baseline_msgs",
                                              "fresh_recv", "overwritten", "torn_retries", "comm_s", "compute_s", "steps",
                                              "other_bytes_sent", "train_s"};
    dt_json_begin(j, NULL);
    dt_json_str(j, "type", "summary");
    dt_json_str(j, "model", c->model);
    dt_json_str(j, "data", c->data);
    dt_json_str(j, "algo", t->scheme->def->name);
    /* a replay's figures are that log's run's; its times, messages and bytes its own */
    if (t->replay) dt_json_str(j, "replay_of", dt_replay_path(t->replay));
    dt_json_int(j, "ranks", t->comm.world_size);
    dt_json_int(j, "epochs", c->epochs);
    dt_json_int(j, "batch", c->batch);
    dt_report_num6(j, "lr", c->lr);
    dt_json_num(j, "steps", tot[R_STEPS]); /* per training rank: the most any rank took */
    dt_json_fixed(j, "test_acc", t->last.test_acc, 6);
    dt_json_fixed(j, "test_loss", t->last.test_loss, 6);
    dt_report_val(t, j, t->last.val_acc, t->last.val_loss);
    dt_report_lm(t, j, t->last.test_loss, t->last.val_loss);
    dt_json_int(j, "params", (long long)dt_model_num_params(t->model));
    dt_json_fixed(j, "msgs_sent", tot[R_MSGS_SENT], 0);
    dt_json_fixed(j, "baseline_msgs", tot[R_BASELINE], 0);
    dt_json_fixed(j, "msgs_pct", pct, 4);
    dt_json_fixed(j, "mb_sent", tot[R_BYTES_SENT] / 1e6, 4);
    /* beside the payloads: set-up copies, models averaged for evaluation, protocol headers, tokens */
    dt_json_fixed(j, "other_mb_sent", tot[R_OTHER] / 1e6, 4);
    dt_report_num6(j, "spread_before_avg", spread_before);
    dt_report_num6(j, "spread_after_finish", spread_after); /* what the scheme's finish left (eventgrad --mix sum: 0) */
    dt_json_fixed(j, "wall_s", wall, 3);
    dt_json_fixed(j, "eval_s", t->eval_s, 3);
    dt_json_fixed(j, "train_s", wall - t->eval_s, 3);
    dt_json_fixed(j, "comm_s", tot[R_COMM], 3);       /* all ranks */
    dt_json_fixed(j, "compute_s", tot[R_COMPUTE], 3);
    dt_json_fixed(j, "exposed_comm_pct", exposed_pct(tot[R_COMM], tot[R_COMPUTE]), 2);
    double bound_s, util;
    bound(rows, t->comm.size, &bound_s, &util);
    dt_json_fixed(j, "compute_bound_s", bound_s, 3);
    dt_json_fixed(j, "compute_util_pct", util, 2);
    /* the supervisor's restarts before this attempt (dtrain run --max-restarts) */
    dt_json_int(j, "restarts", c->restarts);
    dt_json_int(j, "redone_steps", c->redone_steps);
    if (dt_target_set(c)) {
        if (c->target_acc > 0) dt_report_num6(j, "target_acc", c->target_acc);
        else dt_report_num6(j, "target_loss", c->target_loss);
        dt_json_str(j, "target_on", c->target_on_val ? "val" : "test");
        target_json(t, j);
    }
    if (t->scheme->ops->summary) t->scheme->ops->summary(t->scheme, j);
    dt_json_begin_array(j, "per_rank");
    for (int r = 0; r < t->comm.size; r++) {
        const double *q = rows + (size_t)r * R_N;
        dt_json_begin(j, NULL);
        dt_json_int(j, "rank", job_rank(t, r));
        for (int k = 0; k < R_N; k++) {
            if (k == R_COMM || k == R_COMPUTE || k == R_TRAIN) dt_json_fixed(j, per_rank[k], q[k], 3);
            else dt_json_fixed(j, per_rank[k], q[k], 0);
        }
        dt_json_end(j);
    }
    dt_json_end_array(j);
    dt_json_end(j);
}

dt_status dt_trainer_summary(dt_trainer *t, double spread_before, double spread_after, double wall) {
    dt_status st = dt_target_share_server(t);
    if (st != DT_OK) return st;
    const dt_counters *k = &t->comm.c;
    const double mine[R_N] = {(double)k->msgs_sent, (double)k->bytes_sent, (double)k->msgs_recv, (double)k->bytes_recv,
                              (double)k->baseline_msgs, (double)k->fresh_recv, (double)k->overwritten,
                              (double)k->torn_retries, k->t_comm, k->t_compute, (double)t->ctx.step,
                              (double)k->other_bytes, dt_trainer_train_seconds(t)};
    double *rows = t->comm.rank == 0 ? calloc((size_t)t->comm.size * R_N, sizeof *rows) : NULL;
    if (t->comm.rank == 0 && !rows) return dt_nomem("the ranks' counters");
    int err = MPI_Gather(mine, R_N, MPI_DOUBLE, rows, R_N, MPI_DOUBLE, 0, t->comm.comm);
    if (err != MPI_SUCCESS) { free(rows); return dt_mpi_check(err, "MPI_Gather (summary)"); }
    if (t->comm.rank != 0) return DT_OK;
    double tot[R_N] = {0};
    for (int r = 0; r < t->comm.size; r++)
        for (int q = 0; q < R_N; q++) {
            const double v = rows[(size_t)r * R_N + q];
            if (q == R_STEPS) tot[q] = v > tot[q] ? v : tot[q];
            else tot[q] += v;
        }
    const double pct = tot[R_BASELINE] > 0 ? 100 * tot[R_MSGS_SENT] / tot[R_BASELINE] : 0;
    if (!t->cfg->quiet && t->comm.size > 1) print_table(t, rows, tot, pct, spread_before, wall);
    if (!t->cfg->quiet && t->cfg->restarts > 0)
        printf("restarted %d time%s from the last checkpoint every rank had: %ld steps trained again\n", t->cfg->restarts,
               t->cfg->restarts > 1 ? "s" : "", t->cfg->redone_steps);
    if (!t->cfg->quiet && t->cfg->target_acc > 0 && !t->reached)
        printf("--target-acc %.4g not reached: final test accuracy %.2f%% after %.2f s of training\n",
               (double)t->cfg->target_acc, 100 * t->last.test_acc, wall - t->eval_s);
    if (!t->cfg->quiet && t->cfg->target_loss > 0 && !t->reached)
        printf("--target-loss %.4g not reached: final test loss %.4f after %.2f s of training\n",
               (double)t->cfg->target_loss, t->last.test_loss, wall - t->eval_s);
    dt_json j;
    dt_json_init(&j);
    summary_line(t, &j, rows, tot, pct, spread_before, spread_after, wall);
    free(rows);
    return dt_report_log_json(t, &j);
}
