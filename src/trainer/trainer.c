/* The training loop. Each epoch reshuffles this rank's shard with a seed derived from
 * (run seed, rank, epoch), and reseeds dropout the same way, so an epoch depends only on
 * the weights it starts from: a run resumed from a checkpoint repeats the same steps.
 * Measurement traffic (evaluation of the averaged model, counters, the split) uses plain
 * MPI calls and is not counted as training communication. */
#include "trainer/trainer.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/tensorfile.h"
#include "models/model.h"

void dt_data_dir(const char *name, const char *override_dir, char *out, size_t len) {
    if (override_dir) { snprintf(out, len, "%s", override_dir); return; }
    const char *env = getenv("DTRAIN_DATA");
    snprintf(out, len, "%s/%s", env && *env ? env : "data", name);
}

dt_status dt_model_open(const char *name_or_path, dt_model **out) {
    struct stat sb;
    if (strchr(name_or_path, '/') || strstr(name_or_path, ".spec") ||
        (stat(name_or_path, &sb) == 0 && S_ISREG(sb.st_mode)))
        return dt_model_from_file(name_or_path, out);
    return dt_model_from_name(name_or_path, out);
}

dt_status dt_evaluate(dt_model *m, const dt_dataset *d, int batch, int limit, double *acc, double *loss) {
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    if (c != d->c || h != d->h || w != d->w)
        return dt_fail(DT_ERR_ARG, "the model takes %dx%dx%d inputs, %s images are %dx%dx%d", c, h, w,
                       d->name, d->c, d->h, d->w);
    int n = limit > 0 && limit < d->n ? limit : d->n;
    float *x = malloc((size_t)batch * c * h * w * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    int *idx = malloc((size_t)batch * sizeof(int));
    dt_status st = (x && y && idx) ? dt_model_reserve(m, batch) : dt_fail(DT_ERR_NOMEM, "out of memory");
    long correct = 0;
    double lsum = 0;
    for (int b = 0; st == DT_OK && b < n; b += batch) {
        int cnt = n - b < batch ? n - b : batch, ok = 0;
        for (int i = 0; i < cnt; i++) idx[i] = b + i;
        dt_batch_fill(d, idx, cnt, x, y, 0, NULL);
        dt_model_forward(m, x, cnt, 0);
        lsum += (double)dt_model_loss(m, y, &ok) * cnt;
        correct += ok;
    }
    free(x); free(y); free(idx);
    if (st == DT_OK) {
        *acc = n ? (double)correct / n : 0;
        *loss = n ? lsum / n : 0;
    }
    return st;
}

/* ------------------------------------------------------------------ log (rank 0) */

static dt_status log_fill(void *ctx, void *file) {
    dt_trainer *t = ctx;
    return fwrite(t->log_text, 1, t->log_len, file) == t->log_len
               ? DT_OK : dt_fail(DT_ERR_IO, "%s: write failed", t->cfg->log_path);
}

static dt_status log_append(dt_trainer *t, const char *line) {
    if (!t->cfg->log_path || t->comm.rank != 0) return DT_OK;
    size_t n = strlen(line);
    if (t->log_len + n + 2 > t->log_cap) {
        size_t cap = (t->log_cap + n + 2) * 2;
        char *nb = realloc(t->log_text, cap);
        if (!nb) return dt_fail(DT_ERR_NOMEM, "out of memory");
        t->log_text = nb; t->log_cap = cap;
    }
    memcpy(t->log_text + t->log_len, line, n);
    t->log_len += n;
    t->log_text[t->log_len++] = '\n';
    return dt_write_atomic(t->cfg->log_path, log_fill, t);
}

dt_status dt_trainer_log(dt_trainer *t, const char *json_line) { return log_append(t, json_line); }

/* JSON string content: names come from the command line. */
static void json_escape(char *out, size_t len, const char *s) {
    size_t o = 0;
    for (; *s && o + 7 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') { out[o++] = '\\'; out[o++] = (char)ch; }
        else if (ch < 0x20) o += (size_t)snprintf(out + o, len - o, "\\u%04x", ch);
        else out[o++] = (char)ch;
    }
    out[o] = 0;
}

/* ------------------------------------------------------------------ checkpoints */

static void rank_path(const dt_trainer *t, const char *base, char *out, size_t len) {
    if (t->comm.size > 1) snprintf(out, len, "%s.rank%d", base, t->comm.rank);
    else snprintf(out, len, "%s", base);
}

/* Which run wrote a checkpoint: resuming it under another scheme, codec or number of ranks
 * would mix state that does not belong together. */
static void run_signature(const dt_trainer *t, char out[64]) {
    memset(out, 0, 64);
    const char *c = t->cfg->algo_opt.compress ? t->cfg->algo_opt.compress : "none";
    snprintf(out, 64, "--algo %s --compress %s on %d ranks", t->strategy->name, c, t->comm.size);
}

/* Model, momentum, progress, this rank's counters and the scheme's own state: everything a
 * resumed run needs to repeat the uninterrupted one. */
static dt_status save_checkpoint(dt_trainer *t) {
    char path[1100], sig[64];
    rank_path(t, t->cfg->checkpoint, path, sizeof path);
    run_signature(t, sig);
    dt_model *m = t->model;
    dt_record *mr = calloc((size_t)(dt_model_num_tensors(m) + dt_model_num_state_tensors(m)), sizeof *mr);
    if (!mr) return dt_fail(DT_ERR_NOMEM, "out of memory");
    const int nm = dt_model_records(m, mr);
    float progress[2] = {(float)(t->epoch + 1), (float)t->step};
    dt_records l = {0};
    dt_status st = DT_OK;
    for (int i = 0; i < nm && st == DT_OK; i++) st = dt_records_put(&l, &mr[i]);
    if (st == DT_OK && t->opt.buf) st = dt_records_add(&l, "optim:momentum", t->opt.buf, t->opt.n);
    if (st == DT_OK) st = dt_records_add(&l, "train:progress", progress, 2);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:run", sig, sizeof sig);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:counters", &t->comm.c, sizeof t->comm.c);
    if (st == DT_OK && t->strategy->save_state) st = t->strategy->save_state(t->strategy, t, &l);
    if (st == DT_OK) st = dt_tfile_write(path, l.r, l.n);
    dt_records_free(&l);
    free(mr);
    return st;
}

