/* The training loop. Each epoch reshuffles this rank's shard with a seed derived from
 * (run seed, rank, epoch), and reseeds dropout the same way, so an epoch depends only on
 * the weights it starts from: a run resumed from a checkpoint repeats the same steps.
 * The loop is the only caller of the scheme's hooks (scheme.h), and keeps the context
 * they see (t->ctx) up to date: epoch, step, learning rate, the step's batch figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "comm/sim_poll.h"
#include "comm/trace.h"
#include "comm/watch.h"
#include "core/alloc.h"
#include "core/sim.h"
#include "models/model.h"
#include "trainer/trainer.h"

/* the watchdog's line names the hook a rank was in when a wait made no progress */
#define HOOK(t, name) ((t)->scheme->ops->name ? hook(t, #name, (t)->scheme->ops->name) : DT_OK)

/* a scheme's hook, named to the watchdog and on the timeline (--trace) */
static dt_status hook(dt_trainer *t, const char *name, dt_status (*fn)(dt_scheme *, dt_step_ctx *)) {
    dt_watch_phase(name);
    const dt_span span = dt_span_begin(name);
    const dt_status st = fn(t->scheme, &t->ctx);
    dt_span_end(span);
    return st;
}

/* A scheme that does not count its own baseline sends everything it would every step (C7 of
 * dtrain/scheme.h): its baseline is what it sent, kept so after each of its hooks that send. */
static void default_baseline(dt_trainer *t) {
    if (!t->scheme->own_baseline) t->comm.c.baseline_msgs = t->comm.c.msgs_sent;
}

/* Batch s of this epoch: a slice of the rank's shuffled shard, or with --split stripe this
 * rank's slice of global batch s of the shared shuffled order (the data-parallel twin of one
 * process at batch N*B). */
static const int *batch_indices(const dt_trainer *t, const int *order, int s, int *cnt) {
    const int B = t->cfg->batch;
    if (dt_split_striped(t->cfg)) {
        *cnt = B;
        return order + ((size_t)s * t->ctx.run.nworkers + (size_t)t->ctx.run.worker) * B;
    }
    int off = s * B;
    *cnt = t->ctx.run.shard_n - off < B ? t->ctx.run.shard_n - off : B;
    return order + off;
}

/* --max-steps reached, --target-acc reached, or the scheme stopped this rank */
static int stop_training(const dt_trainer *t) {
    return (t->cfg->max_steps > 0 && t->ctx.step >= t->cfg->max_steps) || t->worker_stopped || t->reached;
}

/* The current epoch ends with an evaluation: the last one, or every --eval-every. */
static int epoch_eval_planned(const dt_trainer *t) {
    const int e1 = t->ctx.epoch + 1, every = t->cfg->eval_every;
    return e1 == t->cfg->epochs || (every > 0 && e1 % every == 0);
}

/* --eval-every-steps: an evaluation after this step, unless the epoch's own follows it */
static int step_eval_due(const dt_trainer *t) {
    const dt_step_ctx *c = &t->ctx;
    const int n = t->cfg->eval_every_steps;
    if (n <= 0 || (c->step + 1) % n != 0) return 0;
    return !(c->epoch_step + 1 == c->run.steps_per_epoch && epoch_eval_planned(t));
}

/* One step: the batch, forward, backward and the hooks around the optimiser step. */
/* the model's call during backward, to the scheme's grads_ready (the first error is kept) */
static void grads_ready(void *arg, size_t from) {
    dt_trainer *t = arg;
    if (t->grads_st != DT_OK) return;
    const dt_span span = dt_span_begin("grads_ready");
    t->grads_st = t->scheme->ops->grads_ready(t->scheme, &t->ctx, from);
    dt_span_end(span);
}

static dt_status step_body(dt_trainer *t, const int *bi, int cnt, int augment, dt_rng *rng);

/* A step, its computing counted: the step's time less what it spent in communication calls
 * (the compute-only bound of the summary, docs/accounting.md) */
static dt_status train_step(dt_trainer *t, const int *bi, int cnt, int augment, dt_rng *rng) {
    dt_trace_step(t->ctx.step);
    const dt_span span = dt_span_begin("step");
    const double t0 = dt_now(), comm0 = t->comm.c.t_comm;
    const dt_status st = step_body(t, bi, cnt, augment, rng);
    t->comm.c.t_compute += dt_now() - t0 - (t->comm.c.t_comm - comm0);
    dt_span_end(span);
    dt_sim_check_failure(); /* dtrain sim --cluster: this rank's host may have failed by now */
    return st;
}

