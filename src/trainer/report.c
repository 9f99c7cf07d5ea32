/* What a run tells: one console line per epoch and a per-rank table at the end (rank 0), and
 * the JSON-lines log: a configuration line first, one line per epoch, a summary last (the
 * log file itself: logfile.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/pmpi.h"
#include "core/alloc.h"
#include "core/sim.h"
#include "trainer/trainer.h"

/* the build's commit (src/core/version.c, written at every build) */
extern const char dt_build_commit[];
extern const char dt_build_version[];

/* A finished line into the log (NULL: the writer ran out of memory, already said). */
dt_status dt_report_log_json(dt_trainer *t, dt_json *j) {
    const char *text = dt_json_text(j);
    dt_status st = dt_allocated(text);
    if (st == DT_OK) st = dt_trainer_log(t, text);
    dt_json_free(j);
    return st;
}

/* "%.6g", as the logs have always printed learning rates and spreads */
void dt_report_num6(dt_json *j, const char *key, double v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", v);
    if (v != v || v - v != 0) dt_json_null(j, key);
    else dt_json_raw(j, key, buf);
}

/* val_acc and val_loss: figures with --val, null without (so every reader finds the keys) */
void dt_report_val(const dt_trainer *t, dt_json *j, double acc, double loss) {
    if (!t->val.n) { dt_json_null(j, "val_acc"); dt_json_null(j, "val_loss"); return; }
    dt_json_fixed(j, "val_acc", acc, 6);
    dt_json_fixed(j, "val_loss", loss, 6);
}

void dt_report_seconds(dt_json *j, const char *key, double v) {
    if (v != v) dt_json_null(j, key);
    else dt_json_fixed(j, key, v, 3);
}

#define LN2 0.69314718055994530942 /* nats per bit */

/* A language model's figures beside the losses: bits per byte of a byte-level text (the loss
 * in bits: nats / ln 2), null with no held-out set for val; nothing for images. */
void dt_report_lm(const dt_trainer *t, dt_json *j, double test_loss, double val_loss) {
    if (!t->train.text || !t->train.bytes) return;
    dt_json_fixed(j, "test_bpb", test_loss / LN2, 6);
    if (t->val.n) dt_json_fixed(j, "val_bpb", val_loss / LN2, 6);
    else dt_json_null(j, "val_bpb");
}

/* "loss 1.8812 (2.714 bpb)": a text's held-out loss for the console */
void dt_report_lm_loss_text(const dt_trainer *t, char *out, size_t len, const char *what, double loss) {
    if (t->train.bytes) snprintf(out, len, "  %s loss %.4f (%.3f bpb)", what, loss, loss / LN2);
    else snprintf(out, len, "  %s loss %.4f", what, loss);
}

/* The names of the hosts the ranks run on, each once, as an array (collective). */
static dt_status hosts_json(dt_trainer *t, dt_json *j) {
    char mine[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    int err = MPI_Get_processor_name(mine, &len);
    const int N = t->comm.size;
    char *all = t->comm.rank == 0 ? calloc((size_t)N, MPI_MAX_PROCESSOR_NAME) : NULL;
    if (t->comm.rank == 0 && !all) return dt_nomem("the ranks' host names");
    if (err == MPI_SUCCESS)
        err = MPI_Gather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, t->comm.comm);
    if (err != MPI_SUCCESS) { free(all); return dt_mpi_check(err, "MPI_Gather (host names)"); }
    if (all) {
        dt_json_begin_array(j, "hosts");
        for (int r = 0; r < N; r++) {
            const char *h = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
            int seen = 0;
            for (int q = 0; q < r && !seen; q++) seen = !strcmp(h, all + (size_t)q * MPI_MAX_PROCESSOR_NAME);
            if (!seen) dt_json_str(j, NULL, h);
        }
        dt_json_end_array(j);
    }
    free(all);
    return DT_OK;
}

