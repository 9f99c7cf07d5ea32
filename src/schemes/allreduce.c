/* allreduce (D-SGD): every step the gradients are averaged over all ranks with
 * MPI_Allreduce and every rank applies the same update, so the models stay identical.
 *
 * --compress: how the gradients are summed is a transport (allreduce_transport.h), chosen by
 * the codec when the scheme starts: fp16 | bf16 and powersgd:R are summed by MPI in the same
 * buckets as the plain allreduce; int8 | topk:F, which MPI cannot add, after backward, by an
 * allgather or a re-encoding reduce-scatter (--encoded-sum). All ranks get the same mean bit
 * for bit either way, and comm s includes the encoding and decoding.
 *
 * Buckets (--bucket-kb, the transports MPI sums): as DDP does, the gradients are reduced in buckets
 * while backward goes on. Backward finishes the layers from the last to the first, and the
 * parameters lie in layer order, so the final gradients grow from the end of the flat buffer:
 * once at least a bucket's worth is final and not yet sent, it is started (MPI_Iallreduce)
 * and backward computes the earlier layers meanwhile; each later layer lets MPI move the
 * buckets along (MPI_Testall). After backward the rest goes as the last bucket and the step
 * waits for them all: only that wait is exposed. Every rank cuts the same buckets (the same
 * model), so the sums are the same on every rank. */
#include <stdlib.h>
#include <string.h>

#include <assert.h>

#include "core/alloc.h"
#include "schemes/allreduce_transport.h"
#include "schemes/registry.h"

/* the first that takes a run's codec sums it: those MPI sums, then the encoded ones */
static const dt_allreduce_transport *const transports[] = {
    &dt_allreduce_via_plain, &dt_allreduce_via_half, &dt_allreduce_via_psgd,
    &dt_allreduce_via_reduce_scatter, &dt_allreduce_via_allgather,
};

typedef struct {
    const dt_allreduce_transport *t; /* how the gradients are summed */
    void *tr;                        /* ... and its state */
    int in_buckets;       /* after backward: the last bucket, the wait and t->finish; else t->sum */
    /* buckets */
    size_t bucket;        /* floats per bucket; 0: one allreduce after backward */
    size_t unsent_end;    /* gradients [.., unsent_end) are not yet in a bucket; [unsent_end, np) are */
    MPI_Request *req;     /* the buckets of this step */
    int nreq, capreq;
} allreduce_impl;

static const char *const encoded_sum_words[] = {"auto", "allgather", "reduce-scatter", NULL};

/* --powersgd-start matters only when PowerSGD compresses */
static int with_powersgd(const void *opts, const char *compress) {
    (void)opts;
    return compress && !strncmp(compress, "powersgd", 8);
}

static const dt_flag allreduce_flags[] = {
    {"bucket-kb", DT_AT_FLOAT(dt_allreduce_opts, bucket_kb), .def = "32", .min = 0, .max = 1e7,
     .help = "reduce the gradients in buckets of this many KB while backward goes on (0: one allreduce after it)"},
    {"powersgd-start", DT_AT_INT(dt_allreduce_opts, powersgd_start), .def = "10", .min = 0, .max = 1e12,
     .help = "with --compress powersgd:R, the plain allreduce for the first N steps (PyTorch's start_powerSGD_iter)",
     .reach = DT_REACH_START_STEPS, .reach_when = with_powersgd,
     .unreached = "the gradients are never compressed: every step is the plain allreduce"},
    {"encoded-sum", DT_AT_CHOICE(dt_allreduce_opts, encoded_sum, encoded_sum_words), .def = "auto",
     .help = "how --compress int8 | topk:F payloads are summed: allgather (N-1 payloads a rank), reduce-scatter (re-encoded, ~2 a rank), auto (reduce-scatter from 3 ranks)"},
};