static dt_status step_body(dt_trainer *t, const int *bi, int cnt, int augment, dt_rng *rng) {
    dt_step_ctx *c = &t->ctx;
    dt_status st;
    dt_watch_progress(c->epoch + 1, c->step);
    if ((st = HOOK(t, begin_step)) != DT_OK) return st;
    /* a server that stops this rank in begin_step (dtrain/server.h S3): the step is not taken */
    const dt_scheme_server *server = t->scheme->def->server;
    if (server && server->worker_stopped && (t->worker_stopped = server->worker_stopped(t->scheme))) return DT_OK;
    dt_span span = dt_span_begin("batch");
    dt_batch_fill_targets(&t->train, bi, cnt, t->x, t->y, augment, rng);
    dt_span_end(span);
    span = dt_span_begin("forward");
    dt_model_forward(t->model, t->x, cnt, 1);
    dt_span_end(span);
    span = dt_span_begin("backward");
    int ok = 0;
    t->grads_st = DT_OK;
    dt_model_set_grads_ready(t->model, t->scheme->ops->grads_ready ? grads_ready : NULL, t);
    c->loss = dt_model_backward_targets(t->model, t->y, &ok);
    dt_model_set_grads_ready(t->model, NULL, NULL);
    dt_span_end(span);
    if (t->grads_st != DT_OK) return t->grads_st;
    /* before the scheme exchanges them: a codec may send a non-finite value as a finite one */
    if (!isfinite(c->loss) && !t->grad_noted) dt_trainer_note_nonfinite(t);
    c->correct = ok;
    c->count = cnt;
    if ((st = HOOK(t, after_backward)) != DT_OK) return st;
    if (t->scheme->ops->optimizer_step) st = HOOK(t, optimizer_step);
    else {
        span = dt_span_begin("optimizer_step");
        dt_optim_step(&t->opt, dt_model_params(t->model), dt_model_grads(t->model), c->lr);
        dt_span_end(span);
    }
    if (st != DT_OK) return st;
    if ((st = HOOK(t, end_step)) != DT_OK) return st;
    default_baseline(t);
    /* the board counts steps done: a rank lost during the save that follows this step has
     * done c->step + 1, and a restart's redone steps count from there */
    dt_watch_progress(c->epoch + 1, c->step + 1);
    return DT_OK;
}

