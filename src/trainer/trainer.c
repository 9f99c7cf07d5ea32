/* The training loop. Each epoch reshuffles this rank's shard with a seed derived from
 * (run seed, rank, epoch), and reseeds dropout the same way, so an epoch depends only on
 * the weights it starts from: a run resumed from a checkpoint repeats the same steps. */
#include "trainer/trainer.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/tensorfile.h"
#include "models/model.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

static dt_status log_append(dt_trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static dt_status log_fill(void *ctx, void *file) {
    dt_trainer *t = ctx;
    return fwrite(t->log_text, 1, t->log_len, file) == t->log_len
               ? DT_OK : dt_fail(DT_ERR_IO, "%s: write failed", t->cfg->log_path);
}
static dt_status log_append(dt_trainer *t, const char *fmt, ...) {
    if (!t->cfg->log_path) return DT_OK;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof line - 1) return dt_fail(DT_ERR_STATE, "log line too long");
    if (t->log_len + (size_t)n + 2 > t->log_cap) {
        size_t cap = (t->log_cap + (size_t)n + 2) * 2;
        char *nb = realloc(t->log_text, cap);
        if (!nb) return dt_fail(DT_ERR_NOMEM, "out of memory");
        t->log_text = nb; t->log_cap = cap;
    }
    memcpy(t->log_text + t->log_len, line, (size_t)n);
    t->log_len += (size_t)n;
    t->log_text[t->log_len++] = '\n';
    return dt_write_atomic(t->cfg->log_path, log_fill, t);
}

static dt_status save_checkpoint(dt_trainer *t) {
    dt_model *m = t->model;
    dt_record *r = calloc((size_t)(dt_model_num_tensors(m) + dt_model_num_state_tensors(m) + 2), sizeof *r);
    if (!r) return dt_fail(DT_ERR_NOMEM, "out of memory");
    int n = dt_model_records(m, r);
    float progress[2] = {(float)(t->epoch + 1), (float)t->step};
    if (t->opt.buf)
        r[n++] = (dt_record){.name = "optim:momentum", .ndim = 1, .shape = {(int)t->opt.n},
                             .numel = t->opt.n, .data = t->opt.buf};
    r[n++] = (dt_record){.name = "train:progress", .ndim = 1, .shape = {2}, .numel = 2, .data = progress};
    dt_status st = dt_tfile_write(t->cfg->checkpoint, r, n);
    free(r);
    return st;
}

static dt_status load_checkpoint(dt_trainer *t, int *start_epoch) {
    const char *path = t->cfg->resume;
    dt_status st = dt_model_load(t->model, path);
    if (st != DT_OK) return st;
    dt_tfile f;
    if ((st = dt_tfile_read(path, &f)) != DT_OK) return st;
    const dt_record *prog = dt_tfile_find(&f, "train:progress");
    const dt_record *mom = dt_tfile_find(&f, "optim:momentum");
    if (!prog || prog->numel != 2) st = dt_fail(DT_ERR_FORMAT, "%s: not a checkpoint (no train:progress; a weights file?)", path);
    else if (t->opt.buf && (!mom || mom->numel != t->opt.n))
        st = dt_fail(DT_ERR_FORMAT, "%s: has no momentum buffer for this model (saved with --momentum 0?)", path);
    else {
        *start_epoch = (int)prog->data[0];
        t->step = (long)prog->data[1];
        if (t->opt.buf) { memcpy(t->opt.buf, mom->data, t->opt.n * sizeof(float)); t->opt.started = 1; }
    }
    dt_tfile_free(&f);
    return st;
}

dt_status dt_trainer_init(dt_trainer *t, const dt_train_config *cfg) {
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->size = 1;
    dt_status st;
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
    if ((st = dt_strategy_create(cfg->algo ? cfg->algo : "local", &t->strategy)) != DT_OK) return st;
    t->shard_n = t->train.n;
    t->shard = malloc((size_t)t->shard_n * sizeof(int));
    t->x = malloc((size_t)cfg->batch * c * h * w * sizeof(float));
    t->y = malloc((size_t)cfg->batch);
    t->idx = malloc((size_t)cfg->batch * sizeof(int));
    if (!t->shard || !t->x || !t->y || !t->idx) return dt_fail(DT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->shard_n; i++) t->shard[i] = i;
    dt_model_init(t->model, cfg->seed);
    return dt_model_reserve(t->model, cfg->batch);
}

void dt_trainer_free(dt_trainer *t) {
    dt_strategy_free(t->strategy);
    dt_model_free(t->model);
    dt_sgd_free(&t->opt);
    dt_dataset_free(&t->train);
    dt_dataset_free(&t->test);
    free(t->shard); free(t->x); free(t->y); free(t->idx); free(t->log_text);
    memset(t, 0, sizeof *t);
}

#define HOOK(t, name, ...) ((t)->strategy->name ? (t)->strategy->name((t)->strategy, (t), ##__VA_ARGS__) : DT_OK)