/* Every setting that changes the result, so a log alone tells runs apart. */
dt_status dt_trainer_log_config(dt_trainer *t) {
    const dt_train_config *c = t->cfg;
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "type", "config");
    char now[32];
    const time_t secs = time(NULL);
    struct tm utc;
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &utc));
    dt_json_str(&j, "started_utc", now);
    if (c->command) {
        dt_json_begin_array(&j, "command");
        for (int i = 0; i < c->ncommand; i++) dt_json_str(&j, NULL, c->command[i]);
        dt_json_end_array(&j);
    } else {
        dt_json_null(&j, "command");
    }
    dt_json_str(&j, "version", dt_build_version);
    dt_json_str(&j, "commit", dt_build_commit);
    dt_json_str(&j, "model", c->model);
    dt_json_str(&j, "data", c->data);
    dt_json_str(&j, "algo", t->scheme->def->name);
    dt_json_int(&j, "ranks", t->comm.size);
    dt_json_int(&j, "training_ranks", t->ctx.run.nworkers);
    dt_status st = hosts_json(t, &j);
    if (st != DT_OK || t->comm.rank != 0) { dt_json_free(&j); return st; }
    /* simulated time and hosts (dtrain sim): the log says so, and on what */
    if (dt_sim_active()) dt_json_str(&j, "simulated", *dt_sim_describe() ? dt_sim_describe() : "SimGrid SMPI");
    if (dt_sim_active() && dt_sim_setup()) dt_json_raw(&j, "sim", dt_sim_setup());
    /* how rank 0's host waited (comm/pmpi.h): times of ranks sharing cores depend on it */
    dt_json_str(&j, "waits", dt_pmpi_yielding() ? "yield" : "spin");
    dt_json_str(&j, "split", c->split ? c->split : "random");
    dt_json_int(&j, "seed", (long long)c->seed);
    dt_json_int(&j, "epochs", c->epochs);
    dt_json_int(&j, "batch", c->batch);
    dt_report_num6(&j, "lr", c->lr);
    dt_json_str(&j, "schedule", c->schedule ? c->schedule : "const");
    dt_json_int(&j, "lr_warmup", c->lr_warmup);
    /* "by step": cosine ends at the run's last step (dt_schedule_steps), else epochs count */
    dt_json_str(&j, "schedule_counts", t->sched.by_step ? "steps" : "epochs");
    dt_json_str(&j, "optim", dt_optim_names[t->opt.cfg.kind]);
    dt_report_num6(&j, "momentum", c->momentum);
    dt_json_bool(&j, "nesterov", c->nesterov);
    if (t->opt.cfg.kind == DT_OPTIM_ADAMW) {
        dt_report_num6(&j, "beta1", c->beta1);
        dt_report_num6(&j, "beta2", c->beta2);
        dt_report_num6(&j, "eps", c->eps);
    }
    dt_json_str(&j, "decay_on", dt_decay_on_names[t->opt.cfg.decay_on]);
    dt_report_num6(&j, "clip", c->clip);
    dt_json_str(&j, "precision", dt_precision_name((dt_precision)c->precision));
    char engines[256]; /* which layers another engine runs (oneDNN): their sums differ in order */
    dt_model_engines(t->model, engines, sizeof engines);
    dt_json_str(&j, "engines", engines);
    dt_json_str(&j, "plan", *t->plan ? t->plan : "off"); /* the file: --plan auto's too */
    dt_json_str(&j, "precision_run", dt_precision_name(dt_model_precision(t->model)));
    dt_report_num6(&j, "weight_decay", c->weight_decay);
    dt_json_int(&j, "max_steps", c->max_steps);
    dt_json_int(&j, "eval_every", c->eval_every);
    dt_json_int(&j, "eval_every_steps", c->eval_every_steps);
    dt_report_num6(&j, "target_acc", c->target_acc);
    dt_report_num6(&j, "target_loss", c->target_loss);
    dt_json_str(&j, "target_on", c->target_on_val ? "val" : "test");
    dt_json_int(&j, "train_limit", c->train_limit);
    dt_json_int(&j, "test_limit", c->test_limit);
    dt_json_int(&j, "val", c->val);       /* held out of the training set's end (after train_limit) */
    dt_json_int(&j, "images", c->images); /* 0, or what set epochs and max_steps */
    dt_json_bool(&j, "augment", c->augment < 0 ? t->train.augment : c->augment);
    dt_json_str(&j, "resume", c->resume);
    dt_json_str(&j, "out", c->weights_out);
    dt_json_str(&j, "log", c->log_path);
    dt_json_str(&j, "checkpoint", c->checkpoint);
    dt_json_str(&j, "run_dir", c->run_dir);
    dt_json_int(&j, "restarts", c->restarts); /* 0, or this attempt follows that many lost ones */
    dt_json_int(&j, "steps_per_epoch", t->ctx.run.steps_per_epoch);
    dt_json_begin(&j, "scheme");
    dt_json_str(&j, "compress", c->scheme.compress ? c->scheme.compress : "none");
    dt_scheme_flags_json(t->scheme, &j);
    dt_json_end(&j);
    dt_json_end(&j);
    /* a replay checks its log against this line before anything is written; a log it cannot
     * replay ends the run as rank 0's errors do (MPI_Abort): an agreement would be a message the
     * replayed run did not send, and move its times */
    if (dt_sim_replay()) {
        const char *text = dt_json_text(&j);
        /* out of memory: dt_json_text recorded it */
        st = dt_allocated(text);
        if (st == DT_OK) st = dt_replay_open(dt_sim_replay(), text, &t->replay);
    }
    if (st != DT_OK) {
        dt_json_free(&j);
        return st;
    }
    return dt_report_log_json(t, &j);
}

