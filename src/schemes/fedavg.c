/* fedavg (local SGD / federated averaging): every rank trains on its shard for K steps
 * (--local-steps K, or --local-epochs E = E epochs of steps), then the models are averaged
 * with aggregation weights: average 1/N; samples proportional to the shard size; loss
 * proportional to the rank's mean training loss over the round (worse ranks count more).
 * One allreduce carries w_r*x_r and w_r together, so the weights need no extra message.
 *
 * --compress C (not none): the models are averaged through rank 0 with parameter payloads
 * against copies in both directions (paramavg.h), w_r riding in the uplink message; a round
 * is then a gather and a broadcast (N-1 messages at rank 0, 1 elsewhere).
 *
 * An outer optimizer (DiLoCo, Douillard et al. 2023): --outer-lr, --outer-momentum,
 * --outer-nesterov. Every rank keeps the model of the last round (the master, identical on
 * every rank); the round's average is not taken as the new model but gives the pseudo-
 * gradient d = master - average, and the master takes an SGD step on d with momentum
 * (Nesterov's with --outer-nesterov): v = mu v + d, master -= lr (nesterov ? d + mu v : v).
 * Every rank starts the next round from the master. Outer lr 1 without momentum is the plain
 * average, and is taken as it (bit for bit: no master is kept). Batch-norm statistics are
 * averaged as before.
 * With an outer optimizer, --compress C compresses the pseudo-gradient, as INTELLECT-1 and
 * Streaming DiLoCo do: every rank sends w_r/W (master - x_r), encoded with error feedback,
 * and the ranks sum them (comm/encoded_sum.h: fp16, bf16 added by MPI in 16 bits; int8, topk
 * by a reduce-scatter that re-encodes): about 2(N-1)/N of a payload per rank, no rank 0 in
 * the middle. W = sum w_r and the averaged batch-norm state go first, in fp32 (ns+1 values).
 *
 * --scaffold: SCAFFOLD's control variates correct every local gradient (scaffold.h); the
 * ranks' variates are averaged in the models' allreduce, [w*x | w*state | w | w*c_i]. */
#include <stdlib.h>
#include <string.h>

#include "comm/encoded_sum.h"
#include "core/alloc.h"
#include "schemes/outer.h"
#include "schemes/paramavg.h"
#include "schemes/registry.h"
#include "schemes/scaffold.h"

typedef struct {
    dt_param_weighting agg;
    long every;        /* K */
    long since;        /* steps since the last averaging */
    double round_loss; /* sum of the round's batch losses (--aggregate loss) */
    long round_batches;
    double saved[3];   /* checkpoints: since, round_loss, round_batches (records keep pointers) */
    float *buf;        /* [w*x | w*state | w | w*c_i with --scaffold] */
    dt_param_avg *avg; /* --compress */
    dt_outer *outer;   /* the outer optimizer (DiLoCo); NULL: the plain average */
    dt_encoded_sum *pseudo; /* --compress with an outer optimizer: the pseudo-gradient's sum */
    dt_scaffold *scaffold;  /* --scaffold */
} fedavg_impl;

typedef struct {
    long local_steps;
    int local_epochs, local_epochs_given;
    dt_param_weighting aggregate;
    dt_outer_opts outer;
    int scaffold;
} fedavg_opts;

static const dt_flag fedavg_flags[] = {
    {"local-steps", DT_AT_INT(fedavg_opts, local_steps), .def = "0", .min = 0, .max = 1e9,
     .help = "steps between averagings (0: --local-epochs)",
     .reach = DT_REACH_EVERY_STEPS, .unreached = "the ranks train alone and are averaged only at the end"},
    {"local-epochs", DT_AT_INT(fedavg_opts, local_epochs), DT_GIVEN(fedavg_opts, local_epochs_given), .def = "1",
     .min = 1, .max = 1e6, .help = "epochs between averagings"},
    {"aggregate", DT_AT_CHOICE(fedavg_opts, aggregate, dt_param_weighting_words), .def = "average",
     .help = "average | samples | loss (weights of the ranks' models)"},
    DT_OUTER_FLAGS(fedavg_opts, outer),
    {"scaffold", DT_AT_SWITCH(fedavg_opts, scaffold), .def = "0",
     .help = "SCAFFOLD's control variates: each local gradient corrected by the mean's minus the rank's own "
             "(twice the bytes a round)"},
};

/* One allreduce of [w*x | w*state | w]: the weighted mean without an extra message for w
 * (--scaffold: and the rank's control variate, w*c_i, after them). */
