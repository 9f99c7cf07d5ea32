/* allreduce (D-SGD): every step the gradients are averaged over all ranks with
 * MPI_Allreduce and every rank applies the same update, so the models stay identical.
 *
 * --compress fp16 | bf16: the gradient, scaled by 1/N, is encoded with error feedback
 * (payload.h) and the 16-bit values are summed by MPI itself (comm/half_reduce.h: a
 * user-defined MPI_Op adding in fp32), in the same buckets as the plain allreduce: every
 * rank sends and receives 2(N-1)/N of the 16-bit payload, half the fp32 allreduce's bytes at
 * any N, and all ranks get the same sum bit for bit.
 *
 * --compress powersgd:R: low-rank factors of each gradient matrix (powersgd.h), summed by
 * MPI in the same buckets, after --powersgd-start plain steps.
 *
 * --compress int8 | topk:F: MPI cannot add these encodings (a chunk's scale, a top-k's
 * indices). --encoded-sum chooses how they are summed:
 *   allgather: the payloads are allgathered (B bytes from every rank) and every rank takes
 *     their mean, counted as a ring allgather, (N-1)B per rank: it grows with N;
 *   reduce-scatter: comm/encoded_sum.h, each rank sums a part and re-encodes it, about
 *     2(N-1)/N B per rank at any N, a second encoding's error fed back as the first's;
 *   auto (the default): the reduce-scatter from 3 ranks on (dt_encoded_sum_faster).
 * Either way all ranks get the same mean bit for bit and the models stay identical; comm s
 * includes the encoding and decoding.
 *
 * Buckets (--bucket-kb, uncompressed): as DDP does, the gradients are reduced in buckets
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

#include "comm/encoded_sum.h"
#include "comm/half_reduce.h"
#include "schemes/payload.h"
#include "schemes/powersgd.h"
#include "schemes/registry.h"
#include "core/alloc.h"

typedef struct {
    int compressed;       /* int8, topk: allgathered payloads, or ... */
    dt_encoded_sum *rs;   /* ... summed by a reduce-scatter that re-encodes */
    int half;             /* fp16, bf16: summed by MPI in 16 bits (the buckets as uncompressed) */
    dt_codec_kind kind;
    dt_powersgd *psgd;    /* powersgd:R (the buckets as uncompressed) */
    long psgd_start;      /* ... from this step on */
    dt_grad_payload pay;
    uint8_t *recv;        /* N payloads */
    /* buckets */
    size_t bucket;        /* floats per bucket; 0: one allreduce after backward */
    size_t unsent_end;    /* gradients [.., unsent_end) are not yet in a bucket; [unsent_end, np) are */
    MPI_Request *req;     /* the buckets of this step */
    int nreq, capreq;
} allreduce_impl;

typedef enum { ENCODED_SUM_AUTO, ENCODED_SUM_ALLGATHER, ENCODED_SUM_REDUCE_SCATTER } encoded_sum_way;
static const char *const encoded_sum_words[] = {"auto", "allgather", "reduce-scatter", NULL};

typedef struct {
    double bucket_kb;
    long powersgd_start;
    int encoded_sum; /* encoded_sum_words */
} allreduce_opts;

/* --powersgd-start matters only when PowerSGD compresses */
static int with_powersgd(const void *opts, const char *compress) {
    (void)opts;
    return compress && !strncmp(compress, "powersgd", 8);
}

static const dt_flag allreduce_flags[] = {
    {"bucket-kb", DT_AT_FLOAT(allreduce_opts, bucket_kb), .def = "32", .min = 0, .max = 1e7,
     .help = "reduce the gradients in buckets of this many KB while backward goes on (0: one allreduce after it)"},
    {"powersgd-start", DT_AT_INT(allreduce_opts, powersgd_start), .def = "10", .min = 0, .max = 1e12,
     .help = "with --compress powersgd:R, the plain allreduce for the first N steps (PyTorch's start_powerSGD_iter)",
     .reach = DT_REACH_START_STEPS, .reach_when = with_powersgd,
     .unreached = "the gradients are never compressed: every step is the plain allreduce"},
    {"encoded-sum", DT_AT_CHOICE(allreduce_opts, encoded_sum, encoded_sum_words), .def = "auto",
     .help = "how --compress int8 | topk:F payloads are summed: allgather (N-1 payloads a rank), reduce-scatter (re-encoded, ~2 a rank), auto (reduce-scatter from 3 ranks)"},
};