/* Before the scheme starts: model, momentum and progress. */
static dt_status load_checkpoint(dt_trainer *t, dt_tfile *f, char *path, size_t len, int *start_epoch) {
    rank_path(t, t->cfg->resume, path, len);
    dt_status st = dt_tfile_read(path, f);
    if (st == DT_OK) st = dt_model_load_records(t->model, f, path);
    if (st != DT_OK) return st;
    const dt_record *prog = dt_tfile_find(f, "train:progress");
    const dt_record *mom = dt_tfile_find(f, "optim:momentum");
    const dt_record *run = dt_tfile_find(f, "train:run");
    char sig[64];
    run_signature(t, sig);
    if (!prog || prog->numel != 2)
        return dt_fail(DT_ERR_FORMAT, "%s: not a checkpoint (no train:progress; a weights file?)", path);
    if (run && (run->numel * sizeof(float) != sizeof sig || memcmp(run->data, sig, sizeof sig) != 0)) {
        char saved[64] = "";
        memcpy(saved, run->data, run->numel * sizeof(float) < sizeof saved ? run->numel * sizeof(float) : sizeof saved);
        saved[63] = 0;
        return dt_fail(DT_ERR_ARG, "--resume %s: saved by a run with %s, this run has %s", path, saved, sig);
    }
    if (t->opt.buf && (!mom || mom->numel != t->opt.n))
        return dt_fail(DT_ERR_FORMAT, "%s: has no momentum buffer for this model (saved with --momentum 0?)", path);
    *start_epoch = (int)prog->data[0];
    t->step = (long)prog->data[1];
    if (t->opt.buf) { memcpy(t->opt.buf, mom->data, t->opt.n * sizeof(float)); t->opt.started = 1; }
    return DT_OK;
}

/* After the scheme started (its buffers exist, its set-up exchanges are done): the counters
 * and the scheme's own state, which overwrite what start set up. */
static dt_status load_run_state(dt_trainer *t, const dt_tfile *f, const char *path) {
    if (dt_tfile_find(f, "train:counters")) {
        dt_status st = dt_tfile_take(f, path, "train:counters", &t->comm.c, sizeof t->comm.c);
        if (st != DT_OK) return st;
    }
    return t->strategy->load_state ? t->strategy->load_state(t->strategy, t, f, path) : DT_OK;
}

/* ------------------------------------------------------------------ set-up */