static dt_status allreduce_average(dt_step_ctx *c, fedavg_impl *f, float w) {
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model);
    float *x = dt_model_params(c->model), *state = dt_model_state(c->model);
    for (size_t i = 0; i < np; i++) f->buf[i] = w * x[i];
    for (size_t i = 0; i < ns; i++) f->buf[np + i] = w * state[i];
    f->buf[np + ns] = w;
    if (f->scaffold) dt_scaffold_round_end(f->scaffold, w, f->buf + np + ns + 1);
    dt_status st = dt_allreduce_sum(c->comm, f->buf, np + ns + 1 + (f->scaffold ? np : 0));
    if (st != DT_OK) return st;
    const float inv = 1.0f / f->buf[np + ns];
    for (size_t i = 0; i < np; i++) x[i] = f->buf[i] * inv;
    for (size_t i = 0; i < ns; i++) state[i] = f->buf[np + i] * inv;
    return DT_OK;
}

/* --compress with an outer optimizer: [w*state | w] in fp32, then the sum of the encoded
 * w/W (master - x): the pseudo-gradient itself */
static dt_status pseudo_gradient_sum(dt_step_ctx *c, fedavg_impl *f, float w) {
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model);
    float *x = dt_model_params(c->model), *state = dt_model_state(c->model);
    for (size_t i = 0; i < ns; i++) f->buf[i] = w * state[i];
    f->buf[ns] = w;
    dt_status st = dt_allreduce_sum(c->comm, f->buf, ns + 1);
    if (st != DT_OK) return st;
    const float inv = 1.0f / f->buf[ns], share = w * inv;
    for (size_t i = 0; i < ns; i++) state[i] = f->buf[i] * inv;
    dt_outer_pseudo_gradient(f->outer, x);
    for (size_t i = 0; i < np; i++) x[i] *= share;
    return dt_encoded_sum_run(f->pseudo, c->comm, x);
}

static dt_status fedavg_average(dt_step_ctx *c, fedavg_impl *f) {
    const float w = dt_param_weight(f->agg, c->run.shard_n, f->round_loss, f->round_batches);
    float *x = dt_model_params(c->model);
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model);
    dt_status st;
    if (f->pseudo) st = pseudo_gradient_sum(c, f, w);
    else {
        st = f->avg ? dt_param_avg_run(f->avg, c->comm, x, dt_model_state(c->model), w) : allreduce_average(c, f, w);
        if (st == DT_OK && f->outer) dt_outer_pseudo_gradient(f->outer, x);
    }
    if (st == DT_OK && f->outer) dt_outer_step(f->outer, x);
    if (st == DT_OK && f->scaffold)
        dt_scaffold_round_start(f->scaffold, f->buf + np + ns + 1, 1.0f / f->buf[np + ns]);
    f->round_loss = 0;
    f->round_batches = 0;
    f->since = 0;
    return st;
}

static dt_status fedavg_start(dt_scheme *s, dt_step_ctx *c) {
    fedavg_impl *f = s->impl;
    const fedavg_opts *o = s->opts;
    f->every = o->local_steps > 0 ? o->local_steps : (long)o->local_epochs * c->run.steps_per_epoch;
    const size_t np = dt_model_num_params(c->model);
    /* the master starts at the starting model, the same on every rank */
    dt_status st = dt_outer_create(&o->outer, dt_model_params(c->model), np, &f->outer);
    if (st != DT_OK) return st;
    if (f->outer) {
        if (s->codec.kind != DT_CODEC_NONE) {
            const size_t ns = dt_model_num_state(c->model);
            DT_TRY(dt_malloc(f->buf, ns + 1, "fedavg's average of %zu values", ns + 1));
            return dt_encoded_sum_create(&s->codec, c->comm, np, &f->pseudo);
        }
    }
    if (s->codec.kind != DT_CODEC_NONE)
        return dt_param_avg_create(&s->codec, c->comm, dt_model_params(c->model), dt_model_num_params(c->model),
                                   dt_model_num_state(c->model), &f->avg);
    const size_t n = np + dt_model_num_state(c->model) + 1 + (o->scaffold ? np : 0);
    DT_TRY(dt_malloc(f->buf, n, "fedavg's average of %zu values", n));
    return o->scaffold ? dt_scaffold_create(np, &f->scaffold) : DT_OK;
}

static dt_status fedavg_after_backward(dt_scheme *s, dt_step_ctx *c) {
    fedavg_impl *f = s->impl;
    if (f->scaffold) dt_scaffold_correct(f->scaffold, dt_model_grads(c->model));
    return DT_OK;
}

/* messages of one averaging: what averaging at every step would send per step */
static uint64_t round_msgs(const dt_step_ctx *c, const fedavg_impl *f) {
    if (f->avg) return dt_param_avg_round_msgs(c->comm);
    return c->comm->size > 1 ? 2 * (uint64_t)(c->comm->size - 1) : 0;
}

