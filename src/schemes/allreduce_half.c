/* allreduce's 16-bit transport (--compress fp16 | bf16): the gradient, scaled by 1/N, is
 * encoded with error feedback (payload.h) and MPI itself sums the 16-bit values
 * (comm/half_reduce.h: a user-defined MPI_Op adding in fp32), in the plain transport's
 * buckets: half the fp32 allreduce's bytes, and the same sum on every rank bit for bit. */
#include <stdlib.h>

#include "comm/half_reduce.h"
#include "core/alloc.h"
#include "schemes/allreduce_transport.h"
#include "schemes/payload.h"

typedef struct {
    dt_grad_payload pay; /* first: dt_allreduce_residual_save */
    dt_codec_kind kind;
} half_state;

static int half_takes(const dt_scheme *s, const dt_step_ctx *c) {
    (void)c;
    return s->codec.kind == DT_CODEC_FP16 || s->codec.kind == DT_CODEC_BF16;
}

static dt_status half_create(const dt_scheme *s, dt_step_ctx *c, void **out) {
    half_state *h;
    const dt_status made = dt_calloc(h, 1, "allreduce's 16-bit payload");
    *out = h;
    if (made != DT_OK) return made;
    h->kind = s->codec.kind;
    return dt_grad_payload_init(&h->pay, &s->codec, dt_model_num_params(c->model));
}

static void half_free(void *t) {
    half_state *h = t;
    if (!h) return;
    dt_grad_payload_free(&h->pay);
    free(h);
}

/* The 16-bit payload of the gradients [from, to): scaled by 1/N (the sum of N stays in range,
 * as in DDP's fp16 hook) and encoded with the error feedback of those values. */
static void encode_half(half_state *h, dt_step_ctx *c, size_t from, size_t to) {
    float *g = dt_model_grads(c->model);
    const float inv = 1.0f / (float)c->comm->size;
    for (size_t i = from; i < to; i++) g[i] *= inv;
    dt_codec_encode_ef(h->pay.codec, g + from, h->pay.residual + from, to - from, h->pay.send + from * sizeof(uint16_t));
}

static dt_status half_start_bucket(void *t, dt_step_ctx *c, size_t from, size_t to, MPI_Request *req) {
    half_state *h = t;
    const double t0 = dt_comm_time_begin(c->comm); /* the codec's time is communication's */
    encode_half(h, c, from, to);
    const dt_status st = dt_iallreduce_half(c->comm, (uint16_t *)(void *)h->pay.send + from, to - from, h->kind, req);
    dt_comm_time_end(c->comm, t0);
    return st;
}

/* the sum of the scaled gradients: their mean */
static dt_status half_finish(void *t, dt_step_ctx *c, dt_status st) {
    half_state *h = t;
    const double t0 = dt_comm_time_begin(c->comm);
    dt_codec_decode(h->pay.codec, h->pay.send, dt_model_num_params(c->model), dt_model_grads(c->model));
    dt_comm_time_end(c->comm, t0);
    return st;
}

static dt_status half_sum(void *t, dt_step_ctx *c) {
    half_state *h = t;
    const size_t np = dt_model_num_params(c->model);
    const double t0 = dt_comm_time_begin(c->comm);
    encode_half(h, c, 0, np);
    const dt_status st = dt_allreduce_half(c->comm, (uint16_t *)(void *)h->pay.send, np, h->kind);
    if (st == DT_OK) dt_codec_decode(h->pay.codec, h->pay.send, np, dt_model_grads(c->model));
    dt_comm_time_end(c->comm, t0);
    return st;
}

const dt_allreduce_transport dt_allreduce_via_half = {
    .takes = half_takes, .create = half_create, .start_bucket = half_start_bucket, .finish = half_finish,
    .sum = half_sum, .save = dt_allreduce_residual_save, .load = dt_allreduce_residual_load, .destroy = half_free,
};