/* The split is computed on rank 0 and broadcast: every rank then knows its shard. */
static dt_status make_shard(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    const int n = t->train.n;
    int *idx = malloc((size_t)n * sizeof *idx), *off = malloc((size_t)(t->nworkers + 1) * sizeof *off);
    if (!idx || !off) { free(idx); free(off); return dt_fail(DT_ERR_NOMEM, "out of memory"); }
    dt_status st = DT_OK;
    const char *kind = cfg->split ? cfg->split : "random";
    if (!strcmp(kind, "stripe")) {
        /* every rank walks the same global order and takes its slice of each global batch:
         * the data-parallel twin of one process at batch N*B (see order_batches) */
        for (int i = 0; i < n; i++) idx[i] = i;
        for (int r = 0; r <= t->nworkers; r++) off[r] = r == t->nworkers ? n : 0;
    } else {
        dt_split_kind k;
        int code = 0;
        if ((st = dt_split_parse(kind, &k)) == DT_OK && t->comm.rank == 0)
            st = dt_split(t->train.labels, n, t->train.classes, t->nworkers, k, cfg->seed, idx, off);
        code = st == DT_OK ? 0 : 1;
        MPI_Bcast(&code, 1, MPI_INT, 0, t->comm.comm);
        if (code) {
            free(idx); free(off);
            return t->comm.rank == 0 ? st : dt_fail(DT_ERR_ARG, "the split failed on rank 0");
        }
        MPI_Bcast(off, t->nworkers + 1, MPI_INT, 0, t->comm.comm);
        MPI_Bcast(idx, n, MPI_INT, 0, t->comm.comm);
    }
    if (t->worker >= 0) {
        int lo = !strcmp(kind, "stripe") ? 0 : off[t->worker], hi = !strcmp(kind, "stripe") ? n : off[t->worker + 1];
        t->shard_n = hi - lo;
        t->shard = malloc((size_t)(t->shard_n ? t->shard_n : 1) * sizeof *t->shard);
        if (!t->shard) st = dt_fail(DT_ERR_NOMEM, "out of memory");
        else memcpy(t->shard, idx + lo, (size_t)t->shard_n * sizeof *t->shard);
    }
    free(idx); free(off);
    return st;
}

dt_status dt_trainer_init(dt_trainer *t, const dt_train_config *cfg) {
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    dt_status st;
    if ((st = dt_comm_init(NULL, NULL, &t->comm)) != DT_OK) return st;
    char dir[1024];
    dt_data_dir(cfg->data, cfg->data_dir, dir, sizeof dir);
    if ((st = dt_model_open(cfg->model, &t->model)) != DT_OK) return st;
    if ((st = dt_dataset_load(cfg->data, dir, 1, &t->train)) != DT_OK) return st;
    if ((st = dt_dataset_load(cfg->data, dir, 0, &t->test)) != DT_OK) return st;
    int c, h, w;
    dt_model_input_shape(t->model, &c, &h, &w);
    if (c != t->train.c || h != t->train.h || w != t->train.w)
        return dt_fail(DT_ERR_ARG, "--model %s takes %dx%dx%d inputs, but --data %s has %dx%dx%d images",
                       cfg->model, c, h, w, cfg->data, t->train.c, t->train.h, t->train.w);
    if (dt_model_num_classes(t->model) != t->train.classes)
        return dt_fail(DT_ERR_ARG, "--model %s has %d outputs, --data %s has %d classes", cfg->model,
                       dt_model_num_classes(t->model), cfg->data, t->train.classes);
    if (cfg->train_limit > 0 && cfg->train_limit < t->train.n) dt_dataset_truncate(&t->train, cfg->train_limit);
    if (cfg->test_limit > 0 && cfg->test_limit < t->test.n) dt_dataset_truncate(&t->test, cfg->test_limit);
    if ((st = dt_schedule_parse(cfg->schedule ? cfg->schedule : "const", cfg->lr, &t->sched)) != DT_OK) return st;
    if ((st = dt_sgd_init(&t->opt, dt_model_num_params(t->model), cfg->momentum, cfg->weight_decay, cfg->nesterov)) != DT_OK) return st;
    if ((st = dt_strategy_create(cfg->algo ? cfg->algo : "local", &cfg->algo_opt, &t->strategy)) != DT_OK) return st;
    if (!strcmp(t->strategy->name, "local") && t->comm.size > 1)
        return dt_fail(DT_ERR_ARG, "--algo local trains on one process, but %d ranks were started (choose one of: %s)",
                       t->comm.size, dt_strategy_names());
    if (t->strategy->nservers >= t->comm.size)
        return dt_fail(DT_ERR_ARG, "--algo %s: %d server rank(s) need at least one more rank to train (started %d)",
                       t->strategy->name, t->strategy->nservers, t->comm.size);
    if (t->strategy->nservers > 0 && (cfg->checkpoint || cfg->resume))
        return dt_fail(DT_ERR_ARG, "%s: --algo %s cannot checkpoint: its servers run asynchronously of the workers' "
                       "epochs, so there is no point at which the whole run's state is consistent",
                       cfg->checkpoint ? "--checkpoint" : "--resume", t->strategy->name);
    t->nworkers = t->comm.size - t->strategy->nservers;
    t->worker = t->comm.rank - t->strategy->nservers;
    if (t->worker < 0) t->worker = -1;
    if ((st = make_shard(t)) != DT_OK) return st;
    t->x = malloc((size_t)cfg->batch * c * h * w * sizeof(float));
    t->y = malloc((size_t)cfg->batch);
    t->idx = malloc((size_t)cfg->batch * sizeof(int));
    t->eval_params = malloc((dt_model_num_params(t->model) + 1) * sizeof(float));
    t->eval_state = malloc((dt_model_num_state(t->model) + 1) * sizeof(float));
    if (!t->x || !t->y || !t->idx || !t->eval_params || !t->eval_state) return dt_fail(DT_ERR_NOMEM, "out of memory");
    dt_model_init(t->model, cfg->seed); /* the same seed on every rank: identical start */
    if ((st = dt_model_reserve(t->model, cfg->batch)) != DT_OK) return st;
    /* equal step counts on every training rank, so synchronous schemes never wait for a
     * rank that has finished; one process keeps its last partial batch */
    int mine = t->worker >= 0 ? t->shard_n : INT_MAX, smallest = mine;
    MPI_Allreduce(&mine, &smallest, 1, MPI_INT, MPI_MIN, t->comm.comm);
    if (!strcmp(cfg->split ? cfg->split : "random", "stripe")) smallest = t->train.n / t->nworkers;
    t->steps_per_epoch = t->comm.size == 1 ? (smallest + cfg->batch - 1) / cfg->batch : smallest / cfg->batch;
    if (t->steps_per_epoch < 1)
        return dt_fail(DT_ERR_ARG, "--batch %d is larger than the smallest shard (%d examples)", cfg->batch, smallest);
    if (cfg->resume) {
        st = load_checkpoint(t, &t->resume_file, t->resume_path, sizeof t->resume_path, &t->start_epoch);
        if (st == DT_OK && t->start_epoch >= cfg->epochs)
            st = dt_fail(DT_ERR_ARG, "--resume %s: the checkpoint already finished %d epochs (--epochs %d)",
                         cfg->resume, t->start_epoch, cfg->epochs);
    }
    return st;
}

