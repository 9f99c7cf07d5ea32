/*
 * dtrain.h - communication-efficient data-parallel training on CPUs.
 *
 * Worked example (examples/train_one.c, shortened): train cnn1 on MNIST, single process;
 * build it against the installed library with `cc train_one.c $(pkg-config --cflags --libs
 * dtrain)` (docs/library.md, "Install").
 *
 *     dt_model *m = NULL;
 *     dt_dataset train = {0}, test = {0};
 *     if (dt_model_from_name("cnn1", &m) != DT_OK ||
 *         dt_dataset_load("mnist", "data/mnist", 1, &train) != DT_OK ||
 *         dt_dataset_load("mnist", "data/mnist", 0, &test) != DT_OK) {
 *         fprintf(stderr, "dtrain: %s\n", dt_last_error());
 *         return 2;
 *     }
 *     dt_dataset_truncate(&train, 4096);           // a short run
 *     dt_model_init(m, 1);                         // same seed -> same weights
 *     dt_model_reserve(m, 64);                     // all activations sized once
 *     dt_sgd sgd;
 *     dt_sgd_init(&sgd, dt_model_num_params(m), 0.9f, 0.0f, 0);
 *     static float x[64 * 784]; uint8_t y[64]; int idx[64];
 *     for (int b = 0; b + 64 <= train.n; b += 64) {
 *         for (int i = 0; i < 64; i++) idx[i] = b + i;
 *         dt_batch_fill(&train, idx, 64, x, y, 0, NULL);
 *         dt_model_forward(m, x, 64, 1);
 *         dt_model_backward(m, y, NULL);           // loss + all gradients
 *         dt_sgd_step(&sgd, dt_model_params(m), dt_model_grads(m), 0.05f);
 *     }
 *     // ... accuracy: dt_model_forward(m, x, n, 0) and dt_model_loss(m, y, &correct)
 *     dt_sgd_free(&sgd); dt_dataset_free(&train); dt_dataset_free(&test);
 *     dt_model_free(m);                            // whoever creates frees
 *
 * Conventions: every public symbol starts with dt_. Runtime errors return a dt_status and
 * leave a one-line message in dt_last_error(); programmer errors assert. All parameters of
 * a model live in one contiguous float buffer (gradients in a second of the same layout),
 * with a table of named per-tensor views, so distributed code averages, sends, compresses
 * and checkpoints by buffer or by tensor.
 */
#ifndef DTRAIN_H
#define DTRAIN_H

#include <stddef.h>
#include <stdint.h>

/* DT_API marks what libdtrain exports: every function and variable the public headers
 * (dtrain.h and the headers in dtrain/) declare, and nothing else. The library is compiled with
 * -fvisibility=hidden, so its internal functions stay out of libdtrain.so's dynamic symbols
 * (tests/cli_exports.sh compares the two lists); for a program using the library the
 * attribute on a declaration changes nothing. */
#ifndef DT_API
#if defined(__GNUC__) || defined(__clang__)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */
typedef enum dt_status {
    DT_OK = 0,
    DT_ERR_IO,      /* file missing, unreadable, unwritable */
    DT_ERR_FORMAT,  /* file content is not what was expected */
    DT_ERR_ARG,     /* bad argument or flag value */
    DT_ERR_NOMEM,   /* allocation failed */
    DT_ERR_MPI,     /* MPI reported an error */
    DT_ERR_STATE,   /* operation not valid in the current state */
    DT_ERR_DIVERGED, /* training diverged: a loss or parameter became non-finite */
    DT_ERR_STOPPED  /* stopped on request (SIGTERM, SIGINT) after a step, its checkpoint committed */
} dt_status;

DT_API const char *dt_status_str(dt_status s);
/* This build's version and commit: "0.9.0 (commit 130fc8bb2f18)" (the commit as git describes
 * it, "-dirty" when built from changed files; "unknown" outside a git tree). */
DT_API const char *dt_version(void);
/* The message of the most recent error in this thread ("file X: expected Y, found Z"). */
DT_API const char *dt_last_error(void);
/* Records an error message and returns s (so: return dt_fail(DT_ERR_IO, "...")). Control
 * characters and bytes that are not valid UTF-8 (text quoted from a file) are kept as \xNN,
 * so the message is one line that does nothing to a terminal; an argument may be
 * dt_last_error() itself (a cause given more context). */