/* this step sums PowerSGD's factors (its plain steps are over) */
static int powersgd_on(const allreduce_impl *a, const dt_step_ctx *c) { return a->psgd && c->step >= a->psgd_start; }

static dt_status allreduce_start(dt_scheme *s, dt_step_ctx *c) {
    allreduce_impl *a = calloc(1, sizeof *a);
    if (!a) return dt_nomem("the allreduce scheme");
    s->impl = a;
    const size_t np = dt_model_num_params(c->model);
    a->kind = s->codec.kind;
    a->half = a->kind == DT_CODEC_FP16 || a->kind == DT_CODEC_BF16;
    /* none: exactly the plain allreduce; fp16, bf16 and powersgd: its buckets, other sums */
    if (a->kind == DT_CODEC_NONE || a->half || a->kind == DT_CODEC_POWERSGD) {
        const double kb = ((const allreduce_opts *)s->opts)->bucket_kb;
        a->bucket = (size_t)(kb * 1024 / sizeof(float));
        if (kb > 0 && a->bucket == 0) a->bucket = 1;
        a->unsent_end = np;
        /* at most a bucket per layer's call and one after backward: the tensors bound the layers with parameters */
        a->capreq = dt_model_num_tensors(c->model) + 2;
        a->req = malloc((size_t)a->capreq * sizeof *a->req);
        if (!a->req) return dt_nomem("%d bucket requests", a->capreq);
        if (a->kind == DT_CODEC_POWERSGD) {
            a->psgd_start = ((const allreduce_opts *)s->opts)->powersgd_start;
            return dt_powersgd_create(c->model, s->codec.rank, &a->psgd);
        }
        return a->half ? dt_grad_payload_init(&a->pay, &s->codec, np) : DT_OK;
    }
    a->compressed = 1;
    const int way = ((const allreduce_opts *)s->opts)->encoded_sum;
    if (way == ENCODED_SUM_REDUCE_SCATTER || (way == ENCODED_SUM_AUTO && dt_encoded_sum_faster(c->comm->size)))
        return dt_encoded_sum_create(&s->codec, c->comm, np, &a->rs);
    dt_status st = dt_grad_payload_init(&a->pay, &s->codec, np);
    if (st != DT_OK) return st;
    if (!(a->recv = malloc(a->pay.bytes * (size_t)c->comm->size + 1)))
        return dt_nomem("compression buffers for %d ranks' payloads", c->comm->size);
    return DT_OK;
}

/* The 16-bit payload of the gradients [from, to): scaled by 1/N (the sum of N stays in range,
 * as in DDP's fp16 hook) and encoded with the error feedback of those values. */
static void encode_half(allreduce_impl *a, dt_step_ctx *c, size_t from, size_t to) {
    float *g = dt_model_grads(c->model);
    const float inv = 1.0f / (float)c->comm->size;
    for (size_t i = from; i < to; i++) g[i] *= inv;
    dt_codec_encode_ef(a->pay.codec, g + from, a->pay.residual + from, to - from, a->pay.send + from * sizeof(uint16_t));
}

/* starts the bucket [from, unsent_end) */
static dt_status start_bucket(allreduce_impl *a, dt_step_ctx *c, size_t from) {
    assert(a->nreq < a->capreq);
    dt_status st;
    if (a->half) {
        const double t0 = dt_comm_time_begin(c->comm); /* the codec's time is communication's */
        encode_half(a, c, from, a->unsent_end);
        st = dt_iallreduce_half(c->comm, (uint16_t *)(void *)a->pay.send + from, a->unsent_end - from, a->kind,
                                &a->req[a->nreq]);
        dt_comm_time_end(c->comm, t0);
    } else if (powersgd_on(a, c))
        st = dt_powersgd_start(a->psgd, c->comm, dt_model_grads(c->model), from, a->unsent_end, &a->req[a->nreq]);
    else
        st = dt_iallreduce_sum(c->comm, dt_model_grads(c->model) + from, a->unsent_end - from, &a->req[a->nreq]);
    if (st != DT_OK) return st;
    a->nreq++;
    a->unsent_end = from;
    return DT_OK;
}

