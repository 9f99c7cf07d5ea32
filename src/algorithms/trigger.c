/* The EventGraD sender rule (see trigger.h). */
#include "algorithms/trigger.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dt_status dt_trigger_init(dt_trigger *t, int T, const char *threshold, float horizon, int history, float decay,
                          long warmup) {
    memset(t, 0, sizeof *t);
    char tail;
    if (!strcmp(threshold, "adaptive")) t->adaptive = 1;
    else if (sscanf(threshold, "const:%f%c", &t->c_const, &tail) != 1 || !(t->c_const >= 0))
        return dt_fail(DT_ERR_ARG, "--threshold %s: expected adaptive or const:C with C >= 0", threshold);
    t->T = T;
    t->horizon = horizon;
    t->history = history > 0 ? history : 1;
    t->decay = decay > 0 ? decay : 1.0f;
    t->warmup = warmup;
    const size_t n = (size_t)(T ? T : 1);
    t->n_last = calloc(n, sizeof *t->n_last);
    t->delta = calloc(n, sizeof *t->delta);
    t->slopes = calloc(n * (size_t)t->history, sizeof *t->slopes);
    t->k_last = calloc(n, sizeof *t->k_last);
    t->nslopes = calloc(n, sizeof *t->nslopes);
    if (!t->n_last || !t->delta || !t->slopes || !t->k_last || !t->nslopes) {
        dt_trigger_free(t);
        return dt_fail(DT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < T; i++) {
        t->k_last[i] = -1;
        t->delta[i] = t->adaptive ? 0.0 : t->c_const;
    }
    return DT_OK;
}

void dt_trigger_free(dt_trigger *t) {
    free(t->n_last); free(t->delta); free(t->slopes); free(t->k_last); free(t->nslopes);
    memset(t, 0, sizeof *t);
}

static void after_send(dt_trigger *t, int i, long k, double n) {
    if (t->adaptive && t->k_last[i] >= 0 && k > t->k_last[i]) {
        const int h = t->history;
        double *sl = t->slopes + (size_t)i * h;
        sl[t->nslopes[i] % h] = fabs(n - t->n_last[i]) / (double)(k - t->k_last[i]);
        t->nslopes[i]++;
        const int cnt = t->nslopes[i] < h ? t->nslopes[i] : h;
        double mean = 0;
        for (int j = 0; j < cnt; j++) mean += sl[j];
        t->delta[i] = t->horizon * mean / cnt;
    } else if (!t->adaptive) {
        t->delta[i] = t->c_const;
    }
    t->n_last[i] = n;
    t->k_last[i] = k;
}

int dt_trigger_decide(dt_trigger *t, int i, long k, double n) {
    const int send = t->k_last[i] < 0 || k < t->warmup || fabs(n - t->n_last[i]) >= t->delta[i];
    if (send) after_send(t, i, k, n);
    else t->delta[i] *= t->decay;
    return send;
}

typedef struct { const char *name; void *p; size_t bytes; } field;

static int fields(const dt_trigger *t, field *f) {
    const size_t T = (size_t)t->T, h = (size_t)t->history;
    f[0] = (field){"norm_last", t->n_last, T * sizeof *t->n_last};
    f[1] = (field){"threshold", t->delta, T * sizeof *t->delta};
    f[2] = (field){"slopes", t->slopes, T * h * sizeof *t->slopes};
    f[3] = (field){"step_last", t->k_last, T * sizeof *t->k_last};
    f[4] = (field){"nslopes", t->nslopes, T * sizeof *t->nslopes};
    return 5;
}

/* save (out) or load (in) every field as a record "<prefix>:<field>" */
static dt_status transfer(dt_trigger *t, const char *prefix, dt_records *out, const dt_tfile *in, const char *path) {
    field f[5];
    const int n = fields(t, f);
    dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s:%s", prefix, f[i].name);
        st = out ? dt_records_add_raw(out, name, f[i].p, f[i].bytes) : dt_tfile_take(in, path, name, f[i].p, f[i].bytes);
    }
    return st;
}

dt_status dt_trigger_save(dt_trigger *t, const char *prefix, dt_records *out) {
    return transfer(t, prefix, out, NULL, NULL);
}

dt_status dt_trigger_load(dt_trigger *t, const char *prefix, const dt_tfile *f, const char *path) {
    dt_status st = transfer(t, prefix, NULL, f, path);
    /* the counts index the rings of slopes: a negative one from a corrupt or forged file (the
     * checksum may well be valid) wrote before the ring */
    for (int i = 0; st == DT_OK && i < t->T; i++)
        if (t->nslopes[i] < 0 || t->nslopes[i] > INT_MAX / 2)
            st = dt_fail(DT_ERR_FORMAT, "%s: %s:nslopes holds %d for tensor %d, expected a count >= 0 (a corrupt or "
                         "forged checkpoint)", path, prefix, t->nslopes[i], i);
    return st;
}