DT_API dt_status dt_fail(dt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- random numbers */
/* xoshiro128+-style generator; tiny, seedable, the same on every platform. */
typedef struct dt_rng { uint64_t s[2]; } dt_rng;
DT_API void dt_rng_seed(dt_rng *r, uint64_t seed);
DT_API uint64_t dt_rng_next(dt_rng *r);
DT_API float dt_rng_uniform(dt_rng *r);             /* [0, 1) */
DT_API uint32_t dt_rng_below(dt_rng *r, uint32_t n); /* [0, n) */
DT_API void dt_shuffle(int *a, int n, dt_rng *r);
/* A seed derived from a run seed and up to three integers (rank, epoch, ...). */
DT_API uint64_t dt_seed_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

/* ---------------------------------------------------------------- runtime */
/* Pins OpenBLAS to one thread. Call once before training. */
DT_API void dt_runtime_init(void);
/* Monotonic wall-clock seconds, for timings. */
DT_API double dt_now(void);
/* Name of the BLAS kernel family in use ("SkylakeX", "Haswell", ...), for reports. */
DT_API const char *dt_blas_core(void);

/* ---------------------------------------------------------------- data */
typedef struct dt_dataset {
    char name[32];          /* "mnist", "fashion-mnist", "cifar10"; texts: "kjv", "fortunes", "text", "tokens" */
    int n;                  /* number of examples */
    int c, h, w;            /* image shape; a text's: 1 x T x 1, T its window (dt_dataset_set_window) */
    int classes;            /* a text's: its vocabulary */
    uint8_t *images;        /* n * c * h * w bytes, CHW per image */
    uint8_t *labels;        /* n bytes */
    float mean[3], std[3];  /* per-channel normalisation, on pixel/255 */
    int augment;            /* 1: random crop (pad 4) + horizontal flip when asked (CIFAR); a text's
                             * windows start anywhere in their slot */
    /* a text (docs/data.md): a stream of tokens, example i the window of T + 1 of them from
     * i·T (+ up to T - 1 when augmented): its inputs the first T, its targets the next T */
    int text;               /* 1: a text (images and labels NULL) */
    int bytes;              /* 1: a token is a byte of text (bits per byte = loss / ln 2) */
    uint16_t *tokens;
    long long ntokens;
} dt_dataset;

/* Loads the train (train=1) or test split of a named dataset from dir.
 * mnist / fashion-mnist: IDX files, raw or .gz; cifar10: the binary batches; texts: kjv and
 * fortunes (dir/NAME.txt, scripts/get-data), text:FILE (any file, a byte a token) and
 * tokens:FILE (llm.c's token files), the test split their last tenth. */
DT_API dt_status dt_dataset_load(const char *name, const char *dir, int train, dt_dataset *out);
/* The same, reading only the first max_n examples (0: all), as dt_dataset_truncate would keep
 * them: a short run reads what it uses (MNIST's 47 MB training file: 0.1-0.3 s a process). */
DT_API dt_status dt_dataset_load_first(const char *name, const char *dir, int train, int max_n, dt_dataset *out);
/* Single files, for tools and tests. Each checks magic, sizes and label ranges. */
DT_API dt_status dt_idx_load(const char *images_path, const char *labels_path, dt_dataset *out);
DT_API dt_status dt_cifar_load(const char *const *paths, int npaths, dt_dataset *out);
/* A text's examples: windows of T tokens (the model's context), d->h = T and d->n set; the
 * text must hold at least two. Nothing to do for images. */
DT_API dt_status dt_dataset_set_window(dt_dataset *d, int T);
/* Targets per example: a text's window length, 1 for images. */
DT_API int dt_dataset_positions(const dt_dataset *d);
/* Keeps only the first n examples (n <= d->n). */
DT_API void dt_dataset_truncate(dt_dataset *d, int n);
DT_API void dt_dataset_free(dt_dataset *d);
/* Assembles a normalised float batch (n * c * h * w) and its labels from example indices.
 * augment != 0 and d->augment: random crop with 4-pixel zero padding and horizontal flip. */
DT_API void dt_batch_fill(const dt_dataset *d, const int *idx, int n, float *x, uint8_t *y,
                   int augment, dt_rng *rng);
/* The same for images and texts alike, the targets as uint16, dt_dataset_positions(d) of them
 * per example, row-major. A text's x holds each window's tokens (as floats), y the tokens after
 * them; augment != 0 and d->augment: each window starts at a random offset in its slot. */
DT_API void dt_batch_fill_targets(const dt_dataset *d, const int *idx, int n, float *x, uint16_t *y,
                           int augment, dt_rng *rng);

/* How the training set is divided among N ranks (docs/algorithms.md):
 * random: a seeded shuffle cut into N near-equal shards; class: shard r holds the classes
 * c with c mod N == r (whole classes, the extreme non-IID case); equal: every shard holds
 * the same number of examples of every class (floor(count_c / N); the rest is left out);
 * contiguous: shard r the r-th of N runs of consecutive examples (a text: each rank its own
 * part of it). class and equal need labels (not a text's). */
typedef enum { DT_SPLIT_RANDOM, DT_SPLIT_CLASS, DT_SPLIT_EQUAL, DT_SPLIT_CONTIGUOUS } dt_split_kind;
DT_API dt_status dt_split_parse(const char *text, dt_split_kind *out);
/* Fills idx (n entries at most) with the example indices of every shard, shard r at
 * idx[offsets[r] .. offsets[r+1]); offsets has nranks + 1 entries. Deterministic in seed. */
DT_API dt_status dt_split(const uint8_t *labels, int n, int classes, int nranks, dt_split_kind kind,
                   uint64_t seed, int *idx, int *offsets);

/* ---------------------------------------------------------------- models */
typedef struct dt_tensor_view {
    char name[64];          /* "conv1.weight", "transformer.h.0.attn.c_attn.weight" */
    size_t offset;          /* into the parameter (or state) buffer, in floats */
    size_t numel;
    int ndim;
    int shape[4];
} dt_tensor_view;

typedef struct dt_model dt_model;

/* Names: mlp, cnn1, cnn2, downpour-cnn, alexnet-cifar, resnet18-cifar (and smaller
 * test models: resblock-tiny). */
DT_API dt_status dt_model_from_name(const char *name, dt_model **out);
/* Builds from spec text (see docs/model-spec.md); origin names the source in errors. */
DT_API dt_status dt_model_from_spec(const char *text, const char *origin, dt_model **out);
DT_API dt_status dt_model_from_file(const char *path, dt_model **out);
/* The built-in spec text of a named model, or NULL. Caller frees. */
DT_API char *dt_model_spec_text(const char *name);
DT_API const char *const *dt_model_names(void); /* NULL-terminated */
DT_API void dt_model_free(dt_model *m);

/* PyTorch default initialisation (uniform +-1/sqrt(fan_in)), BN gamma=1 beta=0. */
DT_API void dt_model_init(dt_model *m, uint64_t seed);
/* Sizes activations and workspaces for batches up to max_batch; no allocation after. */
DT_API dt_status dt_model_reserve(dt_model *m, int max_batch);

DT_API size_t dt_model_num_params(const dt_model *m);
DT_API float *dt_model_params(dt_model *m);
DT_API float *dt_model_grads(dt_model *m);
DT_API int dt_model_num_tensors(const dt_model *m);
DT_API const dt_tensor_view *dt_model_tensor(const dt_model *m, int i);
/* 1: weight decay applies to parameter tensor i by default (--decay-on weights): a weight of two
 * or more dimensions of a layer whose parameters are GEMM operands (conv, linear); never a bias,
 * a norm's parameters or an embedding. */
DT_API int dt_model_tensor_decays(const dt_model *m, int i);
/* The spec kind of the layer tensor i belongs to ("linear", "embed", "layernorm", ...): which
 * tensors are embeddings or norms, for an optimiser that decays only the others' weights. */
DT_API const char *dt_model_tensor_kind(const dt_model *m, int i);
/* Non-trained state (batch-norm running statistics), one buffer, its own views. */
DT_API size_t dt_model_num_state(const dt_model *m);
DT_API float *dt_model_state(dt_model *m);
DT_API int dt_model_num_state_tensors(const dt_model *m);
DT_API const dt_tensor_view *dt_model_state_tensor(const dt_model *m, int i);

/* c x h x w per example; a sequence model's input (spec 'input seq=T') is c = 1, h = T, w = 1:
 * T token ids, each an exact integer in a float. */
DT_API void dt_model_input_shape(const dt_model *m, int *c, int *h, int *w);
/* Classes of each prediction: a classifier's outputs; a language model's vocabulary (the
 * last layer's features at each position). */
DT_API int dt_model_num_classes(const dt_model *m);
/* Predictions per example: T when the last layer's output is a sequence (a language model
 * predicts the next token at every position), else 1. Targets and labels are [batch][positions]. */
DT_API int dt_model_positions(const dt_model *m);
/* The vocabulary of the token ids the model reads (its embed layer's vocab=), 0 when its input
 * is not token ids. */
DT_API int dt_model_vocab(const dt_model *m);
/* Forward FLOPs per example (multiply-add = 2; attention's QK^T and PV as full T x T products,
 * as PyTorch's profiler counts them: docs/model-spec.md). */
DT_API double dt_model_flops(const dt_model *m);
/* Dropout seed (each rank its own stream). */
DT_API void dt_model_set_seed(dt_model *m, uint64_t seed);

/* Arithmetic precision of the training step. fp32: everything in float. bf16 (mixed
 * precision, as PyTorch's bf16 autocast): every activation and activation gradient is stored
 * as bfloat16 (half the memory), the convolutions and linear layers multiply bf16-rounded
 * weights and inputs with fp32 accumulation, every layer computes in fp32 and rounds what it
 * stores; the parameters, their gradients, the optimiser, the loss, checkpoints and what
 * schemes send stay fp32. */
typedef enum dt_precision { DT_PRECISION_FP32 = 0, DT_PRECISION_BF16 = 1 } dt_precision;
/* "fp32" / "bf16" */
DT_API const char *dt_precision_name(dt_precision p);
/* The names in dt_precision's order, NULL-terminated (for flags and menus). */
DT_API extern const char *const dt_precision_names[];
/* Switches the model's precision; a reserved model is re-reserved for the same batch. */
DT_API dt_status dt_model_set_precision(dt_model *m, dt_precision p);
DT_API dt_precision dt_model_precision(const dt_model *m);
/* Bytes dt_model_reserve set aside: activations, their gradients, saved data, scratch. */
DT_API size_t dt_model_activation_bytes(const dt_model *m);
/* Which engine runs which layers at the model's precision, as "kind:engine:count" joined by
 * commas, e.g. "conv:oneDNN:17,conv:own:3" (empty: every layer runs dtrain's own kernels;
 * conv layers may run on oneDNN in a build with it: DTRAIN_CONV_ENGINE, docs/results.md).
 * Writes at most cap bytes (NUL included); returns the length it needed, as snprintf. */
DT_API size_t dt_model_engines(const dt_model *m, char *buf, size_t cap);

/* Forward pass; returns the logits (batch x positions x classes), valid until the next call. */
DT_API const float *dt_model_forward(dt_model *m, const float *x, int batch, int train);
/* Softmax cross-entropy on the last forward's logits and targets, then backward: fills the
 * gradient buffer (overwritten, not accumulated). The targets are batch x positions class
 * indices, row-major ([batch][positions]); the loss is the mean over those rows (PyTorch's
 * F.cross_entropy over the flattened rows). Returns it; *correct (if not NULL) receives the
 * number of rows whose arg-max is the target. The uint8 forms (classifiers: labels) convert
 * into a buffer dt_model_reserve made, so a step allocates nothing either way. dx_out, if not
 * NULL, receives the gradient with respect to the input (batch * c * h * w), for tests. */
DT_API float dt_model_backward_targets(dt_model *m, const uint16_t *targets, int *correct);
DT_API float dt_model_backward(dt_model *m, const uint8_t *labels, int *correct);
DT_API float dt_model_backward_input(dt_model *m, const uint8_t *labels, int *correct, float *dx_out);
/* Called during backward after each layer, from the last to the first, with `from`: the
 * gradients [from, num_params) are final for this pass (parameters are laid out in layer
 * order, so the final part grows from the end). Lets a caller start communicating them while
 * backward goes on (bucketed allreduce) or let its transport progress. NULL: none. */
typedef void (*dt_grads_ready_fn)(void *arg, size_t from);
DT_API void dt_model_set_grads_ready(dt_model *m, dt_grads_ready_fn fn, void *arg);
/* Loss and correct count of the last forward without backward. */
DT_API float dt_model_loss_targets(const dt_model *m, const uint16_t *targets, int *correct);
DT_API float dt_model_loss(const dt_model *m, const uint8_t *labels, int *correct);

/* Prints layers, output shapes, parameter count, FLOPs to a FILE*. */
DT_API void dt_model_print(const dt_model *m, void *file);
/* NULL when --precision bf16 multiplies in bf16 here (a build with oneDNN on a CPU with
 * AVX512_BF16 or AMX: its conv layers); else why it computes in fp32 on bf16-stored values
 * (saving activation memory, not time). */
DT_API const char *dt_bf16_fallback_reason(void);
/* Prints what --precision bf16 does with each kind of layer of the model, on this CPU. */
DT_API void dt_model_print_precision(const dt_model *m, void *file);

/* Weights file: named tensors + state, written atomically (tmp + rename). */
DT_API dt_status dt_model_save(const dt_model *m, const char *path);
DT_API dt_status dt_model_load(dt_model *m, const char *path);
/* What a weights file (or checkpoint) says it holds: dtrain train writes the model as it was
 * named (a built-in name or a spec file's path), the model's spec text, the dataset and the
 * scheme (--algo's name; the file's record is "meta:algo"). Files of older builds have none:
 * all NULL. */
typedef struct dt_weights_meta {
    char *model, *spec, *data, *scheme;
} dt_weights_meta;
/* dt_model_save with the metadata (model: a name or spec file, as dt_model_open takes it). */
DT_API dt_status dt_model_save_meta(const dt_model *m, const char *path, const char *model, const char *data, const char *scheme);
/* The metadata of a weights file (all NULL for an older file without it). */
DT_API dt_status dt_weights_meta_read(const char *path, dt_weights_meta *out);
DT_API void dt_weights_meta_free(dt_weights_meta *w);
/* Whether model (a name or spec file) has the spec text of the file's model (1: the same or
 * unknown, 0: another model). */
DT_API int dt_weights_meta_same_model(const dt_weights_meta *w, const char *model);

/* ---------------------------------------------------------------- optimiser
 * dt_sgd is plain SGD over one buffer (the worked example above). dt_optim is the run's
 * optimiser, SGD or AdamW, over a model's parameters in their order: the trainer and the schemes
 * step through it, whole or a slice at a time (a parameter server holding part of the model),
 * on the model's buffer or on a copy laid out as it (a master). */
typedef struct dt_sgd {
    size_t n;
    float momentum, weight_decay;
    int nesterov;
    float *buf;             /* momentum buffer, NULL when momentum == 0 */
    int started;
} dt_sgd;

DT_API dt_status dt_sgd_init(dt_sgd *o, size_t n, float momentum, float weight_decay, int nesterov);
/* PyTorch semantics: g += wd*w; buf = mu*buf + g; g = nesterov ? g + mu*buf : buf; w -= lr*g. */
DT_API void dt_sgd_step(dt_sgd *o, float *w, const float *g, float lr);
DT_API void dt_sgd_free(dt_sgd *o);

typedef enum dt_optim_kind { DT_OPTIM_SGD = 0, DT_OPTIM_ADAMW = 1 } dt_optim_kind;
/* "sgd", "adamw": the names in dt_optim_kind's order, NULL-terminated (--optim) */
DT_API extern const char *const dt_optim_names[];
/* Which tensors weight decay applies to (--decay-on). weights: the weights of the GEMM layers
 * (conv, linear: dt_model_tensor_decays), never biases, norms or embeddings; matrices: every
 * tensor of two or more dimensions (nanoGPT's rule: embeddings too); all: every tensor; auto:
 * all for sgd (as dt_sgd), weights for adamw. */
typedef enum dt_decay_on { DT_DECAY_AUTO = 0, DT_DECAY_WEIGHTS, DT_DECAY_MATRICES, DT_DECAY_ALL } dt_decay_on;
DT_API extern const char *const dt_decay_on_names[];   /* "auto", "weights", "matrices", "all", NULL */

typedef struct dt_optim_config {
    dt_optim_kind kind;
    float weight_decay;      /* sgd: L2, wd*w added to the gradient; adamw: decoupled, w *= 1 - lr*wd */
    dt_decay_on decay_on;    /* the tensors it applies to */
    float momentum;          /* sgd */
    int nesterov;            /* sgd */
    double beta1, beta2, eps; /* adamw (doubles, as PyTorch's: 1 - beta is taken before rounding) */
    float clip;              /* dt_optim_step clips the gradient's global L2 norm to this (0: never) */
} dt_optim_config;

/* sgd without momentum or decay; beta1 0.9, beta2 0.999, eps 1e-8 (torch.optim.AdamW's) */
DT_API void dt_optim_config_defaults(dt_optim_config *c);

typedef struct dt_optim {
    dt_optim_config cfg;     /* decay_on resolved (never auto) */
    size_t n;                /* the model's parameters */
    float *m;                /* sgd: the momentum buffer (NULL without momentum); adamw: exp_avg */
    float *v;                /* adamw: exp_avg_sq (NULL for sgd) */
    int64_t steps;           /* steps begun (dt_optim_begin): adamw's bias correction; sgd's buffer
                              * starts at the first gradient */
    size_t *decay;           /* [decay[2k], decay[2k+1]): the parameters that decay, in order */
    int ndecay;              /* ranges */
} dt_optim;

/* Refuses, in one line naming the flag, a value out of range or one of the other optimiser
 * (momentum or nesterov with adamw). */
DT_API dt_status dt_optim_config_check(const dt_optim_config *c);
/* An optimiser for the parameters of model m (their number and which tensors decay); the
 * configuration checked first. */
DT_API dt_status dt_optim_init(dt_optim *o, const dt_optim_config *c, const dt_model *m);
/* One step of every parameter, as PyTorch's clip_grad_norm_ then optimizer.step(): g is
 * clipped in place (cfg.clip > 0), then dt_optim_begin and dt_optim_apply over all n. w and g
 * hold all n parameters in the model's order (the model's buffers, or copies laid out so). */
DT_API void dt_optim_step(dt_optim *o, float *w, float *g, float lr);
/* The parts of a step, for a caller that steps slices: begin counts the step (AdamW's bias
 * correction of every slice applied until the next begin is this step's); apply steps the
 * parameters [off, off + n) of the model's order, w and g pointing at the first of them, with
 * the moments and decay of those parameters. A step applied over slices that cover the model
 * is the step applied once over all of it, bit for bit. */
DT_API void dt_optim_begin(dt_optim *o);
DT_API void dt_optim_apply(dt_optim *o, size_t off, size_t n, float *w, const float *g, float lr);
DT_API void dt_optim_free(dt_optim *o);
/* torch.nn.utils.clip_grad_norm_ over one buffer: when its L2 norm exceeds max_norm, g is
 * scaled by max_norm / (norm + 1e-6). Returns the norm before clipping. */
DT_API float dt_clip_grad_norm(float *g, size_t n, float max_norm);

typedef enum { DT_SCHED_CONST, DT_SCHED_STEP, DT_SCHED_COSINE } dt_sched_kind;
typedef struct dt_schedule {
    dt_sched_kind kind;
    float base_lr;
    int step_every;         /* epochs, for DT_SCHED_STEP */
    float gamma;            /* factor, for DT_SCHED_STEP */
    float min_lr;           /* floor, for DT_SCHED_COSINE */
    /* counted in steps (dt_schedule_steps): a linear warm-up over the first `warmup` steps, and
     * cosine's decay ending at step `last` (by_step 0: cosine counts epochs) */
    int by_step;
    long warmup, last;
} dt_schedule;
/* Parses "const", "step:EVERY:GAMMA", "cosine" or "cosine:MIN_LR". */
DT_API dt_status dt_schedule_parse(const char *text, float base_lr, dt_schedule *out);
/* Counts the schedule in steps, as nanoGPT's get_lr: steps s < warmup take lr * (s + 1) /
 * (warmup + 1); then cosine decays from lr at step warmup to MIN_LR at step last (the run's
 * last, 0-based) and stays there. DT_ERR_ARG (naming --lr-warmup) when a warm-up does not end
 * before the last step. */
DT_API dt_status dt_schedule_steps(dt_schedule *s, long warmup, long last);
/* Learning rate at a fractional epoch position in [0, epochs] (by_step 0). */
DT_API float dt_schedule_lr(const dt_schedule *s, double epoch_pos, int epochs);
/* Learning rate of the run's step `step` (0-based), at epoch position epoch_pos: by step when
 * dt_schedule_steps was called, else dt_schedule_lr(s, epoch_pos, epochs). */
DT_API float dt_schedule_lr_at(const dt_schedule *s, long step, double epoch_pos, int epochs);

/* ---------------------------------------------------------------- MPI calls libdtrain intercepts
 * libdtrain defines these MPI functions itself, through the MPI profiling interface: each one
 * calls the MPI library's own (its PMPI_ twin) with the same arguments and returns its result.
 *
 *     MPI_Allreduce  MPI_Reduce  MPI_Bcast  MPI_Barrier  MPI_Gather  MPI_Allgather  MPI_Alltoall
 *     MPI_Send  MPI_Recv  MPI_Wait  MPI_Waitall  MPI_Comm_dup  MPI_Comm_create_group
 *     MPI_Win_create  MPI_Win_free  MPI_Win_lock_all  MPI_Win_unlock_all  MPI_Win_flush
 *     MPI_Win_flush_all  MPI_Finalize
 *
 * Why: these are the calls that can wait on another rank, and dtrain times every such wait
 * without a wrapper at each call site: the dtrain command's watchdog (--timeout) ends a rank
 * whose wait makes no progress with one line naming the call, instead of a hang, and a traced
 * run (dt_train_config.trace) draws each wait on the timeline's MPI lane.
 *
 * What a program linking libdtrain gets: its own calls of these functions go through the same
 * wrappers (libdtrain comes before the MPI library in the link, as `pkg-config --libs dtrain`
 * and the CMake package give it). They cost a few stores per call and change nothing else: a
 * program using the library has no watchdog (only the dtrain command starts one), and its own
 * calls appear on a timeline only while dt_train is tracing. One exception, for ranks that
 * share cores: once dt_train has started on a host with more ranks than cores (or with
 * DTRAIN_WAIT=yield), MPI_Send, MPI_Recv, MPI_Wait and MPI_Waitall are their non-blocking
 * twins polled to completion, yielding the core between polls (docs/cluster.md); the results
 * are the same. An MPI tool that wraps the same
 * functions (e.g. a profiler preloaded with LD_PRELOAD) comes first; dtrain's waits are then
 * not timed. */

/* ---------------------------------------------------------------- distributed training
 * One call trains a model with a scheme over the ranks of MPI_COMM_WORLD (MPI initialised
 * first, or a single process):
 *
 *     dt_train_config c;
 *     dt_train_config_defaults(&c);                // the dtrain command's defaults
 *     c.scheme.name = "eventgrad";                   // dt_scheme_names(): the schemes
 *     dt_scheme_config_set(&c.scheme, "threshold", "adaptive");   // a scheme's flag, as text
 *     c.epochs = 2; c.weights_out = "eg.weights"; c.log_path = "eg.jsonl";
 *     dt_train_result r;
 *     if (dt_train(&c, &r) != DT_OK) fprintf(stderr, "%s\n", dt_last_error());
 *     else printf("test accuracy %.2f%%\n", 100 * r.test_acc);
 *
 * Every rank calls dt_train with the same configuration; `mpiexec -n 4 ./prog` runs it on 4.
 * A complete program: examples/train_mpi.c. */
#define DT_SCHEME_MAX_SET 64

/* The scheme and the values of its flags as given (text, as on the command line; others take
 * the defaults the scheme declares). */
typedef struct dt_scheme_config {
    const char *name;             /* NULL: local */
    const char *compress;         /* none | fp16 | bf16 | int8 | topk:F (NULL: none) */
    int nset;
    struct { const char *name, *value; } set[DT_SCHEME_MAX_SET];
} dt_scheme_config;

/* Records a scheme's flag (--name VALUE, without the dashes; a switch takes "1"); the
 * strings are kept by pointer. DT_ERR_ARG if no scheme declares the flag (naming the nearest
 * one). Values are parsed by the scheme's declared flags (kind, range, words) when training
 * starts, into the scheme's typed options: a bad one is refused in one line naming the flag. */
DT_API dt_status dt_scheme_config_set(dt_scheme_config *a, const char *name, const char *value);
/* "local, allreduce, ps, ..." */
DT_API const char *dt_scheme_names(void);

/* What a run reports at an evaluation, for dt_train_config's callbacks. */
typedef struct dt_epoch_info {
    int epoch;               /* 1-based: the epoch that ended, or the one an evaluation between steps is in */
    long step;               /* steps taken per training rank */
    int between_steps;       /* an evaluation between epochs (--eval-every-steps): no training figures */
    double train_loss, train_acc; /* the epoch's mean over its batches, all ranks (0 between steps) */
    double test_acc, test_loss;
    double val_acc, val_loss; /* on the held-out examples (val); -1 without */
    double lr;               /* the learning rate at the evaluation */
    double train_s;          /* training seconds so far (evaluations and callbacks not counted) */
    double msgs_sent, msgs_pct, mb_sent; /* all ranks so far */
} dt_epoch_info;

/* Called on rank 0 (where the evaluations are), between training and the next step: its time
 * is not training time. The pointers are valid only during the call. */
typedef void (*dt_epoch_fn)(const dt_epoch_info *info, void *user);

typedef struct dt_train_config {
    const char *model;       /* name or spec file */
    const char *data;        /* mnist, fashion-mnist, cifar10 */
    const char *data_dir;    /* NULL: $DTRAIN_DATA/NAME or ./data/NAME */
    dt_scheme_config scheme; /* the scheme and its flags */
    const char *split;       /* random | class | equal | stripe */
    int epochs, batch;       /* batch per rank */
    long max_steps;          /* stop after this many steps per rank (0: no limit) */
    int eval_every;          /* evaluate the averaged model every N epochs (0: only at the end) */
    int eval_every_steps;    /* ... and every N steps in between (0: never) */
    float target_acc;        /* stop at the first evaluation reaching this accuracy (0: none) */
    float target_loss;       /* ... or this loss or less (0: none; not with target_acc) */
    int target_on_val;       /* ... on the validation set (needs val > 0), not the test set: so that a
                              * search tuned by time to accuracy never looks at the test set */
    float lr, momentum, weight_decay;
    int nesterov;
    int optim;               /* dt_optim_kind: sgd (0) or adamw */
    double beta1, beta2, eps; /* adamw */
    int decay_on;            /* dt_decay_on: the tensors weight_decay applies to */
    float clip;              /* the gradient's global norm clipped to this before each step (0: never) */
    long lr_warmup;          /* steps of linear warm-up (0: none); the schedule then counts steps */
    int precision;           /* dt_precision: fp32 (0) or bf16 mixed precision */
    const char *plan;        /* the kernel plan: NULL or "off" (the rules), "auto" (cached, made once), a file
                              * (dtrain tune) */
    const char *schedule;    /* const | step:EVERY:GAMMA | cosine[:MIN_LR] (cosine counts steps with lr_warmup,
                              * max_steps or images, else epochs) */
    uint64_t seed;
    int train_limit, test_limit; /* 0: all examples */
    int val;                 /* hold out the last N training examples (after train_limit) as a validation
                              * set, evaluated with the test set (0: none) */
    long images;             /* train until N images were seen by all training ranks together: sets
                              * max_steps = ceil(N / (batch x training ranks)) and the epochs it takes
                              * (the last one partial); then epochs is not used, max_steps must be 0 */
    int progress;            /* rank 0: a "step" log line (and a console line when not live) every N steps */
    int augment;             /* -1: the dataset's default */
    const char *weights_out; /* final weights, NULL: none */
    const char *log_path;    /* JSON lines, NULL: none */
    const char *checkpoint;  /* written after every epoch, NULL: none (N > 1: a manifest, its parts beside it); a
                              * file already there must be the checkpoint resume names, or the run is refused */
    const char *resume;      /* checkpoint to continue from, NULL: none */
    const char *trace;       /* timeline of every rank (Chrome trace-event JSON), NULL: none */
    const char *trace_steps; /* "A:B": steps A..B-1 of each rank traced (NULL: 10:60) */
    int quiet;               /* no progress output */
    /* set by a supervisor that restarted the job (dtrain run --max-restarts): reported in the
     * summary, not used for training */
    int restarts;            /* restarts before this attempt */
    long redone_steps;       /* steps trained again because a lost attempt's were not saved */
    /* for the log's config line only: the command as the user typed it (NULL: not known) and
     * the run folder (dtrain train --run-dir; NULL: none) */
    char *const *command;
    int ncommand;
    const char *run_dir;
    /* callbacks (NULL: none), with user passed back: on_epoch after each epoch's evaluation
     * (every eval_every epochs and the last), on_eval after every evaluation (an epoch's, and
     * those between steps, eval_every_steps) */
    dt_epoch_fn on_epoch, on_eval;
    void *user;
} dt_train_config;

/* The dtrain command's defaults: cnn1 on mnist, local, 10 epochs, batch 64, lr 0.05, seed 1,
 * random split, evaluation every epoch. */
DT_API void dt_train_config_defaults(dt_train_config *c);

typedef struct dt_train_result {
    double test_acc, test_loss;  /* of the final (agreed) model */
    double val_acc, val_loss;    /* on the held-out examples (config val); -1 without */
    double time_to_target_s;     /* training seconds to --target-acc (evaluation not counted); -1: not reached */
    long steps;                  /* per training rank */
    double msgs_sent, mb_sent, msgs_pct; /* all ranks */
} dt_train_result;

/* Collective: trains as configured and fills *out on every rank. An error at set-up is
 * agreed between the ranks (each returns it; the message is on the ranks that met it). */
DT_API dt_status dt_train(const dt_train_config *c, dt_train_result *out);

/* ---------------------------------------------------------------- the dtrain command
 * The whole dtrain command (train, run, eval, info, bench, diff, sweep, version) as a function:
 * the dtrain executable is `int main(int argc, char **argv) { return dt_main(argc, argv); }`.
 * A program that registers its own schemes first (dt_scheme_register, dtrain/scheme.h) and
 * then returns dt_main(argc, argv) is dtrain with them: every flag, the log, checkpoints, and
 * `run` with its supervisor, which starts the ranks from this same executable. Returns the
 * exit status (0, 2 for an error, ...). */
DT_API int dt_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_H */