dt_status dt_trainer_run(dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    dt_status st;
    int start_epoch = 0;
    if (cfg->resume && (st = load_checkpoint(t, &start_epoch)) != DT_OK) return st;
    if (start_epoch >= cfg->epochs)
        return dt_fail(DT_ERR_ARG, "--resume %s: the checkpoint already finished %d epochs (--epochs %d)",
                       cfg->resume, start_epoch, cfg->epochs);
    const int B = cfg->batch;
    t->steps_per_epoch = (t->shard_n + B - 1) / B;
    int *order = malloc((size_t)t->shard_n * sizeof(int));
    if (!order) return dt_fail(DT_ERR_NOMEM, "out of memory");
    const int augment = cfg->augment < 0 ? t->train.augment : cfg->augment;
    if ((st = HOOK(t, start)) != DT_OK) goto done;
    if (!cfg->quiet && t->rank == 0)
        printf("training %s on %s: %d examples, %d epochs, batch %d, lr %g, %s, BLAS %s\n", cfg->model,
               cfg->data, t->train.n, cfg->epochs, B, (double)cfg->lr, t->strategy->name, dt_blas_core());
    for (t->epoch = start_epoch; t->epoch < cfg->epochs; t->epoch++) {
        dt_rng rng;
        dt_rng_seed(&rng, dt_seed_mix(cfg->seed, (uint64_t)t->rank, (uint64_t)t->epoch, 1));
        dt_model_set_seed(t->model, dt_seed_mix(cfg->seed, (uint64_t)t->rank, (uint64_t)t->epoch, 2));
        memcpy(order, t->shard, (size_t)t->shard_n * sizeof(int));
        dt_shuffle(order, t->shard_n, &rng);
        double t0 = now(), loss_sum = 0;
        long seen = 0, correct = 0;
        float lr = cfg->lr;
        for (int s = 0; s < t->steps_per_epoch; s++) {
            int off = s * B, cnt = t->shard_n - off < B ? t->shard_n - off : B, ok = 0;
            dt_batch_fill(&t->train, order + off, cnt, t->x, t->y, augment, &rng);
            dt_model_forward(t->model, t->x, cnt, 1);
            float loss = dt_model_backward(t->model, t->y, &ok);
            loss_sum += (double)loss * cnt;
            seen += cnt;
            correct += ok;
            lr = dt_schedule_lr(&t->sched, t->epoch + (double)s / t->steps_per_epoch, cfg->epochs);
            if ((st = HOOK(t, after_backward)) != DT_OK) goto done;
            if (t->strategy->optimizer_step) st = t->strategy->optimizer_step(t->strategy, t, lr);
            else dt_sgd_step(&t->opt, dt_model_params(t->model), dt_model_grads(t->model), lr);
            if (st != DT_OK || (st = HOOK(t, end_step)) != DT_OK) goto done;
            t->step++;
        }
        double train_s = now() - t0;
        if ((st = HOOK(t, end_epoch)) != DT_OK) goto done;
        dt_epoch_stats *e = &t->last;
        e->epoch = t->epoch + 1;
        e->loss = seen ? loss_sum / seen : 0;
        e->train_acc = seen ? (double)correct / seen : 0;
        e->lr = lr;
        e->seconds = train_s;
        e->images_per_s = train_s > 0 ? seen / train_s : 0;
        if ((st = dt_evaluate(t->model, &t->test, B, 0, &e->test_acc, &e->test_loss)) != DT_OK) goto done;
        if (!cfg->quiet && t->rank == 0) {
            printf("epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%  lr %.4g  %8.0f img/s  %6.1f s\n",
                   e->epoch, cfg->epochs, e->loss, 100 * e->train_acc, 100 * e->test_acc, e->lr,
                   e->images_per_s, train_s);
            fflush(stdout);
        }
        st = log_append(t, "{\"type\":\"epoch\",\"epoch\":%d,\"loss\":%.6f,\"train_acc\":%.6f,\"test_acc\":%.6f,"
                        "\"test_loss\":%.6f,\"lr\":%.6g,\"seconds\":%.3f,\"images_per_s\":%.1f}",
                        e->epoch, e->loss, e->train_acc, e->test_acc, e->test_loss, e->lr, e->seconds, e->images_per_s);
        if (st != DT_OK) goto done;
        if (cfg->checkpoint && (st = save_checkpoint(t)) != DT_OK) goto done;
    }
    if ((st = HOOK(t, finish)) != DT_OK) goto done;
    if (cfg->weights_out && (st = dt_model_save(t->model, cfg->weights_out)) != DT_OK) goto done;
    st = log_append(t, "{\"type\":\"summary\",\"model\":\"%s\",\"data\":\"%s\",\"algo\":\"%s\",\"epochs\":%d,"
                    "\"batch\":%d,\"lr\":%g,\"test_acc\":%.6f,\"params\":%zu}",
                    cfg->model, cfg->data, t->strategy->name, cfg->epochs, B, (double)cfg->lr,
                    t->last.test_acc, dt_model_num_params(t->model));
done:
    free(order);
    return st;
}
