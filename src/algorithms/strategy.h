/* The strategy interface: how a training scheme plugs into the training loop.
 *
 * A scheme is one file in src/algorithms/ that defines a `const dt_scheme` (its name, its
 * flags with their defaults and help, whether it takes --compress, and its constructor) and
 * one line in schemes.def. The constructor fills in a dt_strategy: a pointer to a const table
 * of hooks (dt_strategy_ops) and the scheme's own state (impl). The trainer is the only caller
 * of the hooks; a hook sees a dt_step_ctx (the model's flat buffers and views, the
 * communicator, the optimiser, where the run stands, this step's batch figures, and the
 * trainer's services), never the trainer itself.
 *
 * One step of a training rank, as the trainer runs it:
 *
 *     begin_step                        e.g. pull parameters from a server
 *     forward, backward                 gradients of the local batch in ctx->model's grads;
 *                                       grads_ready after each layer of backward
 *     after_backward                    exchange or replace gradients; decentralized schemes
 *                                       mix the parameters with their neighbours' here, so
 *                                       that the optimiser step follows the mixing
 *     optimizer_step or dt_sgd_step     a parameter server applies the step itself
 *     end_step                          average parameters after the local step
 *
 * and after the steps of an epoch end_epoch; after the last one finish. */
#ifndef DT_STRATEGY_H
#define DT_STRATEGY_H

#include "comm/codec.h"
#include "comm/comm.h"
#include "core/json.h"
#include "core/tensorfile.h"
#include "dtrain.h"

typedef struct dt_strategy dt_strategy;
typedef struct dt_step_ctx dt_step_ctx;

/* ------------------------------------------------------------------ options */

typedef enum { DT_FLAG_INT, DT_FLAG_FLOAT, DT_FLAG_TEXT, DT_FLAG_SWITCH } dt_flag_type;

/* One flag of a scheme (--name VALUE). Declared once, in the scheme's file: the command
 * line's parser and help, the library's defaults and the log's configuration line are all
 * built from it. Two schemes may declare the same flag (dpsgd and eventgrad: --topology)
 * with the same type and default. */
typedef struct dt_flag {
    const char *name;     /* without the leading -- */
    dt_flag_type type;
    const char *def;      /* the default as it would be typed ("1", "0.5", "ring"); switches: "0" */
    double min, max;      /* numbers: the allowed range (max <= min: unbounded) */
    int min_open;         /* 1: the value must be > min */
    const char *help;     /* one line, without the default (added from def) */
    int test_only;        /* for the tests: left out of --help */
} dt_flag;

/* In a dt_scheme initialiser: the flag table and its length, counted by the compiler. */
#define DT_FLAG_TABLE(t) .flags = (t), .nflags = (int)(sizeof(t) / sizeof((t)[0]))

/* Which schemes take --compress. */
typedef enum { DT_COMPRESS_NO, DT_COMPRESS_YES, DT_COMPRESS_WITH_SYNC } dt_compress_support;

/* A registry entry. */
typedef struct dt_scheme {
    const char *name;
    const char *summary;          /* one line for --help */
    const dt_flag *flags;
    int nflags;
    dt_compress_support compress;
    /* fills in s->ops and s->impl, checking the words of its text flags; the numbers are
     * validated already. No MPI here: dt_algo_check calls it on trial before any rank starts */
    dt_status (*create)(dt_strategy *s);
} dt_scheme;

/* dt_algo_config (the scheme and its flags' values as text) and dt_algo_config_set are in
 * dtrain.h. Values are checked against the declaring dt_flag when the scheme is created, so
 * the library and the command line agree on every default and range. */

/* ------------------------------------------------------------------ the context */

/* An evaluation by a server that evaluates on its own (downpour with one server), and where
 * the run stood when it was taken: with one server every counted message is sent or received
 * by it, so its own counters are the run's traffic so far. */
typedef struct dt_server_eval {
    const float *params, *state;  /* the model to evaluate */
    long step;                    /* steps per training rank (the scheme says how it counts them) */
    double msgs, baseline, bytes; /* the run's messages, their baseline and bytes so far */
    int reached;                  /* set by the trainer: this evaluation reached --target-acc */
} dt_server_eval;

/* What a scheme knows of the run; fixed once training starts. */
typedef struct dt_run_info {
    int epochs, batch, steps_per_epoch;
    int eval_every;               /* 0: only at the end */
    int eval_every_steps;         /* 0: no evaluations between epochs */
    long max_steps;               /* 0: no limit */
    int nworkers;                 /* training ranks */
    int worker;                   /* this rank's index among them; -1 on a server rank */
    int shard_n;                  /* this rank's training examples */
    int quiet;                    /* no progress output */
} dt_run_info;

struct dt_step_ctx {
    /* the model: one flat buffer each of parameters, gradients and batch-norm state, with
     * per-tensor views (dt_model_params, dt_model_grads, dt_model_state, dt_model_tensor) */
    dt_model *model;
    dt_comm *comm;
    dt_sgd *opt;                  /* the run's optimiser: momentum buffer, weight decay */
    const dt_schedule *sched;
    dt_run_info run;
    /* where the run stands (the trainer advances these) */
    int epoch;                    /* 0-based */
    int epoch_step;               /* steps done in this epoch */
    long step;                    /* steps done in the run */
    float lr;                     /* this step's learning rate */
    int eval_due;                 /* in end_epoch: the trainer evaluates after this epoch */
    /* this step's batch, from after_backward on */
    float loss;                   /* mean loss of the batch */
    int correct, count;
    /* set by a scheme: this rank trains no further (a downpour worker that was dropped, or
     * told that the run reached --target-acc); set in begin_step, that step is not taken */
    int stop;
    /* the trainer's services */
    void *host;
    /* appends one JSON line to the --log file (rank 0; elsewhere nothing) */
    dt_status (*log)(void *host, const char *json_line);
    /* a server that evaluates on its own (not collective): evaluates ev's model on rank 0's
     * test set, prints and logs the epoch line (report_epoch) or the line of an evaluation
     * between epochs (report_step, --eval-every-steps), and sets ev->reached when it is the
     * first to reach --target-acc; its time is evaluation time, not training time */
    dt_status (*report_epoch)(void *host, int epoch, double train_loss, double train_acc, dt_server_eval *ev);
    dt_status (*report_step)(void *host, dt_server_eval *ev);
};