void dt_trainer_free(dt_trainer *t) {
    dt_tfile_free(&t->resume_file);
    dt_strategy_free(t->strategy);
    dt_model_free(t->model);
    dt_sgd_free(&t->opt);
    dt_dataset_free(&t->train);
    dt_dataset_free(&t->test);
    free(t->shard); free(t->x); free(t->y); free(t->idx); free(t->log_text);
    free(t->eval_params); free(t->eval_state);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------ evaluation */

/* The model all ranks agree to evaluate and keep: the strategy's, or the mean of the
 * training ranks' models. Also the spread of the training ranks around that mean. */
static dt_status agreed_model(dt_trainer *t, double *spread) {
    dt_model *m = t->model;
    const size_t np = dt_model_num_params(m), ns = dt_model_num_state(m);
    dt_status st = DT_OK;
    if (t->strategy->model_for_eval) {
        st = t->strategy->model_for_eval(t->strategy, t, t->eval_params, t->eval_state);
    } else {
        const int trains = t->worker >= 0;
        for (size_t i = 0; i < np; i++) t->eval_params[i] = trains ? dt_model_params(m)[i] : 0.0f;
        for (size_t i = 0; i < ns; i++) t->eval_state[i] = trains ? dt_model_state(m)[i] : 0.0f;
        int err = MPI_Allreduce(MPI_IN_PLACE, t->eval_params, (int)np, MPI_FLOAT, MPI_SUM, t->comm.comm);
        if (err == MPI_SUCCESS && ns) err = MPI_Allreduce(MPI_IN_PLACE, t->eval_state, (int)ns, MPI_FLOAT, MPI_SUM, t->comm.comm);
        if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (model average)");
        const float inv = 1.0f / (float)t->nworkers;
        for (size_t i = 0; i < np; i++) t->eval_params[i] *= inv;
        for (size_t i = 0; i < ns; i++) t->eval_state[i] *= inv;
    }
    double d2 = 0;
    if (t->worker >= 0)
        for (size_t i = 0; i < np; i++) {
            double d = (double)dt_model_params(m)[i] - t->eval_params[i];
            d2 += d * d;
        }
    double mine = sqrt(d2), worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, t->comm.comm);
    *spread = worst;
    return st;
}