static dt_status fedavg_end_step(dt_scheme *s, dt_step_ctx *c) {
    fedavg_impl *f = s->impl;
    f->round_loss += c->loss;
    f->round_batches++;
    c->comm->c.baseline_msgs += round_msgs(c, f);
    if (++f->since < f->every) return DT_OK;
    return fedavg_average(c, f);
}

/* the last round may be short: average what there is */
static dt_status fedavg_finish(dt_scheme *s, dt_step_ctx *c) {
    fedavg_impl *f = s->impl;
    return f->since > 0 ? fedavg_average(c, f) : DT_OK;
}

/* checkpoints: where the round stands (steps since the last averaging, the loss summed for
 * --aggregate loss), the outer optimizer's state and, with --compress, the copies or the
 * pseudo-gradient's error feedback */
static dt_status fedavg_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    fedavg_impl *f = s->impl;
    f->saved[0] = (double)f->since;
    f->saved[1] = f->round_loss;
    f->saved[2] = (double)f->round_batches;
    dt_status st = dt_records_add_raw(out, "round", f->saved, sizeof f->saved);
    if (st == DT_OK) st = dt_outer_save(f->outer, &((const fedavg_opts *)s->opts)->outer, out);
    if (st == DT_OK && f->avg) st = dt_param_avg_save(f->avg, c->comm, out);
    if (st == DT_OK && f->pseudo) st = dt_encoded_sum_save(f->pseudo, "pseudo_gradient", out);
    if (st == DT_OK) st = dt_scaffold_save(f->scaffold, out);
    return st;
}

static dt_status fedavg_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *tf, const char *path) {
    fedavg_impl *f = s->impl;
    double round[3];
    dt_status st = dt_outer_load(f->outer, &((const fedavg_opts *)s->opts)->outer, "fedavg", tf, path);
    if (st == DT_OK) st = dt_tfile_take(tf, path, "round", round, sizeof round);
    if (st != DT_OK) return st;
    /* numbers from a file are checked before the cast (a NaN or 1e300 cast to long is
     * undefined), even under a valid checksum */
    if (!(round[0] >= 0 && round[0] <= 1e15) || !(round[2] >= 0 && round[2] <= 1e15))
        return dt_fail(DT_ERR_FORMAT, "%s: fedavg:round holds %g steps and %g batches, expected counts >= 0 (a corrupt "
                       "or forged checkpoint)", path, round[0], round[2]);
    f->since = (long)round[0];
    f->round_loss = round[1];
    f->round_batches = (long)round[2];
    if ((st = dt_scaffold_load(f->scaffold, tf, path)) != DT_OK) return st;
    if (f->pseudo) return dt_encoded_sum_load(f->pseudo, "pseudo_gradient", tf, path);
    return f->avg ? dt_param_avg_load(f->avg, c->comm, tf, path) : DT_OK;
}

static void fedavg_destroy(dt_scheme *s) {
    fedavg_impl *f = s->impl;
    dt_outer_free(f->outer);
    dt_scaffold_free(f->scaffold);
    dt_param_avg_free(f->avg);
    dt_encoded_sum_free(f->pseudo);
    dt_free_all(f->buf, f);
}

static const dt_scheme_ops fedavg_ops = {
    .start = fedavg_start,
    .after_backward = fedavg_after_backward,
    .end_step = fedavg_end_step,
    .finish = fedavg_finish,
    .save_state = fedavg_save,
    .load_state = fedavg_load,
    .destroy = fedavg_destroy,
};

static dt_status fedavg_create(dt_scheme *s) {
    const fedavg_opts *o = s->opts;
    if (o->local_steps > 0 && o->local_epochs_given)
        return dt_fail(DT_ERR_ARG, "--local-steps and --local-epochs: give one of them");
    if (o->scaffold && s->codec.kind != DT_CODEC_NONE)
        return dt_fail(DT_ERR_ARG, "--scaffold with --compress: the control variates travel beside the models in fp32, "
                       "uncompressed; leave out one of them");
    fedavg_impl *f;
    /* own baseline: it sends less than every tensor every step */
    DT_TRY(dt_scheme_new(s, f, &fedavg_ops, DT_SCHEME_DECENTRALIZED | DT_SCHEME_OWN_BASELINE));
    f->agg = o->aggregate;
    return DT_OK;
}

const dt_scheme_def dt_scheme_fedavg = {
    .name = "fedavg", .summary = "local SGD for K steps or E epochs, then average the models (weighted)",
    DT_SCHEME_FLAGS(fedavg_flags, fedavg_opts), .compress = DT_COMPRESS_YES, .create = fedavg_create, .replayable = 1,
};
