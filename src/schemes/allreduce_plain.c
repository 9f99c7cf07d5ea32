/* allreduce's plain transport (--compress none): MPI sums the fp32 gradients, in buckets
 * (MPI_Iallreduce) while backward goes on or in one MPI_Allreduce after it; PowerSGD's plain
 * steps are this one too. */
#include "schemes/allreduce_transport.h"

static int plain_takes(const dt_scheme *s, const dt_step_ctx *c) {
    (void)c;
    return s->codec.kind == DT_CODEC_NONE;
}

static dt_status plain_create(const dt_scheme *s, dt_step_ctx *c, void **out) {
    (void)s, (void)c;
    *out = NULL; /* it keeps nothing */
    return DT_OK;
}

static dt_status plain_start_bucket(void *t, dt_step_ctx *c, size_t from, size_t to, MPI_Request *req) {
    (void)t;
    return dt_iallreduce_sum(c->comm, dt_model_grads(c->model) + from, to - from, req);
}

static dt_status plain_finish(void *t, dt_step_ctx *c, dt_status st) {
    (void)t;
    dt_allreduce_divide(c);
    return st;
}

static dt_status plain_sum(void *t, dt_step_ctx *c) {
    (void)t;
    return dt_allreduce_mean(c->comm, dt_model_grads(c->model), dt_model_num_params(c->model));
}

const dt_allreduce_transport dt_allreduce_via_plain = {
    .takes = plain_takes, .create = plain_create, .start_bucket = plain_start_bucket,
    .finish = plain_finish, .sum = plain_sum,
};
