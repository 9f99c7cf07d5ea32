/* The EventGraD sender rule (see trigger.h). */
#include "schemes/trigger.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/flag_table.h"

const char *dt_threshold_parse(const char *text, void *threshold) {
    dt_threshold th = {0};
    char tail;
    if (!strcmp(text, "adaptive")) th.adaptive = 1;
    else if (sscanf(text, "const:%f%c", &th.c, &tail) != 1 || !(th.c >= 0) || isinf(th.c))
        return "adaptive or const:C with C >= 0";
    memcpy(threshold, &th, sizeof th);
    return NULL;
}

void dt_threshold_format(const void *threshold, char *out, size_t len) {
    dt_threshold th;
    memcpy(&th, threshold, sizeof th);
    if (th.adaptive) { snprintf(out, len, "adaptive"); return; }
    char c[40];
    dt_flag_shortest(th.c, 1, c, sizeof c);
    snprintf(out, len, "const:%s", c);
}

dt_status dt_trigger_init(dt_trigger *t, int T, const dt_trigger_opts *o) {
    memset(t, 0, sizeof *t);
    t->adaptive = o->threshold.adaptive;
    t->c_const = o->threshold.c;
    t->T = T;
    t->horizon = o->horizon;
    t->history = o->history > 0 ? o->history : 1;
    t->decay = o->decay > 0 ? o->decay : 1.0f;
    t->warmup = o->warmup;
    const size_t n = (size_t)(T ? T : 1);
    const char *what = "the trigger's history of %zu tensors";
    dt_status st;
    if ((st = dt_calloc(t->n_last, n, what, n)) != DT_OK || (st = dt_calloc(t->delta, n, what, n)) != DT_OK ||
        (st = dt_calloc(t->slopes, n * (size_t)t->history, what, n)) != DT_OK ||
        (st = dt_calloc(t->k_last, n, what, n)) != DT_OK || (st = dt_calloc(t->nslopes, n, what, n)) != DT_OK) {
        dt_trigger_free(t);
        return st;
    }
    for (int i = 0; i < T; i++) {
        t->k_last[i] = -1;
        t->delta[i] = t->adaptive ? 0.0 : t->c_const;
    }
    return DT_OK;
}

void dt_trigger_free(dt_trigger *t) {
    dt_free_all(t->n_last, t->delta, t->slopes, t->k_last, t->nslopes);
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

/* the records' names after a stem: the plain rule's, and gradient tracking's second rule */
static const char *const plain_names[5] = {"norm_last", "threshold", "slopes", "step_last", "nslopes"};
static const char *const tracker_names[5] = {"tracker_norm_last", "tracker_threshold", "tracker_slopes",
                                             "tracker_step_last", "tracker_nslopes"};

static int fields(const dt_trigger *t, field *f) {
    const size_t T = (size_t)t->T, h = (size_t)t->history;
    const char *const *names = t->tracker ? tracker_names : plain_names;
    f[0] = (field){names[0], t->n_last, T * sizeof *t->n_last};
    f[1] = (field){names[1], t->delta, T * sizeof *t->delta};
    f[2] = (field){names[2], t->slopes, T * h * sizeof *t->slopes};
    f[3] = (field){names[3], t->k_last, T * sizeof *t->k_last};
    f[4] = (field){names[4], t->nslopes, T * sizeof *t->nslopes};
    return 5;
}

/* save (out) or load (in) every field as a record of its name */
static dt_status transfer(dt_trigger *t, dt_records *out, const dt_tfile *in, const char *path) {
    field f[5];
    const int n = fields(t, f);
    dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) {
        st = out ? dt_records_add_raw(out, f[i].name, f[i].p, f[i].bytes) : dt_tfile_take(in, path, f[i].name, f[i].p, f[i].bytes);
    }
    return st;
}

dt_status dt_trigger_save(dt_trigger *t, dt_records *out) { return transfer(t, out, NULL, NULL); }

dt_status dt_trigger_load(dt_trigger *t, const dt_tfile *f, const char *path) {
    dt_status st = transfer(t, NULL, f, path);
    /* the counts index the rings of slopes: a negative one from a corrupt or forged file (the
     * checksum may well be valid) wrote before the ring */
    for (int i = 0; st == DT_OK && i < t->T; i++)
        if (t->nslopes[i] < 0 || t->nslopes[i] > INT_MAX / 2)
            st = dt_fail(DT_ERR_FORMAT, "%s: %s%snslopes holds %d for tensor %d, expected a count >= 0 (a corrupt or "
                         "forged checkpoint)", path, f->prefix ? f->prefix : "", f->prefix ? ":" : "", t->nslopes[i], i);
    return st;
}
