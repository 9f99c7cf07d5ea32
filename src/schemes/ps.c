/* ps: a synchronous parameter server on rank 0 (which also trains).
 * grad:   the ranks' gradients are summed on rank 0, averaged, one optimiser step is applied
 *         there, and the new weights are broadcast (gather + broadcast);
 * weight: every rank applies its own gradient, rank 0 averages the weights (and batch-norm
 *         statistics) and broadcasts them. Both are deterministic; grad equals allreduce.
 *
 * --compress C (not none):
 * grad:   every rank's gradient (rank 0's too, so all ranks are treated alike) is a payload
 *         with error feedback (payload.h), gathered as bytes on rank 0, which takes their mean
 *         and steps its own fp32 master weights m. The weights go back as a parameter payload:
 *         every rank's model IS the copy c of m that all ranks hold; rank 0 broadcasts
 *         encode(m - c) and every rank (rank 0 too) does c += decode(...). So the ranks'
 *         models stay identical bit for bit, and what topk does not send stays owed.
 *         At start rank 0's model is broadcast once, uncounted (set-up), so every copy agrees.
 * weight: both directions are parameter payloads against copies (paramavg.h).
 * The codec's time counts as communication. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "schemes/paramavg.h"
#include "schemes/payload.h"
#include "schemes/registry.h"

typedef struct {
    int weight_mode;
    float *sum;                 /* rank 0: the summed (grad) or averaged values */
    /* --compress */
    dt_grad_payload up;         /* grad: this rank's gradient payload */
    float *master;              /* grad: rank 0's fp32 weights */
    uint8_t *ups, *down;        /* grad: N payloads (rank 0), the weights' payload */
    dt_param_avg *avg;          /* weight */
} ps_impl;

typedef struct {
    int weight_mode; /* --ps-mode: 0 grad, 1 weight */
} ps_opts;

static const char *const ps_modes[] = {"grad", "weight", NULL};

static const dt_flag ps_flags[] = {
    {"ps-mode", DT_AT_CHOICE(ps_opts, weight_mode, ps_modes), .def = "grad",
     .help = "grad (average gradients, step on rank 0) | weight (average weights)"},
};

/* grad mode: rank 0 averages the gradients and steps; everyone receives the weights */
static dt_status grad_step(ps_impl *p, dt_step_ctx *c) {
    const size_t n = dt_model_num_params(c->model);
    dt_status st = dt_reduce_sum(c->comm, dt_model_grads(c->model), p->sum, n);
    if (st != DT_OK) return st;
    if (c->comm->rank == 0) {
        const float inv = 1.0f / (float)c->comm->size;
        for (size_t i = 0; i < n; i++) p->sum[i] *= inv;
        dt_optim_step(c->opt, dt_model_params(c->model), p->sum, c->lr); /* --clip: the mean */
    }
    return dt_bcast(c->comm, dt_model_params(c->model), n, 0);
}

static dt_status grad_compressed_step(ps_impl *p, dt_step_ctx *c) {
    dt_comm *comm = c->comm;
    const size_t n = dt_model_num_params(c->model);
    float *x = dt_model_params(c->model);
    const double t0 = dt_comm_time_begin(comm); /* the codec's time is communication's */
    dt_grad_payload_encode(&p->up, dt_model_grads(c->model));
    dt_status st = dt_gather_bytes(comm, p->up.send, p->ups, p->up.bytes);
    if (st == DT_OK && comm->rank == 0) {
        dt_grad_payload_mean(&p->up, p->ups, comm->size, p->sum);
        dt_optim_step(c->opt, p->master, p->sum, c->lr);
        dt_codec_encode_delta(p->up.codec, p->master, x, n, p->down); /* rank 0's model: the copy */
    }
    if (st == DT_OK) st = dt_bcast_bytes(comm, p->down, p->up.bytes, 0);
    if (st == DT_OK && comm->rank != 0) dt_codec_decode_add(p->up.codec, p->down, n, x);
    dt_comm_time_end(comm, t0);
    return st;
}

/* every step sends everything: the baseline is what was sent (the trainer's default) */
static dt_status ps_optimizer_step(dt_scheme *s, dt_step_ctx *c) {
    ps_impl *p = s->impl;
    if (p->weight_mode) {
        dt_optim_step(c->opt, dt_model_params(c->model), dt_model_grads(c->model), c->lr); /* --clip: its own */
        return DT_OK;
    }
    return p->up.codec ? grad_compressed_step(p, c) : grad_step(p, c);
}

