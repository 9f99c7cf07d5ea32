/* Remedies for drift on data split by class, for the gossip schemes (dpsgd, eventgrad, choco;
 * docs/algorithms.md, "Drift"): quasi-global momentum (--momentum-kind qgm, qgm.h) and an outer
 * step over gossip (--outer-every H with outer.h's --outer-lr/--outer-momentum/--outer-nesterov:
 * SlowMo, Wang, Tantia, Ballas and Rabbat, ICLR 2020, over D-PSGD): every H steps one counted
 * allreduce averages the ranks' parameters and batch-norm state exactly, and the outer optimizer
 * steps on the round's pseudo-gradient (outer lr 1 without momentum: the average itself). After
 * it every rank holds the same model, and so does every copy of it (dt_gossip_agree). Defaults
 * (local, 0): the plain scheme bit for bit. */
#ifndef DT_SCHEMES_DRIFT_H
#define DT_SCHEMES_DRIFT_H

#include "schemes/gossip.h"
#include "schemes/outer.h"
#include "schemes/qgm.h"

typedef struct {
    int momentum_kind; /* dt_momentum_kinds */
    long outer_every;  /* H; 0: never */
    dt_outer_opts outer;
} dt_drift_opts;

/* The flags in a gossip scheme's table, over the dt_drift_opts member m of its options T. */
#define DT_DRIFT_FLAGS(T, m)                                                                                      \
    {"momentum-kind", DT_AT_CHOICE(T, m.momentum_kind, dt_momentum_kinds), .def = "local",                       \
     .help = "local: SGD's momentum of the rank's own gradients | qgm: quasi-global momentum, of the model's "    \
             "change over a step, mixing included (Lin et al. 2021)"},                                           \
    {"outer-every", DT_AT_INT(T, m.outer_every), .def = "0", .min = 0, .max = 1e9,                               \
     .help = "every N steps an exact average of the models, and the outer optimizer's step on it (SlowMo; 0: "    \
             "never)",                                                                                            \
     .reach = DT_REACH_EVERY_STEPS, .unreached = "the models are never averaged exactly"},                       \
    DT_OUTER_FLAGS(T, m.outer)

typedef struct dt_drift dt_drift;

/* In start, after the gossip: NULL out when neither remedy is on. */
dt_status dt_drift_create(const dt_drift_opts *o, dt_step_ctx *c, dt_gossip *g, dt_drift **out);
void dt_drift_free(dt_drift *d);
/* At the start of after_backward, before mixing. */
void dt_drift_begin_step(dt_drift *d, dt_step_ctx *c);
/* At the end of end_step, after the scheme's own changes to x: QGM's buffer from the step's
 * change (the outer step's jump not in it), then on every H-th step the average and the outer step. */
dt_status dt_drift_end_step(dt_drift *d, dt_step_ctx *c);
/* Checkpoints: "qgm_momentum"; "outer_every", "outer", "outer_master", "outer_momentum". A set
 * saved with other remedies is refused in one line naming the flag. */
dt_status dt_drift_save(dt_drift *d, dt_records *out);
dt_status dt_drift_load(dt_drift *d, const dt_tfile *f, const char *path);

/* The checkpoint hooks of a scheme whose saved state is gossip's (shaped by --topology) and the
 * remedies': its state (s->impl) starts with these two members (dpsgd, choco). */
typedef struct {
    dt_gossip *g;
    dt_drift *drift;
} dt_gossip_head;
dt_status dt_drift_hook_save(dt_scheme *s, dt_step_ctx *c, dt_records *out);
dt_status dt_drift_hook_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path);

#endif
