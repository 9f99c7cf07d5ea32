/* The trainer's set-up: configuration defaults, data and model, the training set divided
 * among the ranks, the buffers, and the context the scheme's hooks see. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/trace.h"
#include "core/alloc.h"
#include "core/paths.h"
#include "core/tensorfile.h"
#include "data/text.h"
#include "trainer/ckset.h"
#include "trainer/plan_cache.h"
#include "trainer/trainer.h"

void dt_train_config_defaults(dt_train_config *c) {
    *c = (dt_train_config){.model = "cnn1", .data = "mnist", .split = "random", .epochs = 10, .batch = 64,
                           .lr = 0.05f, .schedule = "const", .seed = 1, .augment = -1, .eval_every = 1,
                           .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

void dt_data_dir(const char *name, const char *override_dir, char *out, size_t len) {
    if (override_dir) { snprintf(out, len, "%s", override_dir); return; }
    const char *env = getenv("DTRAIN_DATA");
    snprintf(out, len, "%s/%s", env && *env ? env : "data", name);
}

/* --val N: the last N examples of the training set, after --train-limit, become the held-out
 * set. The last ones, not a seeded draw: the files' order is fixed, so every seed, every number
 * of ranks, every scheme and --split holds out the same examples and their val_acc compare;
 * MNIST's, Fashion-MNIST's and CIFAR-10's training files are not ordered by class. */
static dt_status hold_out(dt_trainer *t) {
    const int n = t->cfg->val;
    if (t->cfg->target_on_val && (n <= 0 || !dt_target_set(t->cfg)))
        return dt_fail(DT_ERR_ARG, "--target-on val: needs --val N (the held-out set) and --target-acc A or --target-loss L");
    if (n <= 0) return DT_OK;
    if (n >= t->train.n)
        return dt_fail(DT_ERR_ARG, "--val %d: must be smaller than the training set (%d examples%s)", n, t->train.n,
                       t->cfg->train_limit > 0 ? ", after --train-limit" : "");
    dt_dataset *v = &t->val;
    *v = t->train;
    const size_t per = (size_t)t->train.c * t->train.h * t->train.w, keep = (size_t)(t->train.n - n);
    v->n = n;
    if (t->train.text) { /* the tokens of the last n windows (and the one after them), its own copy */
        const size_t T = (size_t)t->train.h, from = keep * T, len = (size_t)n * T + T;
        v->images = NULL, v->labels = NULL;
        if (!(v->tokens = malloc(len * sizeof *v->tokens))) return dt_nomem("the validation split of %d windows", n);
        memcpy(v->tokens, t->train.tokens + from, len * sizeof *v->tokens);
        v->ntokens = (long long)len;
        dt_dataset_truncate(&t->train, (int)keep);
        return DT_OK;
    }
    v->images = malloc((size_t)n * per);
    v->labels = malloc((size_t)n);
    if (!v->images || !v->labels) return dt_nomem("the validation split of %d images", n);
    memcpy(v->images, t->train.images + keep * per, (size_t)n * per);
    memcpy(v->labels, t->train.labels + keep, (size_t)n);
    dt_dataset_truncate(&t->train, (int)keep);
    return DT_OK;
}

/* --images N: the steps per training rank that see N images together (rounded up), and the
 * epochs they take, the last one partial: --max-steps's stop, set for the user. */
static dt_status derive_length(dt_trainer *t) {
    dt_train_config *c = &t->own;
    if (c->images <= 0) return DT_OK;
    if (c->max_steps > 0)
        return dt_fail(DT_ERR_ARG, "--images %ld: not with --max-steps (both set the run's length; give one)", c->images);
    const long per_step = (long)c->batch * t->ctx.run.nworkers, spe = t->ctx.run.steps_per_epoch;
    c->max_steps = (c->images + per_step - 1) / per_step;
    const long epochs = (c->max_steps + spe - 1) / spe;
    if (epochs > 1000000) return dt_fail(DT_ERR_ARG, "--images %ld: takes %ld epochs (at most 1000000)", c->images, epochs);
    c->epochs = (int)epochs;
    t->ctx.run.max_steps = c->max_steps;
    t->ctx.run.epochs = c->epochs;
    return DT_OK;
}

