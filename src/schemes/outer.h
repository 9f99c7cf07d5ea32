/* The outer optimizer over rounds of local work (DiLoCo, Douillard et al. 2023; SlowMo, Wang et
 * al., ICLR 2020): fedavg's --outer-lr/--outer-momentum/--outer-nesterov, and the same over the
 * gossip schemes' rounds (--outer-every). Every rank keeps the master, the model every rank
 * started the round from (the same on every rank); the round's average a gives the
 * pseudo-gradient d = master - a, and the master takes an SGD step on it:
 *     v = mu v + d,   master -= lr (nesterov ? d + mu v : v),   every rank's model = master.
 * lr 1 without momentum is the plain average: dt_outer_create makes nothing then, and the
 * caller takes a itself (bit for bit the scheme without an outer optimizer). */
#ifndef DT_SCHEMES_OUTER_H
#define DT_SCHEMES_OUTER_H

#include <stddef.h>

#include "schemes/registry.h"

typedef struct {
    double lr, momentum;
    int nesterov;
} dt_outer_opts;

typedef struct dt_outer dt_outer;

/* Its flags in a scheme's table, over the dt_outer_opts member m of the options struct T (one
 * declaration: a flag two schemes declare has the same kind and default). */
#define DT_OUTER_FLAGS(T, m)                                                                                      \
    {"outer-lr", DT_AT_FLOAT(T, m.lr), .def = "1", .min = 0, .max = 1e6, .min_open = 1,                          \
     .help = "the outer optimizer's learning rate on the round's pseudo-gradient (DiLoCo: 0.7; 1 with no "         \
             "momentum: the plain average)"},                                                                     \
    {"outer-momentum", DT_AT_FLOAT(T, m.momentum), .def = "0", .min = 0, .max = 0.999999,                         \
     .help = "the outer optimizer's momentum, [0, 1) (DiLoCo: 0.9)"},                                              \
    {"outer-nesterov", DT_AT_SWITCH(T, m.nesterov), .def = "0", .help = "Nesterov momentum for the outer optimizer (DiLoCo's)"}

/* NULL out (and DT_OK) for the plain average; the master starts at x (np parameters). */
dt_status dt_outer_create(const dt_outer_opts *o, const float *x, size_t np, dt_outer **out);
void dt_outer_free(dt_outer *o);
/* x holds the round's average: it becomes the pseudo-gradient master - x. */
void dt_outer_pseudo_gradient(const dt_outer *o, float *x);
/* x holds the pseudo-gradient: the master steps on it, and x becomes the master. */
void dt_outer_step(dt_outer *o, float *x);
/* Checkpoints: the settings ("outer": lr, momentum), the master and the momentum
 * ("outer_master", "outer_momentum"). Loading refuses in one line a set of the plain average
 * resumed with an outer optimizer or the other way round (`who`: the scheme, for the line). */
dt_status dt_outer_save(dt_outer *o, const dt_outer_opts *opts, dt_records *out);
dt_status dt_outer_load(dt_outer *o, const dt_outer_opts *opts, const char *who, const dt_tfile *tf, const char *path);

#endif
