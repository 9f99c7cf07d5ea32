/* Compressed averaging of parameters through rank 0 (see paramavg.h). */
#include "schemes/paramavg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/tensorfile.h"

struct dt_param_avg {
    dt_codec *codec;
    size_t np, ns, bytes; /* bytes: encoded parameters */
    size_t up_bytes, down_bytes;
    float *mine;          /* not rank 0: the copy rank 0 holds of my parameters */
    float *copies;        /* rank 0: N x np, rank r's copy at r*np (its own at 0) */
    float *global;        /* g: the last global model every rank holds */
    float *avg, *savg;    /* rank 0: the weighted means of parameters and state */
    uint8_t *up, *ups, *down;
};

const char *const dt_param_weighting_words[] = {"average", "samples", "loss", NULL};

float dt_param_weight(dt_param_weighting k, int shard_n, double round_loss, long round_batches) {
    if (k == DT_WEIGHT_SAMPLES) return (float)shard_n;
    if (k == DT_WEIGHT_LOSS) return round_batches ? (float)(round_loss / round_batches) : 1.0f;
    return 1.0f;
}

uint64_t dt_param_avg_round_msgs(const dt_comm *c) {
    if (c->size < 2) return 0;
    return c->rank == 0 ? (uint64_t)(c->size - 1) : 1;
}

void dt_param_avg_free(dt_param_avg *a) {
    if (!a) return;
    dt_codec_free(a->codec);
    dt_free_all(a->mine, a->copies, a->global, a->avg, a->savg, a->up, a->ups, a->down, a);
}

dt_status dt_param_avg_create(const dt_codec_spec *spec, dt_comm *c, const float *x, size_t np, size_t ns,
                              dt_param_avg **out) {
    *out = NULL;
    dt_param_avg *a;
    DT_TRY(dt_calloc(a, 1, "the parameter average"));
    dt_status st = dt_codec_create(spec, np, &a->codec);
    if (st != DT_OK) { free(a); return st; }
    a->np = np;
    a->ns = ns;
    a->bytes = dt_codec_bytes(spec, np);
    a->up_bytes = sizeof(float) * (1 + ns) + a->bytes;
    a->down_bytes = sizeof(float) * ns + a->bytes;
    const size_t n1 = np ? np : 1, N = (size_t)c->size;
    const char *what = "compression buffers of %zu values";
    st = dt_malloc(a->global, np, what, np);
    if (st == DT_OK) st = dt_malloc(a->up, a->up_bytes, what, np);
    if (st == DT_OK) st = dt_malloc(a->down, a->down_bytes, what, np);
    if (st == DT_OK && c->rank == 0) st = dt_malloc(a->copies, N * n1, what, np);
    if (st == DT_OK && c->rank == 0) st = dt_malloc(a->avg, np, what, np);
    if (st == DT_OK && c->rank == 0) st = dt_malloc(a->savg, ns, what, np);
    if (st == DT_OK && c->rank == 0) st = dt_malloc(a->ups, N * a->up_bytes, what, np);
    if (st == DT_OK && c->rank != 0) st = dt_malloc(a->mine, np, what, np);
    if (st != DT_OK) { dt_param_avg_free(a); return st; }
    /* every copy starts from rank 0's parameters (set-up, not counted) */
    if (c->rank == 0) memcpy(a->global, x, np * sizeof(float));
    st = dt_bcast_setup(c, a->global, np, 0, "MPI_Bcast (starting copies)");
    if (st != DT_OK) { dt_param_avg_free(a); return st; }
    if (c->rank == 0)
        for (size_t r = 0; r < N; r++) memcpy(a->copies + r * np, a->global, np * sizeof(float));
    else
        memcpy(a->mine, a->global, np * sizeof(float));
    *out = a;
    return DT_OK;
}

static dt_status average(dt_param_avg *a, dt_comm *c, float *x, float *state, float w) {
    const size_t np = a->np, ns = a->ns, U = a->up_bytes, hdr = sizeof(float) * (1 + ns);
    memcpy(a->up, &w, sizeof w);
    if (ns) memcpy(a->up + sizeof(float), state, ns * sizeof(float));
    dt_codec_encode_delta(a->codec, x, c->rank == 0 ? a->copies : a->mine, np, a->up + hdr);
    dt_status st = dt_gather_bytes(c, a->up, a->ups, U);
    if (st != DT_OK) return st;
    if (c->rank == 0) {
        float W = 0.0f;
        memset(a->avg, 0, np * sizeof(float));
        if (ns) memset(a->savg, 0, ns * sizeof(float));
        for (int r = 0; r < c->size; r++) {
            const uint8_t *msg = a->ups + (size_t)r * U;
            float *cr = a->copies + (size_t)r * np, wr;
            memcpy(&wr, msg, sizeof wr);
            W += wr;
            if (r > 0) dt_codec_decode_add(a->codec, msg + hdr, np, cr); /* rank 0's was updated when sent */
            for (size_t i = 0; i < np; i++) a->avg[i] += wr * cr[i];
            for (size_t j = 0; j < ns; j++) {
                float v;
                memcpy(&v, msg + sizeof(float) * (1 + j), sizeof v);
                a->savg[j] += wr * v;
            }
        }
        const float inv = 1.0f / W;
        for (size_t i = 0; i < np; i++) a->avg[i] *= inv;
        for (size_t j = 0; j < ns; j++) a->savg[j] *= inv;
        if (ns) memcpy(a->down, a->savg, ns * sizeof(float));
        dt_codec_encode_delta(a->codec, a->avg, a->global, np, a->down + sizeof(float) * ns);
    }
    st = dt_bcast_bytes(c, a->down, a->down_bytes, 0);
    if (st != DT_OK) return st;
    if (c->rank != 0) dt_codec_decode_add(a->codec, a->down + sizeof(float) * ns, np, a->global);
    if (ns) memcpy(state, a->down, ns * sizeof(float));
    memcpy(x, a->global, np * sizeof(float));
    return DT_OK;
}

dt_status dt_param_avg_run(dt_param_avg *a, dt_comm *c, float *x, float *state, float w) {
    const double t0 = dt_comm_time_begin(c); /* the codec's time is communication's */
    const dt_status st = average(a, c, x, state, w);
    dt_comm_time_end(c, t0);
    return st;
}

/* rank 0: every rank's copy (N x np); elsewhere the one copy rank 0 holds of mine; all: g */
dt_status dt_param_avg_save(const dt_param_avg *a, const dt_comm *c, dt_records *out) {
    dt_status st = dt_records_add(out, "global", a->global, a->np);
    if (st == DT_OK)
        st = dt_records_add(out, "copies", c->rank == 0 ? a->copies : a->mine, (c->rank == 0 ? (size_t)c->size : 1) * a->np);
    return st;
}

dt_status dt_param_avg_load(dt_param_avg *a, const dt_comm *c, const dt_tfile *f, const char *path) {
    dt_status st = dt_tfile_take(f, path, "global", a->global, a->np * sizeof(float));
    if (st == DT_OK)
        st = dt_tfile_take(f, path, "copies", c->rank == 0 ? a->copies : a->mine,
                           (c->rank == 0 ? (size_t)c->size : 1) * a->np * sizeof(float));
    return st;
}