/* The split is computed on rank 0 and broadcast: every rank then knows its shard. */
static dt_status make_shard(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    dt_run_info *run = &t->ctx.run;
    const int n = t->train.n;
    int *idx = malloc((size_t)n * sizeof *idx), *off = malloc((size_t)(run->nworkers + 1) * sizeof *off);
    if (!idx || !off) { free(idx); free(off); return dt_nomem("the shard split of %d examples", n); }
    dt_status st = DT_OK;
    if (dt_split_striped(cfg)) {
        /* every rank walks the same global order and takes its slice of each global batch:
         * the data-parallel twin of one process at batch N*B (see loop.c) */
        for (int i = 0; i < n; i++) idx[i] = i;
        for (int r = 0; r <= run->nworkers; r++) off[r] = r == run->nworkers ? n : 0;
    } else {
        dt_split_kind k;
        if ((st = dt_split_parse(cfg->split ? cfg->split : "random", &k)) == DT_OK && t->comm.rank == 0)
            st = dt_split(t->train.labels, n, t->train.classes, run->nworkers, k, cfg->seed, idx, off);
        int code = st == DT_OK ? 0 : 1;
        int err = MPI_Bcast(&code, 1, MPI_INT, 0, t->comm.comm);
        if (err == MPI_SUCCESS && !code) err = MPI_Bcast(off, run->nworkers + 1, MPI_INT, 0, t->comm.comm);
        if (err == MPI_SUCCESS && !code) err = MPI_Bcast(idx, n, MPI_INT, 0, t->comm.comm);
        if (err != MPI_SUCCESS || code) {
            free(idx); free(off);
            if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Bcast (the split)");
            return t->comm.rank == 0 ? st : dt_fail(DT_ERR_ARG, "the split failed on rank 0");
        }
    }
    if (run->worker >= 0) {
        const int lo = dt_split_striped(cfg) ? 0 : off[run->worker], hi = dt_split_striped(cfg) ? n : off[run->worker + 1];
        run->shard_n = hi - lo;
        st = dt_malloc(t->shard, (size_t)run->shard_n, "the shard of %d examples", run->shard_n);
        if (st == DT_OK) memcpy(t->shard, idx + lo, (size_t)run->shard_n * sizeof *t->shard);
    }
    free(idx); free(off);
    return st;
}

static dt_status log_service(void *host, const char *line) { return dt_trainer_log(host, line); }

/* What the hooks see: the trainer's objects by pointer, the run's fixed figures, services. */
static void make_context(dt_trainer *t) {
    dt_step_ctx *c = &t->ctx;
    c->model = t->model;
    c->comm = &t->comm;
    c->opt = &t->opt;
    c->sched = &t->sched;
    c->run.epochs = t->cfg->epochs;
    c->run.batch = t->cfg->batch;
    c->run.eval_every = t->cfg->eval_every;
    c->run.eval_every_steps = t->cfg->eval_every_steps;
    c->run.max_steps = t->cfg->max_steps;
    c->run.quiet = t->cfg->quiet;
    c->host = t;
    c->log = log_service;
    t->server_reports = (dt_server_reports){.host = t, .epoch = dt_trainer_report_server_epoch,
                                            .step = dt_trainer_report_server_step};
}

void dt_train_optim_config(const dt_train_config *cfg, dt_optim_config *oc) {
    dt_optim_config_defaults(oc);
    oc->kind = (dt_optim_kind)cfg->optim;
    oc->weight_decay = cfg->weight_decay;
    oc->decay_on = (dt_decay_on)cfg->decay_on;
    oc->momentum = cfg->momentum;
    oc->nesterov = cfg->nesterov;
    oc->beta1 = cfg->beta1;
    oc->beta2 = cfg->beta2;
    oc->eps = cfg->eps;
    oc->clip = cfg->clip;
}