/* ------------------------------------------------------------------ the hooks */

/* A NULL hook does nothing, except optimizer_step (NULL: the trainer's dt_sgd_step with
 * ctx->lr) and model_for_eval (NULL: the mean of the training ranks' models). Hooks that
 * return an error stop the run on this rank. */
typedef struct dt_strategy_ops {
    /* collective, once before training: buffers, windows, set-up exchanges (not counted) */
    dt_status (*start)(dt_strategy *s, dt_step_ctx *c);
    /* server ranks only (s->nservers > 0): serve until the workers are done */
    dt_status (*serve)(dt_strategy *s, dt_step_ctx *c);
    /* before the forward pass */
    dt_status (*begin_step)(dt_strategy *s, dt_step_ctx *c);
    /* during backward, after each layer (from the last to the first): the gradients [from,
     * num_params) are final; a scheme may start sending them (allreduce's buckets) or let its
     * transport progress. An error stops the step once backward has ended. */
    dt_status (*grads_ready)(dt_strategy *s, dt_step_ctx *c, size_t from);
    /* after backward, before the optimiser step: gradients may be exchanged or replaced,
     * and parameters mixed with the neighbours' (decentralized schemes) */
    dt_status (*after_backward)(dt_strategy *s, dt_step_ctx *c);
    /* replaces the optimiser step (a parameter server applies it) */
    dt_status (*optimizer_step)(dt_strategy *s, dt_step_ctx *c);
    /* after the optimiser step: average the parameters */
    dt_status (*end_step)(dt_strategy *s, dt_step_ctx *c);
    /* after the last step of an epoch (ctx->eval_due says whether an evaluation follows) */
    dt_status (*end_epoch)(dt_strategy *s, dt_step_ctx *c);
    /* collective, on every rank after the last step: drain, final averaging */
    dt_status (*finish)(dt_strategy *s, dt_step_ctx *c);
    /* collective: the model to evaluate and keep, into params/state (every rank) */
    dt_status (*model_for_eval)(dt_strategy *s, dt_step_ctx *c, float *params, float *state);
    /* checkpoints: the scheme's own state as records named "<scheme>:...", saved after every
     * epoch and restored on --resume (after start, which it overwrites); a record points at
     * its data until the file is written, so the data lives in the scheme's state */
    dt_status (*save_state)(dt_strategy *s, dt_step_ctx *c, dt_records *out);
    dt_status (*load_state)(dt_strategy *s, dt_step_ctx *c, const dt_tfile *f, const char *path);
    /* rank 0, while the summary line is written: the scheme's own figures as members */
    void (*summary)(dt_strategy *s, dt_json *line);
    /* collective, after a failure at start that every rank knows of: frees what start made
     * with every rank (one-sided windows, which MPI_Finalize must not find alive) */
    void (*abandon)(dt_strategy *s, dt_step_ctx *c);
    void (*destroy)(dt_strategy *s);
} dt_strategy_ops;

struct dt_strategy {
    const dt_scheme *scheme;
    const dt_strategy_ops *ops;   /* set by create */
    void *impl;                   /* the scheme's state, freed by ops->destroy */
    const dt_algo_config *cfg;    /* kept by pointer */
    dt_codec_spec codec;          /* --compress, parsed once (DT_CODEC_NONE: none) */
    int nservers;                 /* ranks [0, nservers) serve and do not train (downpour) */
    int decentralized;            /* the ranks' models differ: report their spread */
};

/* A scheme's flag values (the given one or the declared default). The flag must be one the
 * scheme declares (asserted). */
long dt_algo_int(const dt_strategy *s, const char *name);
double dt_algo_float(const dt_strategy *s, const char *name);
const char *dt_algo_text(const dt_strategy *s, const char *name);
int dt_algo_switch(const dt_strategy *s, const char *name);
/* Whether the flag was given (rather than left at its default). */
int dt_algo_given(const dt_strategy *s, const char *name);

/* ------------------------------------------------------------------ the registry */

/* Checks the configuration without creating anything (no MPI): a known scheme, --compress
 * valid and taken by it, its flags' values of the right type and range. */
dt_status dt_algo_check(const dt_algo_config *a);
/* Creates the configured scheme (checked first); a is kept by pointer. */
dt_status dt_strategy_create(const dt_algo_config *a, dt_strategy **out);
void dt_strategy_free(dt_strategy *s);
/* The schemes, in registry order; n set to their number. */
const dt_scheme *const *dt_schemes(int *n);
const dt_scheme *dt_scheme_find(const char *name);
/* Writes every flag of the configured scheme with its value in force as members of line
 * (numbers as numbers, switches as booleans), and "compress". */
void dt_algo_config_json(const dt_algo_config *a, dt_json *line);

#endif