/* Evaluates params/state with rank 0's model (its own weights are restored after). */
static dt_status eval_on_rank0(dt_trainer *t, const float *params, const float *state, double *acc, double *loss) {
    dt_model *m = t->model;
    const size_t np = dt_model_num_params(m), ns = dt_model_num_state(m);
    float *keep = malloc((np + ns + 1) * sizeof(float));
    if (!keep) return dt_fail(DT_ERR_NOMEM, "out of memory");
    memcpy(keep, dt_model_params(m), np * sizeof(float));
    memcpy(keep + np, dt_model_state(m), ns * sizeof(float));
    memcpy(dt_model_params(m), params, np * sizeof(float));
    memcpy(dt_model_state(m), state, ns * sizeof(float));
    dt_status st = dt_evaluate(m, &t->test, t->cfg->batch, 0, acc, loss);
    memcpy(dt_model_params(m), keep, np * sizeof(float));
    memcpy(dt_model_state(m), keep + np, ns * sizeof(float));
    free(keep);
    return st;
}

static void print_epoch(dt_trainer *t, const dt_epoch_stats *e) {
    if (t->cfg->quiet || t->comm.rank != 0) return;
    char extra[160] = "";
    if (e->msgs_pct < 0) {
        /* a server's report: it knows the model, not the workers' speed or traffic so far */
        printf("epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%  lr %.4g  (server's model at %.1f s)\n", e->epoch,
               t->cfg->epochs, e->loss, 100 * e->train_acc, 100 * e->test_acc, e->lr, e->seconds);
        fflush(stdout);
        return;
    }
    if (t->comm.size > 1) {
        size_t o = (size_t)snprintf(extra, sizeof extra, "  msgs %5.1f%%  %8.2f MB sent", e->msgs_pct, e->mb_sent);
        if (t->strategy->decentralized) snprintf(extra + o, sizeof extra - o, "  spread %.3g", e->spread);
    }
    printf("epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%  lr %.4g  %8.0f img/s  %6.1f s%s\n", e->epoch,
           t->cfg->epochs, e->loss, 100 * e->train_acc, 100 * e->test_acc, e->lr, e->images_per_s, e->seconds, extra);
    fflush(stdout);
}

static dt_status log_epoch(dt_trainer *t, const dt_epoch_stats *e) {
    char line[512];
    if (e->msgs_pct < 0) {
        snprintf(line, sizeof line,
                 "{\"type\":\"epoch\",\"epoch\":%d,\"loss\":%.6f,\"train_acc\":%.6f,\"test_acc\":%.6f,\"test_loss\":%.6f,"
                 "\"lr\":%.6g,\"seconds\":%.3f,\"images_per_s\":null,\"msgs_pct\":null,\"msgs_sent\":null,\"mb_sent\":null,"
                 "\"spread\":null}",
                 e->epoch, e->loss, e->train_acc, e->test_acc, e->test_loss, e->lr, e->seconds);
        return log_append(t, line);
    }
    snprintf(line, sizeof line,
             "{\"type\":\"epoch\",\"epoch\":%d,\"loss\":%.6f,\"train_acc\":%.6f,\"test_acc\":%.6f,\"test_loss\":%.6f,"
             "\"lr\":%.6g,\"seconds\":%.3f,\"images_per_s\":%.1f,\"msgs_pct\":%.4f,\"msgs_sent\":%.0f,\"mb_sent\":%.4f,"
             "\"spread\":%.6g}",
             e->epoch, e->loss, e->train_acc, e->test_acc, e->test_loss, e->lr, e->seconds, e->images_per_s,
             e->msgs_pct, e->msgs_sent, e->mb_sent, e->spread);
    return log_append(t, line);
}

/* Totals of this rank's counters over all ranks. */
static void counter_totals(dt_trainer *t, double *msgs, double *baseline, double *bytes) {
    double mine[3] = {(double)t->comm.c.msgs_sent, (double)t->comm.c.baseline_msgs, (double)t->comm.c.bytes_sent}, all[3];
    MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, t->comm.comm);
    *msgs = all[0]; *baseline = all[1]; *bytes = all[2];
}

dt_status dt_trainer_report_epoch(dt_trainer *t, int epoch, double train_loss, double train_acc,
                                  const float *params, const float *state) {
    dt_epoch_stats *e = &t->last;
    memset(e, 0, sizeof *e);
    e->epoch = epoch;
    e->loss = train_loss;
    e->train_acc = train_acc;
    e->lr = dt_schedule_lr(&t->sched, epoch, t->cfg->epochs);
    e->seconds = dt_now() - t->t_start;
    e->msgs_pct = e->mb_sent = e->images_per_s = -1; /* unknown here: "n/a" */
    dt_status st = eval_on_rank0(t, params, state, &e->test_acc, &e->test_loss);
    if (st != DT_OK) return st;
    print_epoch(t, e);
    return log_epoch(t, e);
}

/* Collective end-of-epoch figures: mean train loss/accuracy over the training ranks,
 * test accuracy of the agreed model (on rank 0), messages and bytes so far. */
