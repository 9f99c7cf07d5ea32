/* Sums of encoded vectors by a reduce-scatter and an allgather that re-encodes (see
 * encoded_sum.h). */
#include "comm/encoded_sum.h"
#include "comm/half_reduce.h"
#include "core/alloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dt_encoded_sum {
    dt_codec *codec;    /* scratch for the longest part */
    int half;           /* fp16, bf16: one part, summed by MPI (half_reduce.h) */
    dt_codec_kind kind;
    size_t n;
    int nranks, rank;
    size_t *from;       /* part j: [from[j], from[j+1]) */
    int *part_bytes;    /* encoded size of part j; the block of all four int lists (one allocation) */
    int *own_bytes;     /* nranks x the encoded size of this rank's part (what comes in) */
    int *displ_send;    /* where part j's encoding starts in send and in sums */
    int *displ_recv;
    uint8_t *send;      /* this rank's parts, encoded */
    uint8_t *recv;      /* every rank's encoding of this rank's part */
    uint8_t *sums;      /* every part's encoded sum, in rank order */
    float *residual;    /* n: error feedback of this rank's encoding */
    float *part_sum;    /* this rank's part: the sum, before its encoding */
    float *part_residual; /* this rank's part: error feedback of the sum's encoding */
};

int dt_encoded_sum_faster(int nranks) { return nranks >= 3; }

void dt_encoded_sum_free(dt_encoded_sum *s) {
    if (!s) return;
    dt_codec_free(s->codec);
    dt_free_all(s->from, s->part_bytes, s->send, s->recv, s->sums, s->residual, s->part_sum, s->part_residual, s);
}

dt_status dt_encoded_sum_create(const dt_codec_spec *spec, const dt_comm *c, size_t n, dt_encoded_sum **out) {
    *out = NULL;
    dt_encoded_sum *s;
    DT_TRY(dt_calloc(s, 1, "an encoded sum"));
    const int N = c->size;
    s->n = n;
    s->nranks = N;
    s->rank = c->rank;
    s->kind = spec->kind;
    s->half = spec->kind == DT_CODEC_FP16 || spec->kind == DT_CODEC_BF16;
    if (s->half) { /* MPI adds them: no parts */
        dt_status st = dt_codec_create(spec, n, &s->codec);
        if (st != DT_OK ||
            (st = dt_calloc(s->residual, n + 1, "an encoded sum's error feedback of %zu values", n)) != DT_OK ||
            (st = dt_malloc(s->send, 2 * n + 2, "an encoded sum's payload of %zu values", n)) != DT_OK) {
            dt_encoded_sum_free(s);
            return st;
        }
        *out = s;
        return DT_OK;
    }
    dt_status st;
    if ((st = dt_malloc(s->from, (size_t)N + 1, "the parts of an encoded sum over %d ranks", N)) != DT_OK ||
        (st = dt_malloc(s->part_bytes, 4 * (size_t)N, "the parts of an encoded sum over %d ranks", N)) != DT_OK) {
        dt_encoded_sum_free(s);
        return st;
    }
    s->own_bytes = s->part_bytes + N;
    s->displ_send = s->own_bytes + N;
    s->displ_recv = s->displ_send + N;
    size_t longest = 1, total = 0;
    for (int j = 0; st == DT_OK && j <= N; j++) s->from[j] = n * (size_t)j / (size_t)N;
    for (int j = 0; st == DT_OK && j < N; j++) {
        const size_t len = s->from[j + 1] - s->from[j], bytes = dt_codec_bytes(spec, len);
        if (bytes > (size_t)INT_MAX / (size_t)N) st = dt_fail(DT_ERR_ARG, "an encoded sum of %zu values is too large for MPI's int counts", n);
        s->part_bytes[j] = (int)bytes;
        total += bytes;
        if (len > longest) longest = len;
    }
    const size_t own = st == DT_OK ? (size_t)s->part_bytes[c->rank] : 0;
    const size_t own_len = st == DT_OK ? s->from[c->rank + 1] - s->from[c->rank] : 0;
    for (int i = 0; st == DT_OK && i < N; i++) s->own_bytes[i] = (int)own;
    for (int j = 0, at = 0; st == DT_OK && j < N; at += s->part_bytes[j++]) s->displ_send[j] = at;
    if (st == DT_OK) st = dt_codec_create(spec, longest, &s->codec);
    if (st != DT_OK ||
        (st = dt_malloc(s->send, total + 1, "an encoded sum's payload of %zu bytes", total)) != DT_OK ||
        (st = dt_malloc(s->recv, own * (size_t)N + 1, "an encoded sum's %d parts of %zu bytes", N, own)) != DT_OK ||
        (st = dt_malloc(s->sums, total + 1, "an encoded sum's payload of %zu bytes", total)) != DT_OK ||
        (st = dt_calloc(s->residual, n + 1, "an encoded sum's error feedback of %zu values", n)) != DT_OK ||
        (st = dt_calloc(s->part_sum, own_len + 1, "an encoded sum's part of %zu values", own_len)) != DT_OK ||
        (st = dt_calloc(s->part_residual, own_len + 1, "an encoded sum's error feedback of %zu values",
                        own_len)) != DT_OK) {
        dt_encoded_sum_free(s);
        return st;
    }
    *out = s;
    return DT_OK;
}

