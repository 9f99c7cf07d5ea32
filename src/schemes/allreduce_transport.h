/* allreduce's transports: how one codec's gradients are summed over the ranks, behind one
 * small ops table chosen once when the scheme starts (allreduce.c keeps the buckets, a
 * transport the sums), so a new codec adds a file, not a branch:
 *   allreduce_plain.c    --compress none: MPI sums the fp32 gradients;
 *   allreduce_half.c     fp16 | bf16: MPI sums the 16-bit payloads (comm/half_reduce.h);
 *   allreduce_psgd.c     powersgd:R: MPI sums low-rank factors (powersgd.h);
 *   allreduce_encoded.c  int8 | topk:F: allgathered payloads, or a re-encoding reduce-scatter
 *                        (comm/encoded_sum.h), as --encoded-sum says. */
#ifndef DT_ALLREDUCE_TRANSPORT_H
#define DT_ALLREDUCE_TRANSPORT_H

#include <stddef.h>

#include "schemes/payload.h"
#include "schemes/registry.h"

typedef enum { DT_ENCODED_SUM_AUTO, DT_ENCODED_SUM_ALLGATHER, DT_ENCODED_SUM_REDUCE_SCATTER } dt_encoded_sum_way;

/* allreduce's flags (allreduce.c reads them in) */
typedef struct {
    double bucket_kb;
    long powersgd_start;
    int encoded_sum; /* dt_encoded_sum_way */
} dt_allreduce_opts;

typedef struct {
    /* whether it sums this run's gradients: the first of dt_allreduce_transports[] that does is used */
    int (*takes)(const dt_scheme *s, const dt_step_ctx *c);
    dt_status (*create)(const dt_scheme *s, dt_step_ctx *c, void **out);
    /* The gradients [from, to) are final: their sum started on *req. NULL: it sums only
     * after backward (sum), never in buckets. */
    dt_status (*start_bucket)(void *t, dt_step_ctx *c, size_t from, size_t to, MPI_Request *req);
    /* After every bucket was started and waited for (st: how that went): the mean into the gradients. */
    dt_status (*finish)(void *t, dt_step_ctx *c, dt_status st);
    /* The mean into the gradients in one go after backward, with no buckets (--bucket-kb 0).
     * NULL: one bucket after backward instead. */
    dt_status (*sum)(void *t, dt_step_ctx *c);
    /* checkpoints (NULL: it keeps nothing) */
    dt_status (*save)(void *t, dt_records *out);
    dt_status (*load)(void *t, const dt_tfile *f, const char *path);
    void (*destroy)(void *t);
} dt_allreduce_transport;

extern const dt_allreduce_transport dt_allreduce_via_plain, dt_allreduce_via_half, dt_allreduce_via_psgd,
    dt_allreduce_via_reduce_scatter, dt_allreduce_via_allgather;

/* Checkpoints of a transport whose state begins with its dt_grad_payload: the error-feedback
 * residual, as the record "residual". */
static inline dt_status dt_allreduce_residual_save(void *t, dt_records *out) {
    return dt_grad_payload_save(t, "residual", out);
}

static inline dt_status dt_allreduce_residual_load(void *t, const dt_tfile *f, const char *path) {
    return dt_grad_payload_load(t, "residual", f, path);
}

/* The sum of the N ranks' gradients into their mean. */
static inline void dt_allreduce_divide(dt_step_ctx *c) {
    float *g = dt_model_grads(c->model);
    const size_t np = dt_model_num_params(c->model);
    const float inv = 1.0f / (float)c->comm->size;
    for (size_t i = 0; i < np; i++) g[i] *= inv;
}

#endif