static dt_status allreduce_grads_ready(dt_scheme *s, dt_step_ctx *c, size_t from) {
    allreduce_impl *a = s->impl;
    if (a->compressed || a->bucket == 0) return DT_OK;
    dt_status st = DT_OK;
    /* the last slot is kept for the rest, after backward */
    if (a->unsent_end - from >= a->bucket && a->nreq < a->capreq - 1) st = start_bucket(a, c, from);
    if (st == DT_OK && a->nreq > 0) { /* let MPI move the buckets along */
        int done;
        st = dt_test_all(c->comm, a->nreq, a->req, &done, "MPI_Testall (gradient buckets)");
    }
    return st;
}

static dt_status allreduce_after_backward(dt_scheme *s, dt_step_ctx *c) {
    allreduce_impl *a = s->impl;
    dt_comm *comm = c->comm;
    float *g = dt_model_grads(c->model);
    const size_t np = dt_model_num_params(c->model);
    dt_status st = DT_OK;
    if (!a->compressed && (a->bucket > 0 || a->psgd)) {
        if (a->unsent_end > 0) st = start_bucket(a, c, 0);
        const dt_status waited = dt_wait_all(comm, a->nreq, a->req, "MPI_Waitall (gradient buckets)");
        if (st == DT_OK) st = waited;
        a->nreq = 0;
        a->unsent_end = np;
        if (st == DT_OK && powersgd_on(a, c)) {
            st = dt_powersgd_finish(a->psgd, comm, g);
        } else if (a->half) { /* the sum of the scaled gradients: their mean */
            const double t0 = dt_comm_time_begin(comm);
            dt_codec_decode(a->pay.codec, a->pay.send, np, g);
            dt_comm_time_end(comm, t0);
        } else {
            const float inv = 1.0f / (float)comm->size;
            for (size_t i = 0; i < np; i++) g[i] *= inv;
        }
    } else if (a->half) {
        const double t0 = dt_comm_time_begin(comm);
        encode_half(a, c, 0, np);
        st = dt_allreduce_half(comm, (uint16_t *)(void *)a->pay.send, np, a->kind);
        if (st == DT_OK) dt_codec_decode(a->pay.codec, a->pay.send, np, g);
        dt_comm_time_end(comm, t0);
    } else if (!a->compressed) {
        st = dt_allreduce_mean(comm, g, np);
    } else if (a->rs) { /* the sum of the scaled gradients: their mean */
        const float inv = 1.0f / (float)comm->size;
        for (size_t i = 0; i < np; i++) g[i] *= inv;
        st = dt_encoded_sum_run(a->rs, comm, g);
    } else {
        const double t0 = dt_comm_time_begin(comm); /* the codec's time is communication's */
        dt_grad_payload_encode(&a->pay, g);
        st = dt_allgather_bytes(comm, a->pay.send, a->recv, a->pay.bytes);
        if (st == DT_OK) dt_grad_payload_mean(&a->pay, a->recv, comm->size, g);
        dt_comm_time_end(comm, t0);
    }
    /* it always sends everything: the baseline is what it sent (the trainer's default) */
    return st;
}

/* checkpoints: the error-feedback residual */
static dt_status allreduce_save(dt_scheme *s, dt_step_ctx *c, dt_records *out) {
    allreduce_impl *a = s->impl;
    (void)c;
    if (a->psgd) return dt_powersgd_save(a->psgd, out);
    if (a->rs) return dt_encoded_sum_save(a->rs, "reduce_scatter", out);
    return a->compressed || a->half ? dt_grad_payload_save(&a->pay, "residual", out) : DT_OK;
}

static dt_status allreduce_load(dt_scheme *s, dt_step_ctx *c, const dt_tfile *f, const char *path) {
    allreduce_impl *a = s->impl;
    (void)c;
    if (a->psgd) return dt_powersgd_load(a->psgd, f, path);
    if (a->rs) return dt_encoded_sum_load(a->rs, "reduce_scatter", f, path);
    return a->compressed || a->half ? dt_grad_payload_load(&a->pay, "residual", f, path) : DT_OK;
}

static void allreduce_destroy(dt_scheme *s) {
    allreduce_impl *a = s->impl;
    if (!a) return;
    if (a->compressed || a->half) dt_grad_payload_free(&a->pay); /* a zeroed one too (a->rs) */
    dt_encoded_sum_free(a->rs);
    dt_powersgd_free(a->psgd);
    free(a->recv);
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
    DT_SCHEME_FLAGS(allreduce_flags, allreduce_opts),
    .compress = DT_COMPRESS_AND_POWERSGD, .create = allreduce_create, .replayable = 1,
};