static dt_status epoch_report(dt_trainer *t, double loss_sum, long seen, long correct, double seconds, float lr) {
    dt_epoch_stats *e = &t->last;
    memset(e, 0, sizeof *e);
    e->epoch = t->epoch + 1;
    double mine[3] = {loss_sum, (double)seen, (double)correct}, all[3];
    MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, t->comm.comm);
    double slowest = seconds;
    MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, t->comm.comm);
    e->loss = all[1] ? all[0] / all[1] : 0;
    e->train_acc = all[1] ? all[2] / all[1] : 0;
    e->lr = lr;
    e->seconds = slowest;
    e->images_per_s = slowest > 0 ? all[1] / slowest : 0;
    double msgs, baseline, bytes;
    counter_totals(t, &msgs, &baseline, &bytes);
    e->msgs_pct = baseline > 0 ? 100.0 * msgs / baseline : 0;
    e->msgs_sent = msgs;
    e->mb_sent = bytes / 1e6;
    dt_status st = agreed_model(t, &e->spread);
    if (st != DT_OK) return st;
    if (t->comm.rank == 0 && (st = eval_on_rank0(t, t->eval_params, t->eval_state, &e->test_acc, &e->test_loss)) != DT_OK)
        return st;
    print_epoch(t, e);
    return log_epoch(t, e);
}

/* ------------------------------------------------------------------ summary */

typedef struct { double msgs_sent, bytes_sent, msgs_recv, bytes_recv, baseline, fresh, overwritten, torn, t_comm, t_compute, steps; } rank_row;

static dt_status summary(dt_trainer *t, double spread_before, double wall) {
    rank_row mine = {(double)t->comm.c.msgs_sent, (double)t->comm.c.bytes_sent, (double)t->comm.c.msgs_recv,
                     (double)t->comm.c.bytes_recv, (double)t->comm.c.baseline_msgs, (double)t->comm.c.fresh_recv,
                     (double)t->comm.c.overwritten, (double)t->comm.c.torn_retries, t->comm.c.t_comm,
                     t->comm.c.t_compute, (double)t->step};
    rank_row *rows = t->comm.rank == 0 ? calloc((size_t)t->comm.size, sizeof *rows) : NULL;
    if (t->comm.rank == 0 && !rows) return dt_fail(DT_ERR_NOMEM, "out of memory");
    MPI_Gather(&mine, (int)(sizeof mine / sizeof(double)), MPI_DOUBLE, rows, (int)(sizeof mine / sizeof(double)),
               MPI_DOUBLE, 0, t->comm.comm);
    if (t->comm.rank != 0) return DT_OK;
    rank_row tot = {0};
    for (int r = 0; r < t->comm.size; r++) {
        tot.msgs_sent += rows[r].msgs_sent; tot.bytes_sent += rows[r].bytes_sent;
        tot.msgs_recv += rows[r].msgs_recv; tot.bytes_recv += rows[r].bytes_recv;
        tot.baseline += rows[r].baseline; tot.fresh += rows[r].fresh; tot.overwritten += rows[r].overwritten;
        tot.torn += rows[r].torn;
    }
    const double pct = tot.baseline > 0 ? 100 * tot.msgs_sent / tot.baseline : 0;
    if (!t->cfg->quiet && t->comm.size > 1) {
        printf("\n%-5s %12s %12s %10s %10s %8s %9s %9s\n", "rank", "msgs sent", "msgs recv", "MB sent", "MB recv",
               "msgs %", "comm s", "compute s");
        for (int r = 0; r < t->comm.size; r++)
            printf("%-5d %12.0f %12.0f %10.2f %10.2f %8.2f %9.2f %9.2f\n", r, rows[r].msgs_sent, rows[r].msgs_recv,
                   rows[r].bytes_sent / 1e6, rows[r].bytes_recv / 1e6,
                   rows[r].baseline > 0 ? 100 * rows[r].msgs_sent / rows[r].baseline : 0, rows[r].t_comm, rows[r].t_compute);
        printf("%-5s %12.0f %12.0f %10.2f %10.2f %8.2f\n", "all", tot.msgs_sent, tot.msgs_recv, tot.bytes_sent / 1e6,
               tot.bytes_recv / 1e6, pct);
        if (t->strategy->decentralized)
            printf("largest distance of a rank's parameters from their mean before the final averaging: %.4g\n", spread_before);
        printf("%s: test accuracy %.2f%% with %.1f%% of the messages (%.2f MB) in %.1f s\n", t->strategy->name,
               100 * t->last.test_acc, pct, tot.bytes_sent / 1e6, wall);
    }
    char model[200], data[64], algo[64];
    json_escape(model, sizeof model, t->cfg->model);
    json_escape(data, sizeof data, t->cfg->data);
    json_escape(algo, sizeof algo, t->strategy->name);
    size_t cap = 1024 + (size_t)t->comm.size * 400, o = 0;
    char *line = malloc(cap);
    if (!line) { free(rows); return dt_fail(DT_ERR_NOMEM, "out of memory"); }
    o += (size_t)snprintf(line + o, cap - o,
                          "{\"type\":\"summary\",\"model\":\"%s\",\"data\":\"%s\",\"algo\":\"%s\",\"ranks\":%d,\"epochs\":%d,"
                          "\"batch\":%d,\"lr\":%g,\"steps\":%ld,\"test_acc\":%.6f,\"params\":%zu,\"msgs_sent\":%.0f,"
                          "\"baseline_msgs\":%.0f,\"msgs_pct\":%.4f,\"mb_sent\":%.4f,\"spread_before_avg\":%.6g,\"wall_s\":%.3f,%s%s\"per_rank\":[",
                          model, data, algo, t->comm.size, t->cfg->epochs, t->cfg->batch, (double)t->cfg->lr, t->step,
                          t->last.test_acc, dt_model_num_params(t->model), tot.msgs_sent, tot.baseline, pct,
                          tot.bytes_sent / 1e6, spread_before, wall, t->summary_extra,
                          t->summary_extra[0] ? "," : "");
    for (int r = 0; r < t->comm.size; r++)
        o += (size_t)snprintf(line + o, cap - o,
                              "%s{\"rank\":%d,\"msgs_sent\":%.0f,\"bytes_sent\":%.0f,\"msgs_recv\":%.0f,\"bytes_recv\":%.0f,"
                              "\"baseline_msgs\":%.0f,\"fresh_recv\":%.0f,\"overwritten\":%.0f,\"torn_retries\":%.0f,"
                              "\"comm_s\":%.3f,\"compute_s\":%.3f,\"steps\":%.0f}",
                              r ? "," : "", r, rows[r].msgs_sent, rows[r].bytes_sent, rows[r].msgs_recv, rows[r].bytes_recv,
                              rows[r].baseline, rows[r].fresh, rows[r].overwritten, rows[r].torn, rows[r].t_comm, rows[r].t_compute,
                              rows[r].steps);
    snprintf(line + o, cap - o, "]}");
    dt_status st = log_append(t, line);
    free(line);
    free(rows);
    return st;
}