static void print_epoch(dt_trainer *t, const dt_epoch_stats *e) {
    if (t->cfg->quiet || t->comm.rank != 0) return;
    dt_progress_clear(t);
    char val[32] = "";
    if (t->val.n) snprintf(val, sizeof val, "  val %6.2f%%", 100 * e->val_acc);
    if (e->server_report) {
        /* a server's report: it knows the model and the traffic (all of it passes through the one
         * server), not the workers' speed */
        printf("epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%%s  lr %.4g  (server's model at %.1f s)  msgs %5.1f%%  "
               "%8.2f MB sent\n", e->epoch, t->cfg->epochs, e->loss, 100 * e->train_acc, 100 * e->test_acc, val, e->lr,
               e->seconds, e->msgs_pct, e->mb_sent);
        fflush(stdout);
        return;
    }
    char extra[160] = "";
    if (t->comm.size > 1) {
        size_t o = (size_t)snprintf(extra, sizeof extra, "  msgs %5.1f%%  %8.2f MB sent", e->msgs_pct, e->mb_sent);
        if (t->scheme->decentralized) snprintf(extra + o, sizeof extra - o, "  spread %.3g", e->spread);
    }
    if (t->train.text) { /* a language model: losses, not accuracies; tokens a second */
        char test[64], vl[64] = "";
        dt_report_lm_loss_text(t, test, sizeof test, "test", e->test_loss);
        if (t->val.n) dt_report_lm_loss_text(t, vl, sizeof vl, "val", e->val_loss);
        printf("epoch %3d/%d  loss %.4f%s%s  lr %.4g  %8.0f tok/s  %6.1f s%s\n", e->epoch, t->cfg->epochs, e->loss, test, vl,
               e->lr, e->images_per_s * t->train.h, e->seconds, extra);
        fflush(stdout);
        return;
    }
    printf("epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%%s  lr %.4g  %8.0f img/s  %6.1f s%s\n", e->epoch,
           t->cfg->epochs, e->loss, 100 * e->train_acc, 100 * e->test_acc, val, e->lr, e->images_per_s, e->seconds, extra);
    fflush(stdout);
}

static dt_status log_epoch(dt_trainer *t, const dt_epoch_stats *e) {
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "type", "epoch");
    dt_json_int(&j, "epoch", e->epoch);
    dt_json_int(&j, "step", e->step);
    dt_json_fixed(&j, "train_s", e->train_s, 3);
    dt_json_fixed(&j, "loss", e->loss, 6);
    dt_json_fixed(&j, "train_acc", e->train_acc, 6);
    dt_json_fixed(&j, "test_acc", e->test_acc, 6);
    dt_json_fixed(&j, "test_loss", e->test_loss, 6);
    dt_report_val(t, &j, e->val_acc, e->val_loss);
    dt_report_lm(t, &j, e->test_loss, e->val_loss);
    dt_report_num6(&j, "lr", e->lr);
    dt_json_fixed(&j, "seconds", e->seconds, 3);
    if (e->server_report) dt_json_null(&j, "images_per_s");
    else dt_json_fixed(&j, "images_per_s", e->images_per_s, 1);
    if (t->train.text && !e->server_report) dt_json_fixed(&j, "tokens_per_s", e->images_per_s * t->train.h, 1);
    dt_json_fixed(&j, "msgs_pct", e->msgs_pct, 4);
    dt_json_fixed(&j, "msgs_sent", e->msgs_sent, 0);
    dt_json_fixed(&j, "mb_sent", e->mb_sent, 4);
    dt_report_seconds(&j, "compute_s", e->compute_s);
    if (e->server_report) dt_json_null(&j, "spread");
    else dt_report_num6(&j, "spread", e->spread);
    dt_json_end(&j);
    return dt_report_log_json(t, &j);
}

