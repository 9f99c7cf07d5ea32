/* The strategy interface: the training loop calls these hooks at fixed points, and each
 * training scheme (local, allreduce, ps, fedavg, dpsgd, eventgrad, downpour) is one file
 * that fills in the hooks it needs. A NULL hook does nothing, except optimizer_step (the
 * trainer's own SGD step) and model_for_eval (the mean of the training ranks' models). */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include "dtrain.h"

typedef struct dt_trainer dt_trainer;
typedef struct dt_strategy dt_strategy;
struct dt_records;
struct dt_tfile;

/* Every scheme's options, as given on the command line (see dtrain train --help). */
typedef struct dt_algo_options {
    const char *ps_mode;       /* ps: grad | weight */
    int local_steps;           /* fedavg: steps between averagings (0: use local_epochs) */
    int local_epochs;          /* fedavg */
    const char *aggregate;     /* fedavg: average | samples | loss */
    const char *topology;      /* dpsgd, eventgrad: ring | torus | exponential | complete */
    const char *threshold;     /* eventgrad: adaptive | const:C */
    float horizon;             /* eventgrad adaptive threshold: horizon x mean slope */
    int history;               /* eventgrad adaptive threshold: slopes averaged */
    float threshold_decay;     /* eventgrad: delta *= decay at every step without a send */
    int warmup_steps;          /* eventgrad: always send during the first steps */
    int sync;                  /* eventgrad: lock-step (deterministic) */
    int fetch_every, push_every, servers; /* downpour */
    float worker_timeout;      /* downpour: seconds */
    float stall_seconds;       /* downpour tests: the last worker sleeps this long once */
    const char *compress;      /* allreduce, ps, fedavg, downpour, dpsgd, eventgrad --sync: none | fp16 | bf16 | int8 | topk:F (NULL: none) */
} dt_algo_options;

struct dt_strategy {
    const char *name;
    void *impl;
    const dt_algo_options *opt;
    int nservers;              /* ranks [0, nservers) serve and do not train (downpour) */
    int decentralized;         /* models differ between ranks: report their spread */
    dt_status (*start)(dt_strategy *s, dt_trainer *t);
    /* server ranks only: serve until the workers are done */
    dt_status (*serve)(dt_strategy *s, dt_trainer *t);
    /* before the forward pass (e.g. pull parameters) */
    dt_status (*begin_step)(dt_strategy *s, dt_trainer *t);
    /* after backward, before the optimiser: gradients may be exchanged or replaced */
    dt_status (*after_backward)(dt_strategy *s, dt_trainer *t);
    /* replaces the local optimiser step (e.g. a parameter server applies it) */
    dt_status (*optimizer_step)(dt_strategy *s, dt_trainer *t, float lr);
    /* after the parameters were updated: averaging, mixing with neighbours */
    dt_status (*end_step)(dt_strategy *s, dt_trainer *t);
    dt_status (*end_epoch)(dt_strategy *s, dt_trainer *t);
    /* after the last step, on every rank (collective) */
    dt_status (*finish)(dt_strategy *s, dt_trainer *t);
    /* collective: the model to evaluate and keep, into params/state (all ranks) */
    dt_status (*model_for_eval)(dt_strategy *s, dt_trainer *t, float *params, float *state);
    /* checkpoints: add the scheme's own state (records named "<algo>:...") to what is saved
     * after every epoch, and restore it on --resume, called after start; NULL: the scheme
     * has no state beyond the model and the optimiser */
    dt_status (*save_state)(dt_strategy *s, dt_trainer *t, struct dt_records *out);
    dt_status (*load_state)(dt_strategy *s, dt_trainer *t, const struct dt_tfile *f, const char *path);
    /* collective, after a failure at start that every rank knows of: frees what start
     * created with every rank (one-sided windows), which MPI_Finalize must not find alive */
    void (*abandon)(dt_strategy *s, dt_trainer *t);
    void (*destroy)(dt_strategy *s);
};

/* Creates the named strategy with its options (kept by pointer). */
dt_status dt_strategy_create(const char *name, const dt_algo_options *opt, dt_strategy **out);
void dt_strategy_free(dt_strategy *s);
/* "local, allreduce, ..." for messages and help. */
const char *dt_strategy_names(void);

/* One constructor per scheme file. */
dt_status dt_local_create(dt_strategy *s);
dt_status dt_allreduce_create(dt_strategy *s);
dt_status dt_ps_create(dt_strategy *s);
dt_status dt_fedavg_create(dt_strategy *s);
dt_status dt_dpsgd_create(dt_strategy *s);
dt_status dt_eventgrad_create(dt_strategy *s);
dt_status dt_downpour_create(dt_strategy *s);

#endif
