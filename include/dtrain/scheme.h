/*
 * dtrain/scheme.h - writing a training scheme: the contract.
 *
 * A scheme decides what the ranks exchange and when (dtrain's own: local, allreduce, ps, fedavg,
 * dpsgd, eventgrad, choco and downpour). dtrain runs everything else: data, shards, model,
 * optimiser and schedule, evaluation, the console and the JSON-lines log, checkpoints and
 * --resume, the watchdog (--timeout) and `dtrain run`'s supervisor. A scheme of your own, in
 * your own C file, linked against the installed library, gets all of it and is logged and
 * counted as a built-in one (docs/schemes.md lists what an author must know, each item
 * pointing here).
 *
 * C1  Registering. A scheme is a `const dt_scheme_def` (name, one-line summary, flags,
 *     whether it takes --compress, create). Register it with dt_scheme_register on every rank
 *     before dt_train or dt_main; then --algo NAME picks it, its flags are flags of the
 *     command (in --help, checked, in the log's config line) and dt_train_config.scheme.name
 *     = NAME picks it from C. Built into dtrain instead: one file in src/schemes/ and the line
 *     DT_SCHEME(x) in src/schemes/schemes.def (tests/cli_new_scheme.sh).
 * C2  create. Fills s->ops (a const table of hooks, required) and may set s->impl (its state),
 *     s->decentralized and s->own_baseline. No MPI and no model: dtrain calls it on trial to
 *     check a configuration before any rank starts, so checks across its flags go here (a
 *     one-line dt_fail naming them) and its destroy must free what it made. The model's
 *     buffers are first seen in the start hook.
 * C3  Flags. Declared once, as a table of dt_flag (dtrain/flag.h) over the scheme's own
 *     options struct (DT_SCHEME_FLAGS): name, the member and its kind, default, range, help.
 *     dtrain fills the struct (defaults, then the values given, each checked) before create;
 *     the scheme reads typed members through s->opts. A flag two schemes declare has the
 *     same kind and default; one named as a flag of dtrain's own (--epochs) is refused. A
 *     default that depends on --compress (choco's --gamma) is set by the def's adjust, which
 *     sees the struct after the values given and changes only what was not given (DT_GIVEN).
 * C4  The step. The trainer is the only caller of the hooks, on every training rank, in this
 *     order (a NULL hook does nothing):
 *         start                      once, collective: buffers, set-up exchanges (not counted)
 *         per step: begin_step, forward, backward (grads_ready after each layer), after_backward,
 *                   optimizer_step (NULL: dt_optim_step with ctx->lr), end_step
 *         end_epoch                  after an epoch's steps (ctx->eval_due: an evaluation follows)
 *         finish                     once, collective, after the last step (drain, final averaging)
 *         model_for_eval             collective: the model to evaluate and keep (NULL: the mean
 *                                    of the training ranks' models)
 *         abandon                    instead of the rest when the ranks agreed to end early (a
 *                                    rank failed in start or restoring a checkpoint, or the run
 *                                    diverged or was stopped): collective, frees what start made
 *                                    with every rank (one-sided windows, which MPI_Finalize must
 *                                    not find alive); then destroy
 *         destroy                    frees s->impl (also after a trial create)
 *     Every rank runs the same hooks in the same order, so a collective in a hook is called by
 *     all ranks; a hook that returns an error (dt_fail) stops the run on its rank, and dtrain
 *     ends the job with that line.
 * C5  The context. A hook sees a dt_step_ctx: the model (one flat buffer each of parameters,
 *     gradients and batch-norm state, dtrain.h), the communicator, the optimiser, where the
 *     run stands (epoch, step, lr) and the step's batch (loss, correct, count). Gradients may
 *     be replaced in after_backward; parameters changed in after_backward or end_step.
 * C6  Communication is counted. Use the counted calls of dtrain/comm.h (dt_allreduce_sum,
 *     dt_bcast, ...): they count messages and bytes (docs/accounting.md) and time themselves.
 *     MPI called directly: count each payload with dt_count_send/dt_count_recv and put the
 *     calls (and any encoding) between dt_comm_time_begin and dt_comm_time_end. Set-up
 *     traffic (in start) is not a payload: dt_bcast_setup counts it beside the payloads
 *     (other_bytes); MPI called directly, add it with dt_count_other.
 * C7  The baseline ("messages %": sent / what communicating every tensor every step would
 *     send). By default dtrain takes what the scheme sent: 100%, right for a scheme that sends
 *     everything every step. A scheme that sends less sets s->own_baseline = 1 in create and
 *     calls dt_count_baseline each step with what the every-step version would send.
 * C8  Waits. Blocking MPI calls are seen by the watchdog as they are. A wait that spins (a
 *     loop of MPI_Test, polling window memory) goes between dt_wait_begin and dt_wait_end (or
 *     use dt_wait_all), or --timeout cannot end it with a line naming it.
 * C9  Models that differ. A scheme whose ranks' models differ between averagings sets
 *     s->decentralized = 1: the log reports their spread, and the model evaluated and kept
 *     is their mean (or model_for_eval's).
 * C10 Checkpoints. State a resumed run needs (residuals, copies, counters of the scheme) goes
 *     in save_state as records named by the scheme ("round", "residual"): dtrain names them
 *     "<scheme>:<name>" in the file. A record points at its data until the file is written,
 *     so the data lives in s->impl. load_state runs after start and overwrites what start
 *     set up; dt_tfile_take refuses a missing or mis-sized record in one line.
 * C11 The summary. The summary hook may add the scheme's own figures to the log's summary
 *     line (dt_json_num, ...): rank 0 only, no communication.
 * C12 Ranks that serve and do not train (downpour's parameter servers): the def's .server points
 *     to a dt_scheme_server (dtrain/server.h). Every other scheme leaves it NULL, and every
 *     rank trains.
 * C13 Running. With the whole command: main() registers and returns dt_main(argc, argv)
 *     (dtrain.h); `prog train --algo NAME ...`, `prog run -n 4 --algo NAME ...` (the ranks are
 *     prog again), every flag of dtrain. Or from C: dt_train (dtrain.h).
 * C14 Replays. A scheme whose ranks only ever wait for each other (every exchange a collective
 *     or a matched send and receive of a size fixed by the flags, no one-sided reads of whatever
 *     has arrived, no polling that decides what happens) computes the same numbers at any speed
 *     of the network. Say so with .replayable = 1: `dtrain sim --replay LOG` then simulates a run
 *     of it without computing (the FLOPs charged, nothing calculated) and takes every evaluation
 *     from LOG, a run of the same flags (docs/simulation.md, "Replays").
 *
 * Worked example: examples/my_scheme.c, shown whole. Gradients are averaged every K-th step
 * (--reduce-every K); in between each rank steps on its own gradient, so the models drift
 * apart and are averaged for evaluation. Build it against the installed library with
 * `cc my_scheme.c $(pkg-config --cflags --libs dtrain)` or find_package(dtrain), and run
 * `mpiexec -n 2 ./my_scheme train --algo every-k --reduce-every 4 --epochs 1`.
 * (tests/cli_install.sh checks this text is the file's and runs it.)
 *
 * --- example begin ---
 * #include <stdio.h>
 * #include <stdlib.h>
 *
 * #include <dtrain/scheme.h>
 *
 * typedef struct {                                                             // C3
 *     long every;                       // --reduce-every
 * } every_k_opts;
 *
 * static const dt_flag every_k_flags[] = {
 *     {"reduce-every", DT_AT_INT(every_k_opts, every), .def = "4", .min = 1, .max = 1e6,
 *      .help = "every-k: average the gradients every N steps"},
 * };
 *
 * typedef struct {
 *     long reduced;                     // steps that averaged, for the summary
 * } every_k;
 *
 * // after backward, before the optimiser step: every K-th step the gradients are averaged
 * static dt_status every_k_after_backward(dt_scheme *s, dt_step_ctx *c) {
 *     const every_k_opts *o = s->opts;
 *     every_k *k = s->impl;
 *     dt_count_baseline(c->comm, dt_allreduce_msgs(c->comm));                  // C7
 *     if ((c->step + 1) % o->every) return DT_OK;
 *     k->reduced++;
 *     return dt_allreduce_mean(c->comm, dt_model_grads(c->model), dt_model_num_params(c->model)); // C6
 * }
 *
 * static void every_k_summary(dt_scheme *s, dt_json *line) {                      // C11
 *     dt_json_int(line, "reduced_steps", ((every_k *)s->impl)->reduced);
 * }
 *
 * static void every_k_destroy(dt_scheme *s) { free(s->impl); }
 *
 * static const dt_scheme_ops every_k_ops = {
 *     .after_backward = every_k_after_backward,
 *     .summary = every_k_summary,
 *     .destroy = every_k_destroy,
 * };
 *
 * static dt_status every_k_create(dt_scheme *s) {                                 // C2
 *     if (!(s->impl = calloc(1, sizeof(every_k)))) return dt_fail(DT_ERR_NOMEM, "out of memory");
 *     s->ops = &every_k_ops;
 *     s->decentralized = 1;                                                     // C9
 *     s->own_baseline = 1;                                                      // C7
 *     return DT_OK;
 * }
 *
 * static const dt_scheme_def every_k_scheme = {                                 // C1
 *     .name = "every-k",
 *     .summary = "average the gradients every K steps, each rank's own in between",
 *     DT_SCHEME_FLAGS(every_k_flags, every_k_opts),
 *     .create = every_k_create,
 * };
 *
 * int main(int argc, char **argv) {                                             // C13
 *     if (dt_scheme_register(&every_k_scheme) != DT_OK) {
 *         fprintf(stderr, "my_scheme: %s\n", dt_last_error());
 *         return 2;
 *     }
 *     return dt_main(argc, argv);
 * }
 * --- example end ---
 */
