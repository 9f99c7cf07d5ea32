/* ps: a synchronous parameter server on rank 0 (which also trains).
 * grad:   the ranks' gradients are summed on rank 0, averaged, one optimiser step is applied
 *         there, and the new weights are broadcast (gather + broadcast);
 * weight: every rank applies its own gradient, rank 0 averages the weights (and batch-norm
 *         statistics) and broadcasts them. Both are deterministic; grad equals allreduce.
 *
 * --compress C (not none):
 * grad:   every rank's gradient (rank 0's too, so all ranks are treated alike) is a payload
 *         with error feedback, gathered as bytes on rank 0, which decodes them and adds them in
 *         rank order, averages and steps its own fp32 master weights m. The weights go back as
 *         a parameter payload: every rank's model IS the copy c of m that all ranks hold; rank 0
 *         broadcasts encode(m - c) and every rank (rank 0 too) does c += decode(...). So the
 *         ranks' models stay identical bit for bit, and what topk does not send stays owed.
 *         At start rank 0's model is broadcast once, uncounted (set-up), so every copy agrees.
 * weight: both directions are parameter payloads against copies (paramavg.h).
 * The codec's time counts as communication. */
#include <stdlib.h>
#include <string.h>

#include "algorithms/paramavg.h"
#include "algorithms/strategy.h"
#include "comm/codec.h"
#include "trainer/trainer.h"

typedef struct {
    int weight_mode;
    float *sum;
    size_t cap;
    /* --compress */
    dt_codec_spec spec;
    dt_codec *codec;
    float *residual, *master;   /* grad: error feedback; rank 0's fp32 weights */
    uint8_t *up, *ups, *down;   /* grad: B, N*B (rank 0), B bytes */
    size_t bytes;
    dt_param_avg *avg;          /* weight */
} ps_impl;

static dt_status reserve(ps_impl *p, size_t n) {
    if (n <= p->cap) return DT_OK;
    float *nb = realloc(p->sum, n * sizeof(float));
    if (!nb) return dt_fail(DT_ERR_NOMEM, "out of memory");
    p->sum = nb;
    p->cap = n;
    return DT_OK;
}

/* grad mode: rank 0 averages the gradients and steps; everyone receives the weights */
static dt_status ps_grad_step(dt_strategy *s, dt_trainer *t, float lr) {
    ps_impl *p = s->impl;
    const size_t n = dt_model_num_params(t->model);
    uint64_t before = t->comm.c.msgs_sent;
    dt_status st = reserve(p, n);
    if (st == DT_OK) st = dt_reduce_sum(&t->comm, dt_model_grads(t->model), p->sum, n);
    if (st != DT_OK) return st;
    if (t->comm.rank == 0) {
        const float inv = 1.0f / (float)t->comm.size;
        for (size_t i = 0; i < n; i++) p->sum[i] *= inv;
        dt_sgd_step(&t->opt, dt_model_params(t->model), p->sum, lr);
    }
    st = dt_bcast(&t->comm, dt_model_params(t->model), n, 0);
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before;
    return st;
}

/* weight mode: after the local steps, rank 0 averages weights and state and broadcasts */
static dt_status ps_weight_end_step(dt_strategy *s, dt_trainer *t) {
    ps_impl *p = s->impl;
    const size_t np = dt_model_num_params(t->model), ns = dt_model_num_state(t->model);
    uint64_t before = t->comm.c.msgs_sent;
    float *x = dt_model_params(t->model), *state = dt_model_state(t->model);
    dt_status st = reserve(p, np > ns ? np : ns);
    const float inv = 1.0f / (float)t->comm.size;
    if (st == DT_OK) st = dt_reduce_sum(&t->comm, x, p->sum, np);
    if (st == DT_OK && t->comm.rank == 0)
        for (size_t i = 0; i < np; i++) x[i] = p->sum[i] * inv;
    if (st == DT_OK) st = dt_bcast(&t->comm, x, np, 0);
    if (st == DT_OK && ns) {
        st = dt_reduce_sum(&t->comm, state, p->sum, ns);
        if (st == DT_OK && t->comm.rank == 0)
            for (size_t i = 0; i < ns; i++) state[i] = p->sum[i] * inv;
        if (st == DT_OK) st = dt_bcast(&t->comm, state, ns, 0);
    }
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before;
    return st;
}

/* ------------------------------------------------------------------ --compress */

static dt_status ps_compressed_start(dt_strategy *s, dt_trainer *t) {
    ps_impl *p = s->impl;
    const size_t np = dt_model_num_params(t->model), ns = dt_model_num_state(t->model);
    float *x = dt_model_params(t->model);
    if (p->weight_mode) return dt_param_avg_create(&p->spec, &t->comm, x, np, ns, &p->avg);
    dt_status st = dt_codec_create(&p->spec, np, &p->codec);
    if (st != DT_OK) return st;
    const size_t n1 = np ? np : 1, N = (size_t)t->comm.size;
    p->bytes = dt_codec_bytes(&p->spec, np);
    p->residual = calloc(n1, sizeof(float));
    p->up = malloc(p->bytes + 1);
    p->down = malloc(p->bytes + 1);
    int ok = p->residual && p->up && p->down;
    if (t->comm.rank == 0) {
        p->master = malloc(n1 * sizeof(float));
        p->ups = malloc(N * p->bytes + 1);
        ok = ok && p->master && p->ups && reserve(p, n1) == DT_OK;
    }
    if (!ok) return dt_fail(DT_ERR_NOMEM, "out of memory (compression buffers)");
    /* every rank's model is the copy of rank 0's master: start them equal (set-up, not counted) */
    st = dt_bcast_setup(&t->comm, x, np, 0, "MPI_Bcast (starting weights)");
    if (st != DT_OK) return st;
    if (t->comm.rank == 0) memcpy(p->master, x, np * sizeof(float));
    return DT_OK;
}

