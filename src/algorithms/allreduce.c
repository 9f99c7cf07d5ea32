/* allreduce (D-SGD): every step the gradients are averaged over all ranks with
 * MPI_Allreduce and every rank applies the same update, so the models stay identical.
 *
 * --compress C (not none): the gradient is a payload with error feedback (payload.h). An
 * allreduce cannot add encoded bytes, so the payloads are allgathered (B bytes from every
 * rank, the same B on every rank) and every rank takes their mean: all ranks get the same
 * mean bit for bit and the models stay identical. Counted as a ring allgather of the encoded
 * bytes (docs/accounting.md); comm s includes the encoding and decoding. */
#include <stdlib.h>

#include "algorithms/payload.h"
#include "algorithms/strategy.h"

typedef struct {
    dt_grad_payload pay;
    uint8_t *recv; /* N payloads */
} allreduce_impl;

static dt_status allreduce_start(dt_strategy *s, dt_step_ctx *c) {
    if (s->codec.kind == DT_CODEC_NONE) return DT_OK; /* none: exactly the plain allreduce */
    allreduce_impl *a = calloc(1, sizeof *a);
    if (!a) return dt_fail(DT_ERR_NOMEM, "out of memory");
    s->impl = a;
    dt_status st = dt_grad_payload_init(&a->pay, &s->codec, dt_model_num_params(c->model));
    if (st != DT_OK) return st;
    if (!(a->recv = malloc(a->pay.bytes * (size_t)c->comm->size + 1)))
        return dt_fail(DT_ERR_NOMEM, "out of memory (compression buffers)");
    return DT_OK;
}

static dt_status allreduce_after_backward(dt_strategy *s, dt_step_ctx *c) {
    allreduce_impl *a = s->impl;
    dt_comm *comm = c->comm;
    const uint64_t before = comm->c.msgs_sent;
    float *g = dt_model_grads(c->model);
    dt_status st;
    if (!a) {
        st = dt_allreduce_mean(comm, g, dt_model_num_params(c->model));
    } else {
        const double t0 = dt_now(), comm0 = comm->c.t_comm;
        dt_grad_payload_encode(&a->pay, g);
        st = dt_allgather_bytes(comm, a->pay.send, a->recv, a->pay.bytes);
        if (st == DT_OK) dt_grad_payload_mean(&a->pay, a->recv, comm->size, g);
        comm->c.t_comm = comm0 + (dt_now() - t0); /* the codec's time is communication's */
    }
    comm->c.baseline_msgs += comm->c.msgs_sent - before; /* it always sends everything */
    return st;
}

/* checkpoints: the error-feedback residual */
static dt_status allreduce_save(dt_strategy *s, dt_step_ctx *c, dt_records *out) {
    allreduce_impl *a = s->impl;
    (void)c;
    return a ? dt_grad_payload_save(&a->pay, "allreduce:residual", out) : DT_OK;
}

static dt_status allreduce_load(dt_strategy *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    allreduce_impl *a = s->impl;
    (void)c;
    return a ? dt_grad_payload_load(&a->pay, "allreduce:residual", f, path) : DT_OK;
}

static void allreduce_destroy(dt_strategy *s) {
    allreduce_impl *a = s->impl;
    if (!a) return;
    dt_grad_payload_free(&a->pay);
    free(a->recv);
    free(a);
}

static const dt_strategy_ops allreduce_ops = {
    .start = allreduce_start,
    .after_backward = allreduce_after_backward,
    .save_state = allreduce_save,
    .load_state = allreduce_load,
    .destroy = allreduce_destroy,
};

static dt_status allreduce_create(dt_strategy *s) {
    s->ops = &allreduce_ops;
    return DT_OK;
}

const dt_scheme dt_scheme_allreduce = {
    .name = "allreduce", .summary = "average the gradients every step (MPI_Allreduce)",
    .compress = DT_COMPRESS_YES, .create = allreduce_create,
};
