/* Learning-rate schedules: const, step:EVERY:GAMMA (epochs) and cosine[:MIN_LR], counted in
 * epochs, or in steps with a linear warm-up as nanoGPT's get_lr (dt_schedule_steps). */
#include "dtrain.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

dt_status dt_schedule_steps(dt_schedule *s, long warmup, long last) {
    if (warmup < 0 || last < 0) return dt_fail(DT_ERR_ARG, "--lr-warmup %ld: expected >= 0 steps", warmup);
    /* nanoGPT's cosine divides by last - warmup: a warm-up ends before the run's last step */
    if (warmup > 0 && warmup >= last)
        return dt_fail(DT_ERR_ARG, "--lr-warmup %ld: the run has %ld steps; the warm-up must end before the last one", warmup,
                       last + 1);
    s->by_step = 1;
    s->warmup = warmup;
    s->last = last;
    return DT_OK;
}

/* nanoGPT's get_lr (train.py), in double as Python computes it, rounded once at the end */
float dt_schedule_lr_at(const dt_schedule *s, long step, double epoch_pos, int epochs) {
    if (!s->by_step) return dt_schedule_lr(s, epoch_pos, epochs);
    const double base = s->base_lr;
    if (step < s->warmup) return (float)(base * (double)(step + 1) / (double)(s->warmup + 1));
    switch (s->kind) {
    case DT_SCHED_STEP: /* EVERY counts epochs */
        return s->base_lr * powf(s->gamma, (float)((int)epoch_pos / s->step_every));
    case DT_SCHED_COSINE: {
        const double min = s->min_lr;
        if (step > s->last) return s->min_lr;
        const double ratio = s->last > s->warmup ? (double)(step - s->warmup) / (double)(s->last - s->warmup) : 0.0;
        const double coeff = 0.5 * (1.0 + cos(3.14159265358979323846 * ratio));
        return (float)(min + coeff * (base - min));
    }
    case DT_SCHED_CONST:
    default:
        return s->base_lr;
    }
}