static dt_status print_step_eval(dt_trainer *t, const dt_step_eval *e) {
    if (t->comm.rank != 0) return DT_OK;
    if (!t->cfg->quiet) {
        char val[32] = "";
        char test[64];
        snprintf(test, sizeof test, "  test %6.2f%%", 100 * e->acc);
        if (t->val.n) snprintf(val, sizeof val, "  val %6.2f%%", 100 * e->val[0]);
        if (t->train.text) {
            dt_report_lm_loss_text(t, test, sizeof test, "test", e->loss);
            if (t->val.n) dt_report_lm_loss_text(t, val, sizeof val, "val", e->val[1]);
        }
        dt_progress_clear(t);
        printf("step %6ld (epoch %.2f)%s%s  %8.1f s training  msgs %5.1f%%  %8.2f MB sent\n", e->step,
               e->epoch, test, val, e->train_s, e->baseline > 0 ? 100 * e->msgs / e->baseline : 0, e->bytes / 1e6);
        fflush(stdout);
    }
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "type", "eval");
    dt_json_int(&j, "step", e->step);
    dt_json_fixed(&j, "epoch", e->epoch, 4);
    dt_json_fixed(&j, "test_acc", e->acc, 6);
    dt_json_fixed(&j, "test_loss", e->loss, 6);
    dt_report_val(t, &j, e->val[0], e->val[1]);
    dt_report_lm(t, &j, e->loss, e->val[1]);
    dt_json_fixed(&j, "train_s", e->train_s, 3);
    dt_json_fixed(&j, "eval_s", e->eval_s, 3);
    dt_json_fixed(&j, "msgs_sent", e->msgs, 0);
    dt_json_fixed(&j, "mb_sent", e->bytes / 1e6, 4);
    dt_report_seconds(&j, "compute_s", e->compute_s);
    if (t->scheme->decentralized) dt_report_num6(&j, "spread", e->spread);
    dt_json_end(&j);
    return dt_report_log_json(t, &j);
}

/* A server's evaluation of ev's model on rank 0's test set (acc, loss), timed as evaluation;
 * *train_s is the training time when the model was taken. */
static dt_status eval_server_model(dt_trainer *t, const dt_server_eval *ev, double *acc, double *loss, double val[2],
                                   double *train_s) {
    const double t0 = dt_now();
    *train_s = dt_trainer_train_seconds(t);
    /* the evaluated model may be the server's own: copy it out first */
    memcpy(t->eval_params, ev->params, dt_model_num_params(t->model) * sizeof(float));
    memcpy(t->eval_state, ev->state, dt_model_num_state(t->model) * sizeof(float));
    dt_status st = dt_trainer_eval_rank0(t, t->eval_params, t->eval_state, acc, loss, val);
    t->eval_s += dt_now() - t0;
    return st;
}