static dt_status train_epochs(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    dt_step_ctx *c = &t->ctx;
    const int augment = cfg->augment < 0 ? t->train.augment : cfg->augment;
    int *order;
    DT_TRY(dt_malloc(order, (size_t)c->run.shard_n, "the epoch's order of %d examples", c->run.shard_n));
    const int sync_eval = t->servers == 0;
    dt_status st = DT_OK;
    int stop = 0; /* a stop asked by a signal, agreed after this step by every rank (stop.c) */
    for (c->epoch = t->start_epoch; c->epoch < cfg->epochs; c->epoch++) {
        dt_rng rng;
        /* stripe: one shared order (seeded without the rank) */
        const uint64_t who = dt_split_striped(cfg) ? 0 : (uint64_t)t->comm.rank;
        dt_rng_seed(&rng, dt_seed_mix(cfg->seed, who, (uint64_t)c->epoch, 1));
        dt_model_set_seed(t->model, dt_seed_mix(cfg->seed, (uint64_t)t->comm.rank, (uint64_t)c->epoch, 2));
        memcpy(order, t->shard, (size_t)c->run.shard_n * sizeof(int));
        dt_shuffle(order, c->run.shard_n, &rng);
        double t0 = dt_now(), loss_sum = 0, eval0 = t->eval_s;
        long seen = 0, correct = 0, bad_step = -1;
        c->lr = cfg->lr;
        int first = 0;
        if (t->at.mid_epoch) { /* resumed within this epoch: where the stopped run stood */
            first = t->at.epoch_step;
            loss_sum = t->at.loss_sum;
            seen = (long)t->at.seen;
            correct = (long)t->at.correct;
            bad_step = (long)t->at.bad_step;
            rng = t->at.data_rng;
            *dt_model_rng(t->model) = t->at.model_rng;
            t->at.mid_epoch = 0;
        }
        for (c->epoch_step = first; c->epoch_step < c->run.steps_per_epoch; c->epoch_step++) {
            if (stop_training(t)) break;
            int cnt;
            const int *bi = batch_indices(t, order, c->epoch_step, &cnt);
            c->lr = dt_schedule_lr_at(&t->sched, c->step, c->epoch + (double)c->epoch_step / c->run.steps_per_epoch,
                                      cfg->epochs);
            if ((st = train_step(t, bi, cnt, augment, &rng)) != DT_OK) goto done;
            if (t->worker_stopped) break;
            if (bad_step < 0 && !isfinite(c->loss)) bad_step = c->step;
            loss_sum += (double)c->loss * cnt;
            seen += cnt;
            correct += c->correct;
            if (sync_eval && step_eval_due(t)) {
                dt_watch_phase("an evaluation between steps");
                const dt_span span = dt_span_begin("evaluation");
                st = dt_trainer_step_report(t);
                dt_span_end(span);
                if (st != DT_OK) goto done;
            }
            c->step++;
            if ((st = dt_progress_step(t)) != DT_OK) goto done;
            if ((st = dt_stop_agreed(t, &stop)) != DT_OK) goto done;
            /* asked to stop: the epoch's last step ends it as usual (its checkpoint below) */
            if (stop && c->epoch_step + 1 < c->run.steps_per_epoch && !stop_training(t)) {
                dt_resume_point at = {.mid_epoch = 1, .epoch_step = c->epoch_step + 1, .loss_sum = loss_sum,
                                      .seen = seen, .correct = correct, .bad_step = bad_step, .data_rng = rng,
                                      .model_rng = *dt_model_rng(t->model)};
                dt_watch_phase("saving the checkpoint (stop asked)");
                st = dt_trainer_save_checkpoint(t, &at);
                if (st == DT_OK) st = dt_fail(DT_ERR_STOPPED, "step %ld (epoch %d, step %d of %d)", c->step, c->epoch + 1,
                                              c->epoch_step + 1, c->run.steps_per_epoch);
                goto done;
            }
        }
        /* evaluations between steps are not training time */
        double secs = dt_now() - t0 - (t->eval_s - eval0);
        const int last = c->epoch + 1 == cfg->epochs || stop_training(t);
        c->eval_due = epoch_eval_planned(t) || last;
        if ((st = HOOK(t, end_epoch)) != DT_OK) goto done;
        default_baseline(t);
        dt_watch_phase("the divergence check");
        if (sync_eval && (st = dt_trainer_check_divergence(t, bad_step)) != DT_OK) goto done;
        dt_watch_phase("the epoch's evaluation");
        dt_span span = dt_span_begin("evaluation");
        if (sync_eval && c->eval_due && (st = dt_trainer_epoch_report(t, loss_sum, seen, correct, secs, c->lr)) != DT_OK)
            goto done;
        if (sync_eval && c->eval_due) dt_span_end(span);
        dt_watch_phase("saving the checkpoint");
        span = dt_span_begin("checkpoint");
        if (cfg->checkpoint && (st = dt_trainer_save_checkpoint(t, NULL)) != DT_OK) goto done;
        if (cfg->checkpoint) dt_span_end(span);
        if (stop && !last && !stop_training(t)) {
            st = dt_fail(DT_ERR_STOPPED, "step %ld (the end of epoch %d)", c->step, c->epoch + 1);
            goto done;
        }
        /* the epoch's own evaluation may have reached --target-acc: this epoch was the last
         * (another would train no step, yet be reported and checkpointed as done) */
        if (last || stop_training(t)) break;
    }
done:
    free(order);
    /* what every rank reaches alike completes the agreement; another error aborts the job */
    if (st == DT_OK || st == DT_ERR_STOPPED || st == DT_ERR_DIVERGED) {
        const dt_status es = dt_stop_end(t);
        if (st == DT_OK) st = es;
    }
    return st;
}

dt_status dt_trainer_start(dt_trainer *t) {
    dt_status st = HOOK(t, start);
    /* collective, and every rank reaches it: the stop agreement's communicator */
    const dt_status ss = dt_stop_begin(t);
    if (st == DT_OK) st = ss;
    if (st == DT_OK && t->cfg->resume) st = dt_trainer_load_run_state(t);
    dt_tfile_free(&t->resume_file);
    /* a rank that could not restore its state stops them all (the caller reports it once, from
     * the ranks that failed: this rank's own status); what start set up with every rank is
     * freed with every rank */
    const dt_status all = dt_comm_agree(&t->comm, st, "another rank could not start");
    if (all == DT_ERR_MPI && st == DT_OK) return all; /* the agreement itself failed */
    if (all != DT_OK && t->scheme->ops->abandon) t->scheme->ops->abandon(t->scheme, &t->ctx);
    return st;
}

static void print_start(const dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    if (cfg->quiet || t->comm.rank != 0) return;
    printf("training %s on %s: %d examples, %d epochs, batch %d%s, lr %g, %s", cfg->model, cfg->data, t->train.n,
           cfg->epochs, cfg->batch, t->comm.size > 1 ? " per rank" : "", (double)cfg->lr, t->scheme->def->name);
    if (t->comm.size > 1)
        printf(", %d ranks (%d training), split %s, %d steps per epoch", t->comm.size, t->ctx.run.nworkers,
               cfg->split ? cfg->split : "random", t->ctx.run.steps_per_epoch);
    printf(", BLAS %s", dt_blas_core());
    if (dt_sim_active()) printf(", simulated (SimGrid SMPI)%s%s", *dt_sim_describe() ? ": " : "", dt_sim_describe());
    printf("\n");
    fflush(stdout);
}

