/* The strategy interface: the training loop calls these hooks at fixed points, and each
 * training scheme (local, allreduce, ps, fedavg, dpsgd, eventgrad, downpour) is one file
 * that fills in the hooks it needs. A NULL hook does nothing (optimizer_step: the trainer's
 * own local SGD step). */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include "dtrain.h"

typedef struct dt_trainer dt_trainer;
typedef struct dt_strategy dt_strategy;

struct dt_strategy {
    const char *name;
    void *impl;
    dt_status (*start)(dt_strategy *s, dt_trainer *t);
    /* after backward, before the optimiser: gradients may be exchanged or replaced */
    dt_status (*after_backward)(dt_strategy *s, dt_trainer *t);
    /* replaces the local optimiser step (e.g. a parameter server applies it) */
    dt_status (*optimizer_step)(dt_strategy *s, dt_trainer *t, float lr);
    /* after the parameters were updated: averaging, mixing with neighbours */
    dt_status (*end_step)(dt_strategy *s, dt_trainer *t);
    dt_status (*end_epoch)(dt_strategy *s, dt_trainer *t);
    /* after the last step: e.g. average the models of all ranks */
    dt_status (*finish)(dt_strategy *s, dt_trainer *t);
    void (*destroy)(dt_strategy *s);
};

/* Creates the named strategy; "local" is always available. */
dt_status dt_strategy_create(const char *name, dt_strategy **out);
void dt_strategy_free(dt_strategy *s);

#endif