/* ------------------------------------------------------------------ the loop */

#define HOOK(t, name, ...) ((t)->strategy->name ? (t)->strategy->name((t)->strategy, (t), ##__VA_ARGS__) : DT_OK)

/* Batch s of this epoch: a slice of the rank's shuffled shard, or with --split stripe this
 * rank's slice of global batch s of the shared shuffled order. */
static const int *batch_indices(const dt_trainer *t, const int *order, int s, int *cnt) {
    const int B = t->cfg->batch;
    if (t->cfg->split && !strcmp(t->cfg->split, "stripe")) {
        *cnt = B;
        return order + ((size_t)s * t->nworkers + (size_t)t->worker) * B;
    }
    int off = s * B;
    *cnt = t->shard_n - off < B ? t->shard_n - off : B;
    return order + off;
}

/* --max-steps reached, or the strategy stopped this rank */
static int stop_training(const dt_trainer *t) {
    return (t->cfg->max_steps > 0 && t->step >= t->cfg->max_steps) || t->stop;
}

static dt_status train_epochs(dt_trainer *t, int start_epoch) {
    const dt_train_config *cfg = t->cfg;
    dt_status st = DT_OK;
    const int augment = cfg->augment < 0 ? t->train.augment : cfg->augment;
    const int stripe = cfg->split && !strcmp(cfg->split, "stripe");
    int *order = malloc((size_t)(t->shard_n ? t->shard_n : 1) * sizeof(int));
    if (!order) return dt_fail(DT_ERR_NOMEM, "out of memory");
    const int sync_eval = t->strategy->nservers == 0;
    for (t->epoch = start_epoch; t->epoch < cfg->epochs; t->epoch++) {
        dt_rng rng;
        /* stripe: one shared order (seeded without the rank) */
        uint64_t who = stripe ? 0 : (uint64_t)t->comm.rank;
        dt_rng_seed(&rng, dt_seed_mix(cfg->seed, who, (uint64_t)t->epoch, 1));
        dt_model_set_seed(t->model, dt_seed_mix(cfg->seed, (uint64_t)t->comm.rank, (uint64_t)t->epoch, 2));
        memcpy(order, t->shard, (size_t)t->shard_n * sizeof(int));
        dt_shuffle(order, t->shard_n, &rng);
        double t0 = dt_now(), loss_sum = 0, comm0 = t->comm.c.t_comm;
        long seen = 0, correct = 0;
        float lr = cfg->lr;
        for (int s = 0; s < t->steps_per_epoch; s++) {
            if (stop_training(t)) break;
            int cnt, ok = 0;
            const int *bi = batch_indices(t, order, s, &cnt);
            lr = dt_schedule_lr(&t->sched, t->epoch + (double)s / t->steps_per_epoch, cfg->epochs);
            if ((st = HOOK(t, begin_step)) != DT_OK) goto done;
            dt_batch_fill(&t->train, bi, cnt, t->x, t->y, augment, &rng);
            dt_model_forward(t->model, t->x, cnt, 1);
            float loss = dt_model_backward(t->model, t->y, &ok);
            loss_sum += (double)loss * cnt;
            t->round_loss += loss;
            t->round_batches++;
            seen += cnt;
            correct += ok;
            if ((st = HOOK(t, after_backward)) != DT_OK) goto done;
            if (t->strategy->optimizer_step) st = t->strategy->optimizer_step(t->strategy, t, lr);
            else dt_sgd_step(&t->opt, dt_model_params(t->model), dt_model_grads(t->model), lr);
            if (st != DT_OK || (st = HOOK(t, end_step)) != DT_OK) goto done;
            t->step++;
        }
        double secs = dt_now() - t0;
        t->comm.c.t_compute += secs - (t->comm.c.t_comm - comm0);
        if ((st = HOOK(t, end_epoch)) != DT_OK) goto done;
        const int last = t->epoch + 1 == cfg->epochs || stop_training(t);
        const int due = cfg->eval_every > 0 && (t->epoch + 1) % cfg->eval_every == 0;
        if (sync_eval && (due || last)) {
            if ((st = epoch_report(t, loss_sum, seen, correct, secs, lr)) != DT_OK) goto done;
        }
        if (cfg->checkpoint && (st = save_checkpoint(t)) != DT_OK) goto done;
        if (last) break;
    }
done:
    free(order);
    return st;
}