dt_status dt_trainer_report_server_epoch(void *host, int epoch, double train_loss, double train_acc, dt_server_eval *ev) {
    dt_trainer *t = host;
    dt_epoch_stats *e = &t->last;
    memset(e, 0, sizeof *e);
    e->epoch = epoch;
    e->loss = train_loss;
    e->train_acc = train_acc / dt_model_positions(t->model); /* the server's is per example */
    e->lr = dt_schedule_lr_at(&t->sched, (long)epoch * t->ctx.run.steps_per_epoch - 1, epoch, t->cfg->epochs);
    e->seconds = dt_now() - t->t_start;
    e->server_report = 1;
    e->compute_s = NAN; /* the workers' computing is theirs: the server does not know it */
    /* every counted message is one the server sent or received: the run's traffic so far */
    e->msgs_sent = ev->msgs;
    e->mb_sent = ev->bytes / 1e6;
    e->msgs_pct = ev->baseline > 0 ? 100 * ev->msgs / ev->baseline : 0;
    double train_s = 0;
    double val[2] = {0, 0};
    dt_status st = eval_server_model(t, ev, &e->test_acc, &e->test_loss, val, &train_s);
    e->step = ev->step;
    e->train_s = train_s;
    e->val_acc = val[0];
    e->val_loss = val[1];
    if (st != DT_OK) return st;
    print_epoch(t, e);
    if ((st = log_epoch(t, e)) != DT_OK) return st;
    dt_trainer_on_epoch(t, e, ev->step);
    ev->reached = dt_target_reached(t, dt_target_figure(t, e->test_acc, e->val_acc, e->test_loss, e->val_loss), train_s, ev->step, ev->msgs, ev->bytes / 1e6, NAN);
    return DT_OK;
}

dt_status dt_trainer_report_server_step(void *host, dt_server_eval *ev) {
    dt_trainer *t = host;
    const double t0 = dt_now();
    dt_step_eval e = {.step = ev->step, .epoch = (double)ev->step / t->ctx.run.steps_per_epoch, .msgs = ev->msgs,
                   .baseline = ev->baseline, .bytes = ev->bytes, .compute_s = NAN};
    dt_status st = eval_server_model(t, ev, &e.acc, &e.loss, e.val, &e.train_s);
    e.eval_s = dt_now() - t0;
    if (st == DT_OK) st = print_step_eval(t, &e);
    if (st != DT_OK) return st;
    dt_trainer_on_step_eval(t, &e);
    ev->reached = dt_target_reached(t, dt_target_figure(t, e.acc, e.val[0], e.loss, e.val[1]), e.train_s, ev->step, ev->msgs, ev->bytes / 1e6, NAN);
    return DT_OK;
}

/* Every rank's counters summed: messages sent, their baseline, bytes; and the most any rank
 * computed (measurement, uncounted). */
static dt_status traffic(dt_trainer *t, double *msgs, double *baseline, double *bytes, double *compute) {
    double mine[3] = {(double)t->comm.c.msgs_sent, (double)t->comm.c.baseline_msgs, (double)t->comm.c.bytes_sent}, all[3];
    int err = MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, t->comm.comm);
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&t->comm.c.t_compute, compute, 1, MPI_DOUBLE, MPI_MAX, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (traffic so far)");
    *msgs = all[0]; *baseline = all[1]; *bytes = all[2];
    return DT_OK;
}

/* The end of an evaluation every rank takes part in (started at t0, with comm0 seconds of
 * communication): the ranks wait for rank 0's evaluation together, so that no rank counts that
 * wait as its training's communication (it would be, at its next message) or trains on in it;
 * the evaluation's own messages are not training's time either. */
static dt_status end_evaluation(dt_trainer *t, double t0, double comm0) {
    /* an allreduce, not MPI_Barrier: SMPI's barrier also retires every one-sided request the
     * windows kept (comm/window.c), O(n^2) in SimGrid */
    int none = 0;
    int err = t->comm.size > 1 ? MPI_Allreduce(MPI_IN_PLACE, &none, 1, MPI_INT, MPI_MAX, t->comm.comm) : MPI_SUCCESS;
    t->eval_s += dt_now() - t0;
    t->comm.c.t_comm = comm0;
    return err == MPI_SUCCESS ? DT_OK : dt_mpi_check(err, "MPI_Allreduce (after an evaluation)");
}