static dt_status ps_grad_compressed_step(dt_strategy *s, dt_trainer *t, float lr) {
    ps_impl *p = s->impl;
    dt_comm *c = &t->comm;
    const size_t n = dt_model_num_params(t->model);
    float *x = dt_model_params(t->model);
    const uint64_t before = c->c.msgs_sent;
    const double t0 = dt_now(), comm0 = c->c.t_comm;
    dt_codec_encode_ef(p->codec, dt_model_grads(t->model), p->residual, n, p->up);
    dt_status st = dt_gather_bytes(c, p->up, p->ups, p->bytes);
    if (st == DT_OK && c->rank == 0) {
        memset(p->sum, 0, n * sizeof(float));
        for (int r = 0; r < c->size; r++) dt_codec_decode_add(p->codec, p->ups + (size_t)r * p->bytes, n, p->sum);
        const float inv = 1.0f / (float)c->size;
        for (size_t i = 0; i < n; i++) p->sum[i] *= inv;
        dt_sgd_step(&t->opt, p->master, p->sum, lr);
        dt_codec_encode_delta(p->codec, p->master, x, n, p->down); /* rank 0's model: the copy */
    }
    if (st == DT_OK) st = dt_bcast_bytes(c, p->down, p->bytes, 0);
    if (st == DT_OK && c->rank != 0) dt_codec_decode_add(p->codec, p->down, n, x);
    c->c.t_comm = comm0 + (dt_now() - t0);
    c->c.baseline_msgs += c->c.msgs_sent - before;
    return st;
}

static dt_status ps_weight_compressed_end_step(dt_strategy *s, dt_trainer *t) {
    ps_impl *p = s->impl;
    const uint64_t before = t->comm.c.msgs_sent;
    dt_status st = dt_param_avg_run(p->avg, &t->comm, dt_model_params(t->model), dt_model_state(t->model), 1.0f);
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before;
    return st;
}

/* checkpoints (--compress): grad keeps the residual and, on rank 0, the fp32 master weights
 * (the model is only their copy); weight keeps the copies of paramavg.h */
static dt_status ps_save(dt_strategy *s, dt_trainer *t, dt_records *out) {
    ps_impl *p = s->impl;
    const size_t n = dt_model_num_params(t->model);
    if (p->weight_mode) return dt_param_avg_save(p->avg, &t->comm, "ps", out);
    dt_status st = dt_records_add(out, "ps:residual", p->residual, n);
    if (st == DT_OK && t->comm.rank == 0) st = dt_records_add(out, "ps:master", p->master, n);
    return st;
}

static dt_status ps_load(dt_strategy *s, dt_trainer *t, const dt_tfile *f, const char *path) {
    ps_impl *p = s->impl;
    const size_t bytes = dt_model_num_params(t->model) * sizeof(float);
    if (p->weight_mode) return dt_param_avg_load(p->avg, &t->comm, "ps", f, path);
    dt_status st = dt_tfile_take(f, path, "ps:residual", p->residual, bytes);
    if (st == DT_OK && t->comm.rank == 0) st = dt_tfile_take(f, path, "ps:master", p->master, bytes);
    return st;
}

static void ps_destroy(dt_strategy *s) {
    ps_impl *p = s->impl;
    if (p) {
        free(p->sum);
        dt_codec_free(p->codec);
        free(p->residual); free(p->master);
        free(p->up); free(p->ups); free(p->down);
        dt_param_avg_free(p->avg);
    }
    free(p);
}

dt_status dt_ps_create(dt_strategy *s) {
    const char *mode = s->opt->ps_mode ? s->opt->ps_mode : "grad";
    if (strcmp(mode, "grad") && strcmp(mode, "weight"))
        return dt_fail(DT_ERR_ARG, "--ps-mode %s: expected grad or weight", mode);
    ps_impl *p = calloc(1, sizeof *p);
    if (!p) return dt_fail(DT_ERR_NOMEM, "out of memory");
    p->weight_mode = !strcmp(mode, "weight");
    s->impl = p;
    s->destroy = ps_destroy;
    dt_status st = dt_codec_parse(s->opt->compress, &p->spec);
    if (st != DT_OK) return st;
    if (p->spec.kind != DT_CODEC_NONE) {
        s->start = ps_compressed_start;
        s->save_state = ps_save;
        s->load_state = ps_load;
        if (p->weight_mode) s->end_step = ps_weight_compressed_end_step;
        else s->optimizer_step = ps_grad_compressed_step;
        return DT_OK;
    }
    if (p->weight_mode) s->end_step = ps_weight_end_step;
    else s->optimizer_step = ps_grad_step;
    return DT_OK;
}
