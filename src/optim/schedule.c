/* Learning-rate schedules: const, step:EVERY:GAMMA and cosine[:MIN_LR], counted in epochs. */
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