dt_status dt_encoded_sum_run(dt_encoded_sum *s, dt_comm *c, float *x) {
    const double t0 = dt_comm_time_begin(c); /* the codec's time is communication's */
    const int N = s->nranks, me = s->rank;
    if (s->half) {
        dt_codec_encode_ef(s->codec, x, s->residual, s->n, s->send);
        dt_status st = dt_allreduce_half(c, (uint16_t *)(void *)s->send, s->n, s->kind);
        if (st == DT_OK) dt_codec_decode(s->codec, s->send, s->n, x);
        dt_comm_time_end(c, t0);
        return st;
    }
    /* 1. every part encoded with error feedback; part j to rank j */
    for (int j = 0; j < N; j++) {
        const size_t lo = s->from[j], len = s->from[j + 1] - lo;
        dt_codec_encode_ef(s->codec, x + lo, s->residual + lo, len, s->send + s->displ_send[j]);
    }
    dt_status st = dt_alltoallv_bytes(c, s->send, s->part_bytes, s->displ_send, s->recv, s->own_bytes, s->displ_recv);
    if (st == DT_OK) {
        /* 2. this rank's part: the ranks' encodings added in rank order, the sum re-encoded */
        const size_t len = s->from[me + 1] - s->from[me], own = (size_t)s->part_bytes[me];
        memset(s->part_sum, 0, len * sizeof(float));
        for (int i = 0; i < N; i++) dt_codec_decode_add(s->codec, s->recv + (size_t)i * own, len, s->part_sum);
        dt_codec_encode_ef(s->codec, s->part_sum, s->part_residual, len, s->sums + s->displ_send[me]);
        /* 3. every encoded sum to every rank, decoded alike everywhere */
        st = dt_allgatherv_bytes(c, NULL, s->sums, s->part_bytes, s->displ_send);
    }
    if (st == DT_OK) {
        for (int j = 0; j < N; j++) {
            const size_t lo = s->from[j];
            dt_codec_decode(s->codec, s->sums + s->displ_send[j], s->from[j + 1] - lo, x + lo);
        }
    }
    dt_comm_time_end(c, t0);
    return st;
}

dt_status dt_encoded_sum_save(const dt_encoded_sum *s, const char *prefix, dt_records *out) {
    char name[64];
    snprintf(name, sizeof name, "%s:residual", prefix);
    dt_status st = dt_records_add(out, name, s->residual, s->n);
    if (s->half) return st;
    const size_t len = s->from[s->rank + 1] - s->from[s->rank];
    snprintf(name, sizeof name, "%s:part_residual", prefix);
    return st == DT_OK ? dt_records_add(out, name, s->part_residual, len) : st;
}

dt_status dt_encoded_sum_load(dt_encoded_sum *s, const char *prefix, const dt_tfile *f, const char *path) {
    char name[64];
    snprintf(name, sizeof name, "%s:residual", prefix);
    dt_status st = dt_tfile_take(f, path, name, s->residual, s->n * sizeof(float));
    if (s->half) return st;
    const size_t len = s->from[s->rank + 1] - s->from[s->rank];
    snprintf(name, sizeof name, "%s:part_residual", prefix);
    return st == DT_OK ? dt_tfile_take(f, path, name, s->part_residual, len * sizeof(float)) : st;
}
