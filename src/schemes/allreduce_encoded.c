/* allreduce's encoded transports (--compress int8 | topk:F): MPI cannot add these encodings
 * (a chunk's scale, a top-k's indices), so after backward, with no buckets, --encoded-sum
 * chooses how they are summed:
 *   allgather: the payloads are allgathered (B bytes from every rank) and every rank takes
 *     their mean, counted as a ring allgather, (N-1)B per rank: it grows with N;
 *   reduce-scatter: comm/encoded_sum.h, each rank sums a part and re-encodes it, about
 *     2(N-1)/N B per rank at any N, a second encoding's error fed back as the first's;
 *   auto (the default): the reduce-scatter from 3 ranks on (dt_encoded_sum_faster).
 * Either way all ranks get the same mean bit for bit; comm s includes the encoding and decoding. */
#include <stdlib.h>

#include "comm/encoded_sum.h"
#include "core/alloc.h"
#include "schemes/allreduce_transport.h"
#include "schemes/payload.h"

/* reduce-scatter: comes after the transports MPI sums, so it takes the codecs they do not */
static int rs_takes(const dt_scheme *s, const dt_step_ctx *c) {
    const int way = ((const dt_allreduce_opts *)s->opts)->encoded_sum;
    return way == DT_ENCODED_SUM_REDUCE_SCATTER || (way == DT_ENCODED_SUM_AUTO && dt_encoded_sum_faster(c->comm->size));
}

static dt_status rs_create(const dt_scheme *s, dt_step_ctx *c, void **out) {
    dt_encoded_sum *e = NULL;
    const dt_status st = dt_encoded_sum_create(&s->codec, c->comm, dt_model_num_params(c->model), &e);
    *out = e;
    return st;
}

/* the sum of the scaled gradients: their mean */
static dt_status rs_sum(void *t, dt_step_ctx *c) {
    dt_allreduce_divide(c);
    return dt_encoded_sum_run(t, c->comm, dt_model_grads(c->model));
}

/* checkpoints: the error feedback of both encodings */
static dt_status rs_save(void *t, dt_records *out) { return dt_encoded_sum_save(t, "reduce_scatter", out); }

static dt_status rs_load(void *t, const dt_tfile *f, const char *path) {
    return dt_encoded_sum_load(t, "reduce_scatter", f, path);
}

static void rs_free(void *t) { dt_encoded_sum_free(t); }

const dt_allreduce_transport dt_allreduce_via_reduce_scatter = {
    .takes = rs_takes, .create = rs_create, .sum = rs_sum, .save = rs_save, .load = rs_load, .destroy = rs_free,
};

typedef struct {
    dt_grad_payload pay; /* first: dt_allreduce_residual_save */
    uint8_t *recv; /* N payloads */
} allgather_state;

/* allgather: any codec's payloads can be gathered (the last resort) */
static int allgather_takes(const dt_scheme *s, const dt_step_ctx *c) {
    (void)s, (void)c;
    return 1;
}

static dt_status allgather_create(const dt_scheme *s, dt_step_ctx *c, void **out) {
    allgather_state *a;
    const dt_status made = dt_calloc(a, 1, "allreduce's encoded payloads");
    *out = a;
    if (made != DT_OK) return made;
    dt_status st = dt_grad_payload_init(&a->pay, &s->codec, dt_model_num_params(c->model));
    if (st != DT_OK) return st;
    return dt_malloc(a->recv, a->pay.bytes * (size_t)c->comm->size + 1, "compression buffers for %d ranks' payloads",
                     c->comm->size);
}

static void allgather_free(void *t) {
    allgather_state *a = t;
    if (!a) return;
    dt_grad_payload_free(&a->pay);
    free(a->recv);
    free(a);
}

static dt_status allgather_sum(void *t, dt_step_ctx *c) {
    allgather_state *a = t;
    float *g = dt_model_grads(c->model);
    const double t0 = dt_comm_time_begin(c->comm); /* the codec's time is communication's */
    dt_grad_payload_encode(&a->pay, g);
    const dt_status st = dt_allgather_bytes(c->comm, a->pay.send, a->recv, a->pay.bytes);
    if (st == DT_OK) dt_grad_payload_mean(&a->pay, a->recv, c->comm->size, g);
    dt_comm_time_end(c->comm, t0);
    return st;
}

const dt_allreduce_transport dt_allreduce_via_allgather = {
    .takes = allgather_takes, .create = allgather_create, .sum = allgather_sum,
    .save = dt_allreduce_residual_save, .load = dt_allreduce_residual_load, .destroy = allgather_free,
};