dt_status dt_trainer_step_report(dt_trainer *t) {
    const double t0 = dt_now(), comm0 = t->comm.c.t_comm;
    dt_step_eval e = {.step = t->ctx.step + 1, .train_s = dt_trainer_train_seconds(t),
                   .epoch = t->ctx.epoch + (double)(t->ctx.epoch_step + 1) / t->ctx.run.steps_per_epoch};
    dt_status st = traffic(t, &e.msgs, &e.baseline, &e.bytes, &e.compute_s);
    if (st == DT_OK) st = dt_trainer_agreed_model(t, &e.spread);
    if (st == DT_OK && t->comm.rank == 0)
        st = dt_trainer_eval_rank0(t, t->eval_params, t->eval_state, &e.acc, &e.loss, e.val);
    if (st == DT_OK && t->replay)
        st = dt_replay_step(t->replay, e.step, e.msgs, e.bytes / 1e6, &e.acc, &e.loss, e.val, &e.spread);
    if (st != DT_OK) return st;
    e.eval_s = dt_now() - t0;
    st = print_step_eval(t, &e);
    if (st == DT_OK) st = dt_trainer_check_drift(t, e.spread, t->ctx.epoch + 1, e.step);
    /* the target agreed within the evaluation: its broadcast is not training's time, and the
     * time to it is this evaluation's train_s, as its line says (every rank takes part, as in
     * end_evaluation); the step just taken counts (the loop advances ctx.step after this) */
    const dt_status tgt = dt_target_check(t, dt_target_figure(t, e.acc, e.val[0], e.loss, e.val[1]), e.train_s,
                                          t->ctx.step + 1, e.msgs, e.bytes / 1e6, e.compute_s);
    if (st == DT_OK) st = tgt;
    const dt_status end = end_evaluation(t, t0, comm0);
    if (st == DT_OK) st = end;
    if (st == DT_OK) dt_trainer_on_step_eval(t, &e);
    return st;
}

dt_status dt_trainer_epoch_report(dt_trainer *t, double loss_sum, long seen, long correct, double seconds, float lr) {
    const double t0 = dt_now(), comm0 = t->comm.c.t_comm;
    dt_epoch_stats *e = &t->last;
    memset(e, 0, sizeof *e);
    e->epoch = t->ctx.epoch + 1;
    e->step = t->ctx.step;
    e->train_s = dt_trainer_train_seconds(t);
    double mine[6] = {loss_sum, (double)seen, (double)correct, (double)t->comm.c.msgs_sent,
                      (double)t->comm.c.baseline_msgs, (double)t->comm.c.bytes_sent}, all[6];
    /* the slowest rank's epoch, and the most any rank computed so far */
    double mine_max[2] = {seconds, t->comm.c.t_compute}, most[2];
    int err = MPI_Allreduce(mine, all, 6, MPI_DOUBLE, MPI_SUM, t->comm.comm);
    if (err == MPI_SUCCESS) err = MPI_Allreduce(mine_max, most, 2, MPI_DOUBLE, MPI_MAX, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (epoch figures)");
    e->loss = all[1] ? all[0] / all[1] : 0;
    e->train_acc = all[1] ? all[2] / (all[1] * dt_model_positions(t->model)) : 0;
    e->lr = lr;
    e->seconds = most[0];
    e->compute_s = most[1];
    e->images_per_s = most[0] > 0 ? all[1] / most[0] : 0;
    e->msgs_pct = all[4] > 0 ? 100.0 * all[3] / all[4] : 0;
    e->msgs_sent = all[3];
    e->mb_sent = all[5] / 1e6;
    double val[2] = {0, 0};
    dt_status st = dt_trainer_agreed_model(t, &e->spread);
    if (st != DT_OK) return st;
    if (t->comm.rank == 0 &&
        (st = dt_trainer_eval_rank0(t, t->eval_params, t->eval_state, &e->test_acc, &e->test_loss, val)) != DT_OK)
        return st;
    if (t->replay && (st = dt_replay_epoch(t->replay, e->epoch, e->msgs_sent, e->mb_sent, &e->loss, &e->train_acc,
                                           &e->test_acc, &e->test_loss, val, &e->spread)) != DT_OK)
        return st;
    e->val_acc = val[0];
    e->val_loss = val[1];
    print_epoch(t, e);
    st = log_epoch(t, e);
    if (st == DT_OK) st = dt_trainer_check_drift(t, e->spread, e->epoch, t->ctx.step);
    const dt_status tgt = dt_target_check(t, dt_target_figure(t, e->test_acc, e->val_acc, e->test_loss, e->val_loss),
                                          e->train_s, t->ctx.step, e->msgs_sent, e->mb_sent, e->compute_s);
    if (st == DT_OK) st = tgt;
    const dt_status end = end_evaluation(t, t0, comm0);
    if (st == DT_OK) st = end;
    if (st == DT_OK) dt_trainer_on_epoch(t, e, t->ctx.step);
    return st;
}
