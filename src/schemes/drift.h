/* Remedies for drift on data split by class, for the gossip schemes (dpsgd, eventgrad, choco;
 * docs/algorithms.md, "Drift"): gradient tracking (--tracking, tracking.h: dpsgd and eventgrad),
 * quasi-global momentum (--momentum-kind qgm, qgm.h) and an outer
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
#include "schemes/tracking.h"

typedef struct {
    int momentum_kind; /* dt_momentum_kinds */
    long outer_every;  /* H; 0: never */
    dt_outer_opts outer;
    int tracking;
} dt_drift_opts;

/* The flags in a gossip scheme's table, over the dt_drift_opts member m of its options T. */
#define DT_DRIFT_FLAGS(T, m)                                                                                      \
    {"momentum-kind", DT_AT_CHOICE(T, m.momentum_kind, dt_momentum_kinds), .def = "auto",                        \
     .help = "local: SGD's momentum of the rank's own gradients | qgm: quasi-global momentum, of the model's "    \
             "change over a step, mixing included (Lin et al. 2021) | auto: qgm for dpsgd with --optim sgd, local " \
             "for eventgrad and choco"},                                                                          \
    {"outer-every", DT_AT_INT(T, m.outer_every), .def = "0", .min = 0, .max = 1e9,                               \
     .help = "every N steps an exact average of the models, and the outer optimizer's step on it (SlowMo; 0: "    \
             "never)",                                                                                            \
     .reach = DT_REACH_EVERY_STEPS, .unreached = "the models are never averaged exactly"},                       \
    DT_OUTER_FLAGS(T, m.outer),                                                                                   \
    {"tracking", DT_AT_SWITCH(T, m.tracking), .def = "0",                                                         \
     .help = "gradient tracking: step with an estimate of the ranks' mean gradient, gossiped beside the "          \
             "parameters (DSGT; twice the bytes; dpsgd and eventgrad)"}

typedef struct dt_drift dt_drift;

/* The scheme's gossip: tracking's y goes over the same graph with the same codec, and the same
 * sender rule (its own thresholds) where the scheme has one. */
typedef struct {
    dt_gossip *g;
    const char *topology;
    const dt_codec_spec *codec;
    const dt_trigger_opts *trig; /* eventgrad's rule; NULL: every tensor every step */
    int qgm_by_default;          /* --momentum-kind auto is qgm (dpsgd: measured, docs/results.md) */
} dt_drift_gossip;

/* In start, after the gossip: NULL out when no remedy is on. Collective. */
dt_status dt_drift_create(const dt_drift_opts *o, dt_step_ctx *c, const dt_drift_gossip *gossip, dt_drift **out);
void dt_drift_free(dt_drift *d);
/* At the start of after_backward, before mixing. */
void dt_drift_begin_step(dt_drift *d, dt_step_ctx *c);
/* In after_backward, after the scheme's own exchange of x: tracking's exchange and step (the
 * gradient becomes the tracker); nothing without --tracking. */
dt_status dt_drift_track(dt_drift *d, dt_step_ctx *c, int sync);
/* Collective, in finish after the scheme's drain: tracking's drain. */
dt_status dt_drift_finish(dt_drift *d, dt_step_ctx *c);
void dt_drift_abandon(dt_drift *d);
/* At the end of end_step, after the scheme's own changes to x: QGM's buffer from the step's
 * change (the outer step's jump not in it), then on every H-th step the average and the outer step. */
dt_status dt_drift_end_step(dt_drift *d, dt_step_ctx *c);
/* Checkpoints: tracking.h's; "qgm_momentum"; "outer_every", "outer", "outer_master", "outer_momentum". A set
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
dt_status dt_drift_hook_finish(dt_scheme *s, dt_step_ctx *c);
void dt_drift_hook_abandon(dt_scheme *s, dt_step_ctx *c);
/* Those hooks past a scheme's own steps, with gossip's end_epoch: one spelling for the schemes
 * whose state starts with dt_gossip_head and that keep no more (dpsgd, choco). Without a
 * tracker the drift hooks are gossip's alone. */
#define DT_DRIFT_HOOKS                                                                                      \
    .end_epoch = dt_gossip_hook_end_epoch, .finish = dt_drift_hook_finish, .save_state = dt_drift_hook_save, \
    .load_state = dt_drift_hook_load, .abandon = dt_drift_hook_abandon
/* Frees the head's gossip and remedies, for the scheme's destroy (which frees the rest). */
void dt_drift_head_free(dt_scheme *s);

#endif