#ifndef DTRAIN_SCHEME_H
#define DTRAIN_SCHEME_H

#include <stddef.h>
#include <stdint.h>

#include <dtrain.h>
#include <dtrain/comm.h>
#include <dtrain/flag.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_scheme dt_scheme;
typedef struct dt_step_ctx dt_step_ctx;

/* ------------------------------------------------------------------ flags (C3) */

/* A scheme's flags (--name VALUE) are a table of dt_flag (dtrain/flag.h) over the scheme's own
 * options struct, declared once in its file: the command line's parser and --help, the
 * library's defaults and checks, and the log's configuration line are all built from it. The
 * registry fills the struct (the declared defaults, then the values given) before create, and
 * the scheme reads typed members: `const my_opts *o = s->opts;` in create and the hooks (the
 * registry owns the struct). Two schemes may declare the same flag (dpsgd and eventgrad:
 * --topology) with the same kind and default. */

/* In a dt_scheme_def initialiser: the flag table, its length, and the options struct T. */
#define DT_SCHEME_FLAGS(t, T) .flags = (t), .nflags = (int)(sizeof(t) / sizeof((t)[0])), .opts_size = sizeof(T)

/* ------------------------------------------------------------------ the registry entry (C1) */

/* Which schemes take --compress (the codecs are the library's own: a scheme of your own says NO). */
typedef enum {
    DT_COMPRESS_NO,
    DT_COMPRESS_YES,           /* the payload codecs: fp16, bf16, int8, topk:F */
    DT_COMPRESS_WITH_SYNC,     /* ... only with --sync (eventgrad) */
    DT_COMPRESS_AND_POWERSGD,  /* ... and powersgd:R, low-rank factors summed (allreduce) */
} dt_compress_support;