/* The run's optimiser, from the configuration's flags. */
static dt_status init_optim(dt_trainer *t) {
    dt_optim_config oc;
    dt_train_optim_config(t->cfg, &oc);
    return dt_optim_init(&t->opt, &oc, t->model);
}

/* The schedule counts steps with a warm-up or when the run's length is given in steps
 * (--max-steps, --images): cosine then ends at the run's last step, as nanoGPT's lr_decay_iters. */
static dt_status schedule_steps(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    if (cfg->lr_warmup <= 0 && cfg->max_steps <= 0) return DT_OK;
    const long all = (long)cfg->epochs * t->ctx.run.steps_per_epoch;
    const long steps = cfg->max_steps > 0 && cfg->max_steps < all ? cfg->max_steps : all;
    return dt_schedule_steps(&t->sched, cfg->lr_warmup, steps - 1);
}

/* Equal step counts on every training rank, so synchronous schemes never wait for a rank
 * that has finished; one process keeps its last partial batch. */
static dt_status steps_per_epoch(dt_trainer *t) {
    dt_run_info *run = &t->ctx.run;
    int mine = run->worker >= 0 ? run->shard_n : INT_MAX, smallest = mine;
    int err = MPI_Allreduce(&mine, &smallest, 1, MPI_INT, MPI_MIN, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (shard sizes)");
    if (dt_split_striped(t->cfg)) smallest = t->train.n / run->nworkers;
    const int B = t->cfg->batch;
    run->steps_per_epoch = t->comm.size == 1 ? (smallest + B - 1) / B : smallest / B;
    if (run->steps_per_epoch < 1)
        return dt_fail(DT_ERR_ARG, "--batch %d is larger than the smallest shard (%d examples)", B, smallest);
    return DT_OK;
}

/* The scheme, checked against the number of ranks and the run's flags. */
static dt_status make_scheme(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    dt_status st = t->choice.def ? dt_scheme_create(&t->choice, &t->scheme) : dt_scheme_make(&cfg->scheme, &t->scheme);
    if (st != DT_OK) return st;
    const dt_scheme *s = t->scheme;
    const int servers = t->servers = dt_scheme_servers(s);
    if (!strcmp(s->def->name, "local") && t->comm.size > 1)
        return dt_fail(DT_ERR_ARG, "--algo local trains on one process, but %d ranks were started (choose one of: %s)",
                       t->comm.size, dt_scheme_names());
    if (servers >= t->comm.size)
        return dt_fail(DT_ERR_ARG, "--algo %s: %d server rank(s) need at least one more rank to train (started %d)",
                       s->def->name, servers, t->comm.size);
    /* one server evaluates the model it holds on its own; several hold a slice each */
    if (servers > 1 && (dt_target_set(cfg) || cfg->eval_every_steps > 0))
        return dt_fail(DT_ERR_ARG, "%s: not with --algo %s --servers %d (the model is sliced across the servers, so "
                       "no rank holds it whole to evaluate during the run; use --servers 1)",
                       cfg->target_acc > 0 ? "--target-acc" : cfg->target_loss > 0 ? "--target-loss" : "--eval-every-steps",
                       s->def->name, servers);
    if (servers > 0 && (cfg->checkpoint || cfg->resume))
        return dt_fail(DT_ERR_ARG, "%s: --algo %s cannot checkpoint: its servers run asynchronously of the workers' "
                       "epochs, so there is no point at which the whole run's state is consistent",
                       cfg->checkpoint ? "--checkpoint" : "--resume", s->def->name);
    t->ctx.run.nworkers = t->comm.size - servers;
    t->ctx.run.worker = t->comm.rank >= servers ? t->comm.rank - servers : -1;
    return DT_OK;
}

dt_status dt_train_check_paths(const dt_train_config *cfg, int rank) {
    dt_status st = DT_OK;
    if (rank == 0 && cfg->weights_out) st = dt_check_output("--out", cfg->weights_out, 0);
    if (st == DT_OK && rank == 0 && cfg->log_path) st = dt_check_output("--log", cfg->log_path, 1);
    if (st == DT_OK && rank == 0 && cfg->log_path) st = dt_check_log(cfg->log_path);
    /* one process writes this file; several ranks their parts beside it and rank 0 it */
    if (st == DT_OK && cfg->checkpoint) st = dt_check_output("--checkpoint", cfg->checkpoint, 0);
    if (st == DT_OK && rank == 0 && cfg->checkpoint) st = dt_checkpoint_check_target(cfg);
    if (st == DT_OK && cfg->resume) st = dt_check_input("--resume", cfg->resume);
    long from, to;
    if (st == DT_OK && (cfg->trace || cfg->trace_steps)) st = dt_trace_parse_steps(cfg->trace_steps, &from, &to);
    if (st == DT_OK && cfg->trace_steps && !cfg->trace) st = dt_fail(DT_ERR_ARG, "--trace-steps %s: needs --trace FILE", cfg->trace_steps);
    if (st == DT_OK && rank == 0 && cfg->trace) st = dt_check_output("--trace", cfg->trace, 0);
    return st;
}

/* Temporaries of killed writers (FILE.tmp.PID.RANDOM, its parts' too) go when a run starts,
 * not only when it first saves: a run that fails or diverges before then would keep them
 * forever. Each rank sweeps its own parts (they may be on its own disk, where its pids mean
 * something). */
static void remove_stale(const dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    if (!cfg->checkpoint) return;
    if (t->comm.rank == 0) dt_remove_stale_tmp(cfg->checkpoint);
    dt_ckset_remove_stale_tmp(cfg->checkpoint, t->comm.rank);
}

/* Room for what the run writes, once the model's size is known: the weights, and at least as
 * much for each checkpoint file. */
static dt_status check_room(const dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    const size_t bytes = (dt_model_num_params(t->model) + dt_model_num_state(t->model)) * sizeof(float);
    dt_status st = DT_OK;
    if (t->comm.rank == 0 && cfg->weights_out) st = dt_check_room("--out", cfg->weights_out, bytes);
    if (st == DT_OK && cfg->checkpoint) st = dt_check_room("--checkpoint", cfg->checkpoint, bytes);
    return st;
}

dt_status dt_trainer_fit_data(const dt_model *m, const char *model, const char *data, dt_dataset *train, dt_dataset *test) {
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    if (train->text) {
        /* a text's examples are windows of the model's context; every token in its vocabulary */
        const int vocab = dt_model_vocab(m);
        if (!vocab || c != 1 || w != 1 || dt_model_positions(m) != h)
            return dt_fail(DT_ERR_ARG, "--data %s is a text: --model %s is not a language model (expected an 'input seq=T' "
                           "of token ids and a prediction at every position: gpt-tiny, gpt-small)", data, model);
        dt_dataset *sets[2] = {train, test};
        for (int i = 0; i < 2; i++) {
            if (!sets[i]) continue;
            dt_status st = dt_dataset_set_window(sets[i], h);
            if (st == DT_OK) st = dt_text_check_vocab(sets[i], vocab < dt_model_num_classes(m) ? vocab : dt_model_num_classes(m));
            if (st != DT_OK) return dt_fail(DT_ERR_ARG, "--data %s (its %s part): %s", data, i ? "held-out" : "training",
                                            dt_last_error());
        }
        return DT_OK;
    }
    if (c != train->c || h != train->h || w != train->w)
        return dt_fail(DT_ERR_ARG, "--model %s takes %dx%dx%d inputs, but --data %s has %dx%dx%d images",
                       model, c, h, w, data, train->c, train->h, train->w);
    if (dt_model_num_classes(m) != train->classes || dt_model_positions(m) != 1)
        return dt_fail(DT_ERR_ARG, "--model %s has %d outputs%s, --data %s has %d classes", model,
                       dt_model_num_classes(m), dt_model_positions(m) != 1 ? " at every position" : "", data,
                       train->classes);
    return DT_OK;
}

/* Everything but --resume; returns at its first error. */
static dt_status init_run(dt_trainer *t, const dt_train_config *cfg) {
    dt_status st;
    if ((st = dt_train_check_paths(cfg, t->comm.rank)) != DT_OK) return st;
    remove_stale(t);
    char dir[1024];
    dt_data_dir(cfg->data, cfg->data_dir, dir, sizeof dir);
    if ((st = dt_model_open(cfg->model, &t->model)) != DT_OK) return st;
    if ((st = dt_model_set_precision(t->model, (dt_precision)cfg->precision)) != DT_OK) return st;
    if (cfg->plan && !strcmp(cfg->plan, "auto") && t->comm.size > 1)
        return dt_fail(DT_ERR_ARG, "--plan auto with %d ranks: dtrain run makes it once for all of them; under mpiexec "
                       "give --plan FILE (dtrain tune --out FILE)", t->comm.size);
    if ((st = dt_plan_use(cfg->plan, cfg->model, cfg->batch, cfg->precision, t->model, t->comm.rank == 0 ? stderr : NULL,
                          t->plan, sizeof t->plan)) != DT_OK)
        return st;
    if (cfg->precision == DT_PRECISION_BF16 && dt_model_precision(t->model) == DT_PRECISION_FP32 && t->comm.rank == 0)
        fprintf(stderr, "dtrain: note: --precision bf16 runs fp32: the plan (%s) found bf16 slower here for this model\n",
                t->plan);
    if (cfg->precision == DT_PRECISION_BF16 && dt_bf16_fallback_reason() && t->comm.rank == 0)
        fprintf(stderr, "dtrain: note: --precision bf16 computes in fp32 here (%s): it saves memory, not time\n",
                dt_bf16_fallback_reason());
    if ((st = check_room(t)) != DT_OK) return st;
    /* (only the examples the run uses: --train-limit and --test-limit keep the first ones) */
    if ((st = dt_dataset_load_first(cfg->data, dir, 1, cfg->train_limit, &t->train)) != DT_OK) return st;
    if ((st = dt_dataset_load_first(cfg->data, dir, 0, cfg->test_limit, &t->test)) != DT_OK) return st;
    int c, h, w;
    dt_model_input_shape(t->model, &c, &h, &w);
    if ((st = dt_trainer_fit_data(t->model, cfg->model, cfg->data, &t->train, &t->test)) != DT_OK) return st;
    if (cfg->train_limit > 0 && cfg->train_limit < t->train.n) dt_dataset_truncate(&t->train, cfg->train_limit);
    if (cfg->test_limit > 0 && cfg->test_limit < t->test.n) dt_dataset_truncate(&t->test, cfg->test_limit);
    if ((st = hold_out(t)) != DT_OK) return st;
    if ((st = dt_schedule_parse(cfg->schedule ? cfg->schedule : "const", cfg->lr, &t->sched)) != DT_OK) return st;
    if ((st = init_optim(t)) != DT_OK) return st;
    make_context(t);
    if ((st = make_scheme(t)) != DT_OK) return st;
    if ((st = make_shard(t)) != DT_OK) return st;
    t->x = malloc((size_t)cfg->batch * c * h * w * sizeof(float));
    t->y = malloc((size_t)cfg->batch * (size_t)dt_model_positions(t->model) * sizeof *t->y);
    t->idx = malloc((size_t)cfg->batch * sizeof(int));
    t->eval_params = malloc((dt_model_num_params(t->model) + 1) * sizeof(float));
    t->eval_state = malloc((dt_model_num_state(t->model) + 1) * sizeof(float));
    if (!t->x || !t->y || !t->idx || !t->eval_params || !t->eval_state)
        return dt_nomem("the training batch and the eval copies of the model");
    dt_model_init(t->model, cfg->seed); /* the same seed on every rank: identical start */
    if ((st = dt_model_reserve(t->model, cfg->batch)) != DT_OK) return st;
    if ((st = steps_per_epoch(t)) != DT_OK) return st;
    if (cfg->trace) {
        long from, to;
        if ((st = dt_trace_parse_steps(cfg->trace_steps, &from, &to)) != DT_OK) return st;
        if ((st = dt_trace_open(from, to)) != DT_OK) return st;
    }
    if ((st = derive_length(t)) != DT_OK) return st;
    if ((st = schedule_steps(t)) != DT_OK) return st;
    dt_trainer_warn_unreached(t);
    return DT_OK;
}

dt_status dt_trainer_init(dt_trainer *t, const dt_train_config *cfg, dt_scheme_choice *checked) {
    memset(t, 0, sizeof *t);
    if (checked) { /* taken: the flags' text is parsed once */
        t->choice = *checked;
        checked->opts = NULL;
    }
    t->own = *cfg;
    t->cfg = cfg = &t->own;
    t->log_fd = -1;
    dt_status st;
    if ((st = dt_comm_init(NULL, NULL, &t->comm)) != DT_OK) return st;
    st = init_run(t, cfg);
    /* collective with several ranks: reached by every rank, whatever init_run said */
    if (cfg->resume) st = dt_trainer_load_checkpoint(t, st);
    if (st == DT_OK && cfg->resume && t->start_epoch >= cfg->epochs) {
        t->resumed_finished = 1; /* --resume auto takes it as the run's end (cmd_train.c) */
        st = dt_fail(DT_ERR_ARG, "--resume %s: the checkpoint already finished %d epochs (--epochs %d)",
                     cfg->resume, t->start_epoch, cfg->epochs);
    }
    return st;
}

void dt_trainer_free(dt_trainer *t) {
    dt_tfile_free(&t->resume_file);
    dt_trace_close();
    dt_scheme_free(t->scheme);
    dt_scheme_choice_free(&t->choice);
    dt_model_free(t->model);
    dt_optim_free(&t->opt);
    dt_dataset_free(&t->train);
    dt_dataset_free(&t->test);
    dt_dataset_free(&t->val);
    free(t->shard); free(t->x); free(t->y); free(t->idx);
    if (t->log_fd >= 0) close(t->log_fd);
    free(t->eval_params); free(t->eval_state);
    dt_replay_free(t->replay);
    memset(t, 0, sizeof *t);
    t->log_fd = -1;
}

/* An error of some ranks, agreed: every rank returns an error, the message stays on the
 * ranks that met it. */
static dt_status agreed(dt_trainer *t, dt_status st) {
    return dt_comm_agree(&t->comm, st, "another rank failed at set-up (its message is on that rank)");
}

dt_status dt_train(const dt_train_config *c, dt_train_result *out) {
    memset(out, 0, sizeof *out);
    dt_trainer t;
    dt_status st = agreed(&t, dt_trainer_init(&t, c, NULL));
    if (st == DT_OK) st = agreed(&t, dt_trainer_start(&t));
    if (st == DT_OK) st = dt_trainer_run(&t);
    if (st == DT_OK) {
        out->test_acc = t.last.test_acc;
        out->test_loss = t.last.test_loss;
        out->val_acc = t.val.n ? t.last.val_acc : -1;
        out->val_loss = t.val.n ? t.last.val_loss : -1;
        out->steps = t.ctx.step;
        out->time_to_target_s = t.reached ? t.target_train_s : -1;
        out->msgs_sent = t.last.msgs_sent;
        out->mb_sent = t.last.mb_sent;
        out->msgs_pct = t.last.msgs_pct;
    }
    dt_trainer_free(&t);
    return st;
}
