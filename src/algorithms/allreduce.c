/* allreduce (D-SGD): every step the gradients are averaged over all ranks with
 * MPI_Allreduce and every rank applies the same update, so the models stay identical.
 *
 * --compress C (not none): the gradient is a payload with error feedback (codec.h): each
 * rank sends encode(g + e) and keeps e = (g + e) - decode(that). An allreduce cannot add
 * encoded bytes, so the payloads are allgathered (B bytes from every rank, the same B on
 * every rank); every rank decodes the N payloads and adds them in rank order, then divides
 * by N: all ranks get the same mean bit for bit and the models stay identical. Counted as a
 * ring allgather of the encoded bytes (docs/accounting.md); comm s includes the encoding and
 * decoding. */
#include <stdlib.h>

#include "algorithms/strategy.h"
#include "comm/codec.h"
#include "core/tensorfile.h"
#include "trainer/trainer.h"

typedef struct {
    dt_codec_spec spec;
    dt_codec *codec;
    float *residual;      /* error feedback, n floats */
    uint8_t *send, *recv; /* B and N*B bytes */
    size_t bytes;
} allreduce_impl;

static dt_status allreduce_start(dt_strategy *s, dt_trainer *t) {
    allreduce_impl *a = s->impl;
    const size_t n = dt_model_num_params(t->model);
    dt_status st = dt_codec_create(&a->spec, n, &a->codec);
    if (st != DT_OK) return st;
    a->bytes = dt_codec_bytes(&a->spec, n);
    a->residual = calloc(n ? n : 1, sizeof(float));
    a->send = malloc(a->bytes ? a->bytes : 1);
    a->recv = malloc(a->bytes * (size_t)t->comm.size + 1);
    if (!a->residual || !a->send || !a->recv) return dt_fail(DT_ERR_NOMEM, "out of memory (compression buffers)");
    return DT_OK;
}

static dt_status allreduce_after_backward(dt_strategy *s, dt_trainer *t) {
    allreduce_impl *a = s->impl;
    uint64_t before = t->comm.c.msgs_sent;
    dt_status st;
    float *g = dt_model_grads(t->model);
    const size_t n = dt_model_num_params(t->model);
    if (!a) {
        st = dt_allreduce_mean(&t->comm, g, n);
    } else {
        const double t0 = dt_now(), comm0 = t->comm.c.t_comm;
        dt_codec_encode_ef(a->codec, g, a->residual, n, a->send);
        st = dt_allgather_bytes(&t->comm, a->send, a->recv, a->bytes);
        if (st == DT_OK) {
            for (size_t i = 0; i < n; i++) g[i] = 0.0f;
            for (int r = 0; r < t->comm.size; r++) dt_codec_decode_add(a->codec, a->recv + (size_t)r * a->bytes, n, g);
            const float inv = 1.0f / (float)t->comm.size;
            for (size_t i = 0; i < n; i++) g[i] *= inv;
        }
        t->comm.c.t_comm = comm0 + (dt_now() - t0); /* the codec's time is communication's */
    }
    t->comm.c.baseline_msgs += t->comm.c.msgs_sent - before; /* it always sends everything */
    return st;
}

/* checkpoints: the error-feedback residual */
static dt_status allreduce_save(dt_strategy *s, dt_trainer *t, dt_records *out) {
    allreduce_impl *a = s->impl;
    return dt_records_add(out, "allreduce:residual", a->residual, dt_model_num_params(t->model));
}

static dt_status allreduce_load(dt_strategy *s, dt_trainer *t, const dt_tfile *f, const char *path) {
    allreduce_impl *a = s->impl;
    return dt_tfile_take(f, path, "allreduce:residual", a->residual, dt_model_num_params(t->model) * sizeof(float));
}

static void allreduce_destroy(dt_strategy *s) {
    allreduce_impl *a = s->impl;
    if (!a) return;
    dt_codec_free(a->codec);
    free(a->residual);
    free(a->send);
    free(a->recv);
    free(a);
}

dt_status dt_allreduce_create(dt_strategy *s) {
    s->after_backward = allreduce_after_backward;
    dt_codec_spec spec;
    dt_status st = dt_codec_parse(s->opt->compress, &spec);
    if (st != DT_OK || spec.kind == DT_CODEC_NONE) return st; /* none: exactly the plain allreduce */
    allreduce_impl *a = calloc(1, sizeof *a);
    if (!a) return dt_fail(DT_ERR_NOMEM, "out of memory");
    a->spec = spec;
    s->impl = a;
    s->start = allreduce_start;
    s->save_state = allreduce_save;
    s->load_state = allreduce_load;
    s->destroy = allreduce_destroy;
    return DT_OK;
}