typedef struct dt_scheme_def {
    const char *name;             /* --algo NAME: a-z, 0-9, - and _ */
    const char *summary;          /* one line for --help */
    const dt_flag *flags;         /* DT_SCHEME_FLAGS (C3) */
    int nflags;
    size_t opts_size;             /* the options struct the flags' members are in (0: no flags) */
    dt_compress_support compress;
    /* fills in s->ops and s->impl (C2) */
    dt_status (*create)(dt_scheme *s);
    /* optional (C3): defaults that depend on --compress, set in the options struct after the
     * declared defaults and the values given; only a value not given may change (its flag's
     * DT_GIVEN int is 0). create, the hooks and the log's configuration line see the result. */
    void (*adjust)(void *opts, const dt_codec_spec *codec);
    /* ranks that serve and do not train (C12, dtrain/server.h); NULL: every rank trains */
    const struct dt_scheme_server *server;
    /* 1 (C14): what the run computes does not depend on when messages arrive, and what it sends
     * does not depend on what it computes; `dtrain sim --replay LOG` may then time this scheme on
     * another cluster from one run's log. 0 (the default): it may not. */
    int replayable;
} dt_scheme_def;

/* Adds a scheme to the registry, for this process (every rank registers it). Before dt_train
 * or dt_main; not thread-safe. DT_ERR_ARG: a bad or taken name, no create, a flag another
 * scheme declares with another type or default. Registering the same def again is a no-op. */
DT_API dt_status dt_scheme_register(const dt_scheme_def *def);

/* ------------------------------------------------------------------ the context (C5) */

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
    dt_optim *opt;                /* the run's optimiser (--optim): sgd or adamw, its moments, weight
                                   * decay and --clip; dt_optim_step, or begin + apply over slices */
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
    int correct, count;           /* right predictions (a language model: of its every position), examples */
    /* the trainer's services */
    void *host;
    /* appends one JSON line to the --log file (rank 0; elsewhere nothing) */
    dt_status (*log)(void *host, const char *json_line);
};

