/* The EventGraD sender rule, per tensor (docs/algorithms.md "eventgrad"): no MPI, so the
 * tests drive it directly.
 *
 * Tensor i is sent at step k when it was never sent, during the warm-up (k < warmup), or when
 * its norm moved by at least its threshold since it was last sent: |n - n_last| >= delta.
 * Thresholds: const:C (delta = C after every send), or adaptive: at each send the slope
 * |n - n_last| / (k - k_last) joins the last `history` slopes and delta = horizon x their
 * mean. At every step without a send delta *= decay (1: no decay), so a quiet tensor is
 * sent eventually. */
#ifndef DT_TRIGGER_H
#define DT_TRIGGER_H

#include "core/tensorfile.h"
#include "dtrain.h"

/* --threshold: adaptive, or const:C (C >= 0). */
typedef struct dt_threshold {
    int adaptive;
    float c;
} dt_threshold;

/* --threshold's text into a dt_threshold (a dt_flag's CUSTOM parse: NULL, or what it expects)
 * and back. */
const char *dt_threshold_parse(const char *text, void *threshold);
void dt_threshold_format(const void *threshold, char *out, size_t len);

/* The rule's settings: eventgrad's flags (--threshold, --horizon, --history, --threshold-decay,
 * --warmup-steps) go straight into one of these. */
typedef struct dt_trigger_opts {
    dt_threshold threshold;
    float horizon, decay;  /* decay: 1, none */
    int history;
    long warmup;
} dt_trigger_opts;

typedef struct dt_trigger {
    int T, adaptive, history;
    float c_const, horizon, decay;
    long warmup;
    double *n_last, *delta, *slopes; /* slopes: T x history, a ring per tensor */
    long *k_last;                    /* -1: never sent */
    int *nslopes;
    int tracker;                     /* 1: gradient tracking's rule (tracking.h): its records are "tracker_..." */
} dt_trigger;

/* The rule for T tensors, none sent yet. */
dt_status dt_trigger_init(dt_trigger *t, int T, const dt_trigger_opts *o);
void dt_trigger_free(dt_trigger *t);
/* Tensor i has norm n at step k: 1 if it is to be sent (the threshold state is updated as
 * for a send), 0 if not (its threshold decays). */
int dt_trigger_decide(dt_trigger *t, int i, long k, double n);
/* Checkpoints: the state per tensor as records "norm_last", ... ("tracker_norm_last", ... for
 * t->tracker: a second rule in the same checkpoint); the trainer prefixes the scheme's name */
dt_status dt_trigger_save(dt_trigger *t, dt_records *out);
dt_status dt_trigger_load(dt_trigger *t, const dt_tfile *f, const char *path);

#endif
