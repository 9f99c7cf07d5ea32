/* fedavg (local SGD / federated averaging): every rank trains on its shard for K steps
 * (--local-steps K, or --local-epochs E = E epochs of steps), then the models are averaged
 * with aggregation weights: average 1/N; samples proportional to the shard size; loss
 * proportional to the rank's mean training loss over the round (worse ranks count more).
 * One allreduce carries w_r*x_r and w_r together, so the weights need no extra message.
 *
 * --compress C (not none): the models are averaged through rank 0 with parameter payloads
 * against copies in both directions (paramavg.h), w_r riding in the uplink message; a round
 * is then a gather and a broadcast (N-1 messages at rank 0, 1 elsewhere). */
#include <stdlib.h>
#include <string.h>

#include "algorithms/paramavg.h"
#include "algorithms/strategy.h"
#include "comm/codec.h"
#include "trainer/trainer.h"

typedef enum { AGG_AVERAGE, AGG_SAMPLES, AGG_LOSS } agg_kind;

typedef struct {
    agg_kind agg;
    long every;       /* K */
    long since;       /* steps since the last averaging */
    float *buf;       /* [w*x | w*state | w] */
    dt_codec_spec spec;
    dt_param_avg *avg; /* --compress */
    double round[3];  /* checkpoints: since, round_loss, round_batches */
} fedavg_impl;

/* One allreduce of [w*x | w*state | w]: the weighted mean without an extra message for w. */
static dt_status allreduce_average(dt_trainer *t, fedavg_impl *f, float w) {
    const size_t np = dt_model_num_params(t->model), ns = dt_model_num_state(t->model);
    float *x = dt_model_params(t->model), *state = dt_model_state(t->model);
    for (size_t i = 0; i < np; i++) f->buf[i] = w * x[i];
    for (size_t i = 0; i < ns; i++) f->buf[np + i] = w * state[i];
    f->buf[np + ns] = w;
    dt_status st = dt_allreduce_sum(&t->comm, f->buf, np + ns + 1);
    if (st != DT_OK) return st;
    const float inv = 1.0f / f->buf[np + ns];
    for (size_t i = 0; i < np; i++) x[i] = f->buf[i] * inv;
    for (size_t i = 0; i < ns; i++) state[i] = f->buf[np + i] * inv;
    return DT_OK;
}

static dt_status fedavg_average(dt_trainer *t, fedavg_impl *f) {
    float w = 1.0f;
    if (f->agg == AGG_SAMPLES) w = (float)t->shard_n;
    else if (f->agg == AGG_LOSS) w = t->round_batches ? (float)(t->round_loss / t->round_batches) : 1.0f;
    dt_status st = f->avg ? dt_param_avg_run(f->avg, &t->comm, dt_model_params(t->model), dt_model_state(t->model), w)
                          : allreduce_average(t, f, w);
    t->round_loss = 0;
    t->round_batches = 0;
    f->since = 0;
    return st;
}

static dt_status fedavg_start(dt_strategy *s, dt_trainer *t) {
    fedavg_impl *f = s->impl;
    const dt_algo_options *o = s->opt;
    if (o->local_steps > 0 && o->local_epochs > 0)
        return dt_fail(DT_ERR_ARG, "--local-steps and --local-epochs: give one of them");
    f->every = o->local_steps > 0 ? o->local_steps : (long)(o->local_epochs > 0 ? o->local_epochs : 1) * t->steps_per_epoch;
    if (f->spec.kind != DT_CODEC_NONE) {
        dt_status st = dt_param_avg_create(&f->spec, &t->comm, dt_model_params(t->model),
                                           dt_model_num_params(t->model), dt_model_num_state(t->model), &f->avg);
        if (st != DT_OK) return st;
    } else {
        const size_t n = dt_model_num_params(t->model) + dt_model_num_state(t->model) + 1;
        f->buf = malloc(n * sizeof(float));
        if (!f->buf) return dt_fail(DT_ERR_NOMEM, "out of memory");
    }
    t->round_loss = 0;
    t->round_batches = 0;
    return DT_OK;
}

/* messages of one averaging: what averaging at every step would send per step */
static uint64_t round_msgs(const dt_trainer *t, const fedavg_impl *f) {
    if (f->avg) return dt_param_avg_round_msgs(&t->comm);
    return t->comm.size > 1 ? 2 * (uint64_t)(t->comm.size - 1) : 0;
}

static dt_status fedavg_end_step(dt_strategy *s, dt_trainer *t) {
    fedavg_impl *f = s->impl;
    t->comm.c.baseline_msgs += round_msgs(t, f);
    if (++f->since < f->every) return DT_OK;
    return fedavg_average(t, f);
}

/* the last round may be short: average what there is */
static dt_status fedavg_finish(dt_strategy *s, dt_trainer *t) {
    fedavg_impl *f = s->impl;
    return f->since > 0 ? fedavg_average(t, f) : DT_OK;
}

/* checkpoints: where the round stands (steps since the last averaging, the loss summed for
 * --aggregate loss) and, with --compress, the copies */
static dt_status fedavg_save(dt_strategy *s, dt_trainer *t, dt_records *out) {
    fedavg_impl *f = s->impl;
    f->round[0] = (double)f->since;
    f->round[1] = t->round_loss;
    f->round[2] = (double)t->round_batches;
    dt_status st = dt_records_add_raw(out, "fedavg:round", f->round, sizeof f->round);
    if (st == DT_OK && f->avg) st = dt_param_avg_save(f->avg, &t->comm, "fedavg", out);
    return st;
}

static dt_status fedavg_load(dt_strategy *s, dt_trainer *t, const dt_tfile *tf, const char *path) {
    fedavg_impl *f = s->impl;
    dt_status st = dt_tfile_take(tf, path, "fedavg:round", f->round, sizeof f->round);
    if (st != DT_OK) return st;
    f->since = (long)f->round[0];
    t->round_loss = f->round[1];
    t->round_batches = (long)f->round[2];
    return f->avg ? dt_param_avg_load(f->avg, &t->comm, "fedavg", tf, path) : DT_OK;
}

static void fedavg_destroy(dt_strategy *s) {
    fedavg_impl *f = s->impl;
    if (f) {
        free(f->buf);
        dt_param_avg_free(f->avg);
    }
    free(f);
}

dt_status dt_fedavg_create(dt_strategy *s) {
    const char *a = s->opt->aggregate ? s->opt->aggregate : "average";
    agg_kind k;
    if (!strcmp(a, "average")) k = AGG_AVERAGE;
    else if (!strcmp(a, "samples")) k = AGG_SAMPLES;
    else if (!strcmp(a, "loss")) k = AGG_LOSS;
    else return dt_fail(DT_ERR_ARG, "--aggregate %s: expected average, samples or loss", a);
    fedavg_impl *f = calloc(1, sizeof *f);
    if (!f) return dt_fail(DT_ERR_NOMEM, "out of memory");
    f->agg = k;
    s->impl = f;
    s->destroy = fedavg_destroy;
    dt_status st = dt_codec_parse(s->opt->compress, &f->spec);
    if (st != DT_OK) return st;
    s->decentralized = 1;
    s->start = fedavg_start;
    s->end_step = fedavg_end_step;
    s->finish = fedavg_finish;
    s->save_state = fedavg_save;
    s->load_state = fedavg_load;
    return DT_OK;
}