static dt_status allreduce_start(dt_scheme *s, dt_step_ctx *c) {
    allreduce_impl *a;
    DT_TRY(dt_calloc(a, 1, "the allreduce scheme"));
    s->impl = a;
    for (size_t i = 0; !a->t; i++)
        if (transports[i]->takes(s, c)) a->t = transports[i];
    if (a->t->start_bucket) { /* the gradients final during backward go in buckets */
        const double kb = ((const dt_allreduce_opts *)s->opts)->bucket_kb;
        a->bucket = (size_t)(kb * 1024 / sizeof(float));
        if (kb > 0 && a->bucket == 0) a->bucket = 1;
        a->unsent_end = dt_model_num_params(c->model);
        /* at most a bucket per layer's call and one after backward: the tensors bound the layers with parameters */
        a->capreq = dt_model_num_tensors(c->model) + 2;
        DT_TRY(dt_malloc(a->req, (size_t)a->capreq, "%d bucket requests", a->capreq));
    }
    a->in_buckets = a->t->start_bucket && (a->bucket > 0 || !a->t->sum);
    return a->t->create(s, c, &a->tr);
}

/* starts the bucket [from, unsent_end) */
static dt_status start_bucket(allreduce_impl *a, dt_step_ctx *c, size_t from) {
    assert(a->nreq < a->capreq);
    const dt_status st = a->t->start_bucket(a->tr, c, from, a->unsent_end, &a->req[a->nreq]);
    if (st != DT_OK) return st;
    a->nreq++;
    a->unsent_end = from;
    return DT_OK;
}

static dt_status allreduce_grads_ready(dt_scheme *s, dt_step_ctx *c, size_t from) {
    allreduce_impl *a = s->impl;
    if (a->bucket == 0) return DT_OK;
    dt_status st = DT_OK;
    /* the last slot is kept for the rest, after backward */
    if (a->unsent_end - from >= a->bucket && a->nreq < a->capreq - 1) st = start_bucket(a, c, from);
    if (st == DT_OK && a->nreq > 0) { /* let MPI move the buckets along */
        int done;
        st = dt_test_all(c->comm, a->nreq, a->req, &done, "MPI_Testall (gradient buckets)");
    }
    return st;
}

/* it always sends everything: the baseline is what it sent (the trainer's default) */
static dt_status allreduce_after_backward(dt_scheme *s, dt_step_ctx *c) {
    allreduce_impl *a = s->impl;
    if (!a->in_buckets) return a->t->sum(a->tr, c);
    dt_status st = a->unsent_end > 0 ? start_bucket(a, c, 0) : DT_OK;
    const dt_status waited = dt_wait_all(c->comm, a->nreq, a->req, "MPI_Waitall (gradient buckets)");
    if (st == DT_OK) st = waited;
    a->nreq = 0;
    a->unsent_end = dt_model_num_params(c->model);
    return a->t->finish(a->tr, c, st);
}

/* checkpoints: the transport's error feedback */
static dt_status allreduce_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    allreduce_impl *a = s->impl;
    (void)c;
    return a->t->save ? a->t->save(a->tr, out) : DT_OK;
}

static dt_status allreduce_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    allreduce_impl *a = s->impl;
    (void)c;
    return a->t->load ? a->t->load(a->tr, f, path) : DT_OK;
}

static void allreduce_destroy(dt_scheme *s) {
    allreduce_impl *a = s->impl;
    if (!a) return;
    if (a->t && a->t->destroy) a->t->destroy(a->tr);
    free(a->req);
    free(a);
}

static const dt_scheme_ops allreduce_ops = {
    .start = allreduce_start,
    .grads_ready = allreduce_grads_ready,
    .after_backward = allreduce_after_backward,
    .save_state = allreduce_save,
    .load_state = allreduce_load,
    .destroy = allreduce_destroy,
};

static dt_status allreduce_create(dt_scheme *s) {
    s->ops = &allreduce_ops;
    return DT_OK;
}

const dt_scheme_def dt_scheme_allreduce = {
    .name = "allreduce", .summary = "average the gradients every step (MPI_Allreduce, in buckets during backward)",
    DT_SCHEME_FLAGS(allreduce_flags, dt_allreduce_opts),
    .compress = DT_COMPRESS_AND_POWERSGD, .create = allreduce_create, .replayable = 1,
};