dt_status dt_trainer_start(dt_trainer *t) {
    dt_status st = HOOK(t, start);
    if (st == DT_OK && t->cfg->resume) st = load_run_state(t, &t->resume_file, t->resume_path);
    dt_tfile_free(&t->resume_file);
    /* a rank that could not restore its state stops them all (the caller reports it once);
     * what start set up with every rank is freed with every rank */
    int bad = st != DT_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, t->comm.comm);
    if (any && t->strategy->abandon) t->strategy->abandon(t->strategy, t);
    return st;
}

dt_status dt_trainer_run(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    dt_status st;
    if (!cfg->quiet && t->comm.rank == 0) {
        printf("training %s on %s: %d examples, %d epochs, batch %d%s, lr %g, %s", cfg->model, cfg->data,
               t->train.n, cfg->epochs, cfg->batch, t->comm.size > 1 ? " per rank" : "", (double)cfg->lr, t->strategy->name);
        if (t->comm.size > 1)
            printf(", %d ranks (%d training), split %s, %d steps per epoch", t->comm.size, t->nworkers,
                   cfg->split ? cfg->split : "random", t->steps_per_epoch);
        printf(", BLAS %s\n", dt_blas_core());
        fflush(stdout);
    }
    t->t_start = dt_now();
    if (t->worker < 0) st = HOOK(t, serve);
    else st = train_epochs(t, t->start_epoch);
    if (st != DT_OK) return st;
    /* how far apart the ranks' models ended, before any final averaging */
    double spread = 0, spread_after = 0;
    if (t->strategy->decentralized && (st = agreed_model(t, &spread)) != DT_OK) return st;
    if ((st = HOOK(t, finish)) != DT_OK) return st;
    /* every rank keeps the agreed (averaged) model: that is what is saved */
    if ((st = agreed_model(t, &spread_after)) != DT_OK) return st;
    memcpy(dt_model_params(t->model), t->eval_params, dt_model_num_params(t->model) * sizeof(float));
    memcpy(dt_model_state(t->model), t->eval_state, dt_model_num_state(t->model) * sizeof(float));
    if (t->strategy->nservers > 0 && t->comm.rank == 0 && t->last.epoch != cfg->epochs) {
        /* asynchronous schemes report their final model here, unless the last epoch was */
        st = dt_evaluate(t->model, &t->test, cfg->batch, 0, &t->last.test_acc, &t->last.test_loss);
        if (st != DT_OK) return st;
        if (!cfg->quiet) printf("final model: test accuracy %.2f%%\n", 100 * t->last.test_acc);
    }
    double wall = dt_now() - t->t_start;
    if ((st = summary(t, spread, wall)) != DT_OK) return st;
    if (cfg->weights_out && t->comm.rank == 0 && (st = dt_model_save(t->model, cfg->weights_out)) != DT_OK) return st;
    return DT_OK;
}