/* weight mode: after the local steps, rank 0 averages weights and state and broadcasts */
static dt_status weight_average(ps_impl *p, dt_step_ctx *c) {
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model);
    float *x = dt_model_params(c->model), *state = dt_model_state(c->model);
    const float inv = 1.0f / (float)c->comm->size;
    dt_status st = dt_reduce_sum(c->comm, x, p->sum, np);
    if (st == DT_OK && c->comm->rank == 0)
        for (size_t i = 0; i < np; i++) x[i] = p->sum[i] * inv;
    if (st == DT_OK) st = dt_bcast(c->comm, x, np, 0);
    if (st == DT_OK && ns) {
        st = dt_reduce_sum(c->comm, state, p->sum, ns);
        if (st == DT_OK && c->comm->rank == 0)
            for (size_t i = 0; i < ns; i++) state[i] = p->sum[i] * inv;
        if (st == DT_OK) st = dt_bcast(c->comm, state, ns, 0);
    }
    return st;
}

static dt_status ps_end_step(dt_scheme *s, dt_step_ctx *c) {
    ps_impl *p = s->impl;
    if (!p->weight_mode) return DT_OK;
    return p->avg ? dt_param_avg_run(p->avg, c->comm, dt_model_params(c->model), dt_model_state(c->model), 1.0f)
                  : weight_average(p, c);
}

static dt_status ps_start(dt_scheme *s, dt_step_ctx *c) {
    ps_impl *p = s->impl;
    const size_t np = dt_model_num_params(c->model), ns = dt_model_num_state(c->model), n1 = np > ns ? np : ns;
    float *x = dt_model_params(c->model);
    DT_TRY(dt_malloc(p->sum, n1, "the server's sum of %zu values", n1));
    if (s->codec.kind == DT_CODEC_NONE) return DT_OK;
    if (p->weight_mode) return dt_param_avg_create(&s->codec, c->comm, x, np, ns, &p->avg);
    dt_status st = dt_grad_payload_init(&p->up, &s->codec, np);
    if (st != DT_OK) return st;
    DT_TRY(dt_malloc(p->down, p->up.bytes + 1, "compression buffers of %zu parameters", np));
    if (c->comm->rank == 0) {
        DT_TRY(dt_malloc(p->master, np, "compression buffers of %zu parameters", np));
        DT_TRY(dt_malloc(p->ups, (size_t)c->comm->size * p->up.bytes + 1, "compression buffers of %zu parameters", np));
    }
    /* every rank's model is the copy of rank 0's master: start them equal (set-up, not counted) */
    st = dt_bcast_setup(c->comm, x, np, 0, "MPI_Bcast (starting weights)");
    if (st != DT_OK) return st;
    if (c->comm->rank == 0) memcpy(p->master, x, np * sizeof(float));
    return DT_OK;
}

/* checkpoints (--compress): grad keeps the residual and, on rank 0, the fp32 master weights
 * (the model is only their copy); weight keeps the copies of paramavg.h */
static dt_status ps_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    ps_impl *p = s->impl;
    if (p->avg) return dt_param_avg_save(p->avg, c->comm, out);
    if (!p->up.codec) return DT_OK;
    dt_status st = dt_grad_payload_save(&p->up, "residual", out);
    if (st == DT_OK && c->comm->rank == 0) st = dt_records_add(out, "master", p->master, p->up.n);
    return st;
}

static dt_status ps_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    ps_impl *p = s->impl;
    if (p->avg) return dt_param_avg_load(p->avg, c->comm, f, path);
    if (!p->up.codec) return DT_OK;
    dt_status st = dt_grad_payload_load(&p->up, "residual", f, path);
    if (st == DT_OK && c->comm->rank == 0) st = dt_tfile_take(f, path, "master", p->master, p->up.n * sizeof(float));
    return st;
}

static void ps_destroy(dt_scheme *s) {
    ps_impl *p = s->impl;
    dt_grad_payload_free(&p->up);
    dt_param_avg_free(p->avg);
    dt_free_all(p->sum, p->master, p->ups, p->down, p);
}

static const dt_scheme_ops ps_ops = {
    .start = ps_start,
    .optimizer_step = ps_optimizer_step,
    .end_step = ps_end_step,
    .save_state = ps_save,
    .load_state = ps_load,
    .destroy = ps_destroy,
};

static dt_status ps_create(dt_scheme *s) {
    ps_impl *p;
    DT_TRY(dt_scheme_new(s, p, &ps_ops, 0));
    p->weight_mode = ((const ps_opts *)s->opts)->weight_mode;
    return DT_OK;
}

const dt_scheme_def dt_scheme_ps = {
    .name = "ps", .summary = "synchronous parameter server: rank 0 gathers, averages, applies, broadcasts",
    DT_SCHEME_FLAGS(ps_flags, ps_opts), .compress = DT_COMPRESS_YES, .create = ps_create, .replayable = 1,
};
