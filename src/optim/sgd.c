/* SGD with momentum, Nesterov and weight decay (PyTorch semantics), and learning-rate
 * schedules. */
#include "dtrain.h"
#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_status dt_sgd_init(dt_sgd *o, size_t n, float momentum, float weight_decay, int nesterov) {
    memset(o, 0, sizeof *o);
    if (momentum < 0 || momentum >= 1) return dt_fail(DT_ERR_ARG, "momentum %g must be in [0, 1)", (double)momentum);
    if (weight_decay < 0) return dt_fail(DT_ERR_ARG, "weight decay %g must be >= 0", (double)weight_decay);
    if (nesterov && momentum == 0) return dt_fail(DT_ERR_ARG, "Nesterov needs momentum > 0");
    o->n = n;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->nesterov = nesterov;
    if (momentum > 0) {
        if (dt_calloc(o->buf, n, "the momentum buffer") != DT_OK) return DT_ERR_NOMEM;
    }
    return DT_OK;
}

void dt_sgd_step(dt_sgd *o, float *w, const float *g, float lr) {
    const size_t n = o->n;
    const float wd = o->weight_decay, mu = o->momentum;
    if (mu == 0.0f) {
        for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
        return;
    }
    float *buf = o->buf;
    if (!o->started) {
        /* PyTorch starts the buffer at the first gradient, not at zero times momentum */
        for (size_t i = 0; i < n; i++) buf[i] = g[i] + wd * w[i];
        o->started = 1;
    } else {
        for (size_t i = 0; i < n; i++) buf[i] = mu * buf[i] + (g[i] + wd * w[i]);
    }
    if (o->nesterov)
        for (size_t i = 0; i < n; i++) w[i] -= lr * ((g[i] + wd * w[i]) + mu * buf[i]);
    else
        for (size_t i = 0; i < n; i++) w[i] -= lr * buf[i];
}

void dt_sgd_free(dt_sgd *o) {
    free(o->buf);
    memset(o, 0, sizeof *o);
}

dt_status dt_schedule_parse(const char *text, float base_lr, dt_schedule *out) {
    memset(out, 0, sizeof *out);
    out->base_lr = base_lr;
    if (!strcmp(text, "const") || !strcmp(text, "constant")) {
        out->kind = DT_SCHED_CONST;
        return DT_OK;
    }
    if (!strcmp(text, "cosine")) {
        out->kind = DT_SCHED_COSINE;
        return DT_OK;
    }
    char tail;
    if (sscanf(text, "cosine:%f%c", &out->min_lr, &tail) == 1 && out->min_lr >= 0 && out->min_lr < base_lr) {
        out->kind = DT_SCHED_COSINE;
        return DT_OK;
    }
    if (sscanf(text, "step:%d:%f%c", &out->step_every, &out->gamma, &tail) == 2 && out->step_every >= 1 &&
        out->gamma > 0 && out->gamma <= 1) {
        out->kind = DT_SCHED_STEP;
        return DT_OK;
    }
    return dt_fail(DT_ERR_ARG, "--schedule '%s': expected const, step:EVERY:GAMMA (EVERY >= 1 epochs, 0 < GAMMA <= 1) or cosine[:MIN_LR]", text);
}

float dt_schedule_lr(const dt_schedule *s, double epoch_pos, int epochs) {
    switch (s->kind) {
    case DT_SCHED_STEP:
        return s->base_lr * powf(s->gamma, (float)((int)epoch_pos / s->step_every));
    case DT_SCHED_COSINE: {
        double t = epochs > 0 ? epoch_pos / epochs : 1.0;
        if (t > 1) t = 1;
        return s->min_lr + (s->base_lr - s->min_lr) * (float)(0.5 * (1.0 + cos(3.14159265358979323846 * t)));
    }
    case DT_SCHED_CONST:
    default:
        return s->base_lr;
    }
}