/* A server rank serves instead of training (dtrain/server.h S1), named to the watchdog and on
 * the timeline as the hooks are. */
static dt_status serve(dt_trainer *t) {
    dt_watch_phase("serve");
    const dt_span span = dt_span_begin("serve");
    const dt_status st = t->scheme->def->server->serve(t->scheme, &t->ctx, &t->server_reports);
    dt_span_end(span);
    return st;
}

dt_status dt_trainer_run(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    print_start(t);
    dt_status st = dt_trainer_log_config(t);
    if (st != DT_OK) return st;
    t->t_start = dt_now();
    dt_progress_begin(t);
    st = t->ctx.run.worker < 0 ? serve(t) : train_epochs(t);
    dt_trace_stop(); /* the run's end is not traced: only training steps */
    dt_progress_clear(t); /* before the summary, and before an error's line */
    /* divergence and a stop are agreed by every rank together: what start made with every rank (one-sided
     * windows, which MPI_Finalize must not find alive) is freed with every rank */
    if ((st == DT_ERR_DIVERGED || st == DT_ERR_STOPPED) && t->scheme->ops->abandon) t->scheme->ops->abandon(t->scheme, &t->ctx);
    if (st != DT_OK) return st;
    /* how far apart the ranks' models ended, before any final averaging */
    double spread = 0, spread_after = 0;
    dt_watch_phase("the end of the run");
    if (t->scheme->decentralized && (st = dt_trainer_agreed_model(t, &spread)) != DT_OK) return st;
    if (t->scheme->decentralized && (st = dt_trainer_check_drift(t, spread, t->ctx.epoch + 1, t->ctx.step)) != DT_OK)
        return st;
    if ((st = HOOK(t, finish)) != DT_OK) return st;
    default_baseline(t);
    /* every rank keeps the agreed (averaged) model: that is what is saved */
    if ((st = dt_trainer_agreed_model(t, &spread_after)) != DT_OK) return st;
    if (t->replay) dt_replay_spreads(t->replay, &spread, &spread_after); /* the replayed run's */
    memcpy(dt_model_params(t->model), t->eval_params, dt_model_num_params(t->model) * sizeof(float));
    memcpy(dt_model_state(t->model), t->eval_state, dt_model_num_state(t->model) * sizeof(float));
    if ((st = dt_trainer_check_final(t)) != DT_OK) return st;
    if (t->servers > 0 && t->comm.rank == 0 && t->last.epoch != cfg->epochs) {
        /* asynchronous schemes report their final model here, unless the last epoch was */
        const double t0 = dt_now();
        st = dt_evaluate(t->model, &t->test, cfg->batch, 0, &t->last.test_acc, &t->last.test_loss);
        if (st == DT_OK && t->val.n) st = dt_evaluate(t->model, &t->val, cfg->batch, 0, &t->last.val_acc, &t->last.val_loss);
        t->eval_s += dt_now() - t0;
        if (st != DT_OK) return st;
        if (!cfg->quiet && t->val.n)
            printf("final model: test accuracy %.2f%%, validation %.2f%%\n", 100 * t->last.test_acc, 100 * t->last.val_acc);
        else if (!cfg->quiet) printf("final model: test accuracy %.2f%%\n", 100 * t->last.test_acc);
    }
    const double wall = dt_now() - t->t_start;
    /* the outputs in order of worth: the weights first, then the summary that marks the run
     * finished in its log (a --run-dir whose log has one is not run again: it must not have one
     * unless the weights are there), then the trace, which only explains the run */
    if (cfg->weights_out && t->comm.rank == 0 &&
        (st = dt_model_save_meta(t->model, cfg->weights_out, cfg->model, cfg->data, t->scheme->def->name)) != DT_OK)
        return st;
    if ((st = dt_trainer_summary(t, spread, spread_after, wall)) != DT_OK) return st;
    /* after the run's time was taken: the trace's messages are neither training nor counted */
    if (cfg->trace) {
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        /* a trace that cannot be written (rank 0 writes it) is a warning: the run stands, with
         * its weights and log */
        if (dt_trace_write(t->comm.comm, cfg->trace, host, t->scheme->def->name) != DT_OK)
            fprintf(stderr, "dtrain: warning: %s (the run's weights and log are written)\n", dt_last_error());
    }
    return DT_OK;
}