/* ------------------------------------------------------------------ checkpoints (C10) */

typedef struct dt_records dt_records;   /* what a checkpoint will hold */
typedef struct dt_tfile dt_tfile;       /* a checkpoint read back */
/* A record of numel floats, or of raw bytes (a multiple of 4: counters, doubles, bit for bit).
 * The data is not copied: it must stay valid until the checkpoint is written. */
DT_API dt_status dt_records_add(dt_records *l, const char *name, const float *data, size_t numel);
DT_API dt_status dt_records_add_raw(dt_records *l, const char *name, const void *data, size_t bytes);
/* Copies record `name` of exactly `bytes` bytes into dst; otherwise a one-line error naming
 * path and the record. */
DT_API dt_status dt_tfile_take(const dt_tfile *f, const char *path, const char *name, void *dst, size_t bytes);

/* ------------------------------------------------------------------ the summary line (C11) */

typedef struct dt_json dt_json;
DT_API void dt_json_str(dt_json *j, const char *key, const char *v);  /* v NULL -> null */
DT_API void dt_json_num(dt_json *j, const char *key, double v);       /* NaN/inf -> null */
DT_API void dt_json_int(dt_json *j, const char *key, long long v);
DT_API void dt_json_bool(dt_json *j, const char *key, int v);

/* ------------------------------------------------------------------ the hooks (C4) */

/* A NULL hook does nothing, except optimizer_step (NULL: the trainer's dt_optim_step with
 * ctx->lr, which clips the gradient with --clip first) and model_for_eval (NULL: the mean of the training ranks' models). Hooks that
 * return an error stop the run on this rank. */
typedef struct dt_scheme_ops {
    /* collective, once before training: buffers, windows, set-up exchanges (not counted) */
    dt_status (*start)(dt_scheme *s, dt_step_ctx *c);
    /* before the forward pass */
    dt_status (*begin_step)(dt_scheme *s, dt_step_ctx *c);
    /* during backward, after each layer (from the last to the first): the gradients [from,
     * num_params) are final; a scheme may start sending them (allreduce's buckets) or let its
     * transport progress. An error stops the step once backward has ended. */
    dt_status (*grads_ready)(dt_scheme *s, dt_step_ctx *c, size_t from);
    /* after backward, before the optimiser step: gradients may be exchanged or replaced,
     * and parameters mixed with the neighbours' (decentralized schemes) */
    dt_status (*after_backward)(dt_scheme *s, dt_step_ctx *c);
    /* replaces the optimiser step (a parameter server applies it) */
    dt_status (*optimizer_step)(dt_scheme *s, dt_step_ctx *c);
    /* after the optimiser step: average the parameters */
    dt_status (*end_step)(dt_scheme *s, dt_step_ctx *c);
    /* after the last step of an epoch (ctx->eval_due says whether an evaluation follows) */
    dt_status (*end_epoch)(dt_scheme *s, dt_step_ctx *c);
    /* collective, on every rank after the last step: drain, final averaging */
    dt_status (*finish)(dt_scheme *s, dt_step_ctx *c);
    /* collective: the model to evaluate and keep, into params/state (every rank) */
    dt_status (*model_for_eval)(dt_scheme *s, dt_step_ctx *c, float *params, float *state);
    /* checkpoints (C10): saved after every epoch, restored on --resume after start */
    dt_status (*save_state)(dt_scheme *s, dt_step_ctx *c, dt_records *out);
    dt_status (*load_state)(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path);
    /* rank 0, while the summary line is written: the scheme's own figures as members (C11) */
    void (*summary)(dt_scheme *s, dt_json *line);
    /* collective, when every rank knows the run ends early (a failure at start, a divergence, a
     * stop on request; C4): frees what start made with every rank (one-sided windows, which
     * MPI_Finalize must not find alive) */
    void (*abandon)(dt_scheme *s, dt_step_ctx *c);
    void (*destroy)(dt_scheme *s);
} dt_scheme_ops;

/* ------------------------------------------------------------------ the instance */

struct dt_scheme {
    /* set by dtrain */
    const dt_scheme_def *def;     /* what was registered (C1) */
    const void *opts;             /* the flags' values: the scheme's options struct (C3) */
    dt_codec_spec codec;          /* --compress, parsed (DT_CODEC_NONE: none) */
    /* set by create (C2) */
    const dt_scheme_ops *ops;
    void *impl;                   /* the scheme's state, freed by ops->destroy */
    int decentralized;            /* the ranks' models differ: report their spread (C9) */
    int own_baseline;             /* the scheme counts its baseline itself (C7) */
};

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_SCHEME_H */
