/* Payload codecs for --compress (see codec.h). */
#include "comm/codec.h"
#include "core/alloc.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dt_codec {
    dt_codec_spec spec;
    size_t max_n;
    float *work;      /* max_n: x - copy of a parameter payload */
    float *mag;       /* topk: max_n magnitudes, partitioned together with idx */
    uint32_t *idx;    /* topk: max_n indices */
};

/* ------------------------------------------------------------------ the flag */

dt_status dt_codec_parse(const char *text, dt_codec_spec *out) {
    *out = (dt_codec_spec){.kind = DT_CODEC_NONE, .frac = 1.0};
    if (!text || !strcmp(text, "none")) return DT_OK;
    if (!strcmp(text, "fp16")) { out->kind = DT_CODEC_FP16; return DT_OK; }
    if (!strcmp(text, "bf16")) { out->kind = DT_CODEC_BF16; return DT_OK; }
    if (!strcmp(text, "int8")) { out->kind = DT_CODEC_INT8; return DT_OK; }
    if (!strncmp(text, "topk:", 5)) {
        const char *num = text + 5;
        char *end = NULL;
        errno = 0;
        double f = strtod(num, &end);
        if (end == num || *end || errno || !(f > 0.0 && f <= 1.0))
            return dt_fail(DT_ERR_ARG, "--compress %s: topk:F needs a fraction 0 < F <= 1 (e.g. topk:0.1)", text);
        out->kind = DT_CODEC_TOPK;
        out->frac = f;
        return DT_OK;
    }
    if (!strncmp(text, "powersgd:", 9)) {
        const char *num = text + 9;
        char *end = NULL;
        errno = 0;
        long r = strtol(num, &end, 10);
        if (end == num || *end || errno || r < 1 || r > 1024)
            return dt_fail(DT_ERR_ARG, "--compress %s: powersgd:R needs a rank 1 <= R <= 1024 (e.g. powersgd:2)", text);
        out->kind = DT_CODEC_POWERSGD;
        out->rank = (int)r;
        return DT_OK;
    }
    return dt_fail(DT_ERR_ARG, "--compress %s: expected none, fp16, bf16, int8, topk:F (0 < F <= 1) or powersgd:R", text);
}

const char *dt_codec_spec_str(const dt_codec_spec *spec, char *buf, size_t len) {
    static const char *names[] = {"none", "fp16", "bf16", "int8", "topk", "powersgd"};
    if (spec->kind == DT_CODEC_TOPK) snprintf(buf, len, "topk:%g", spec->frac);
    else if (spec->kind == DT_CODEC_POWERSGD) snprintf(buf, len, "powersgd:%d", spec->rank);
    else snprintf(buf, len, "%s", names[spec->kind]);
    return buf;
}

size_t dt_codec_topk_count(const dt_codec_spec *spec, size_t n) {
    if (spec->kind != DT_CODEC_TOPK) return n;
    double k = floor(spec->frac * (double)n + 0.5);
    size_t kk = k < 1.0 ? 1 : (size_t)k;
    return kk > n ? n : kk;
}

static size_t nchunks(size_t n) { return (n + DT_CODEC_CHUNK - 1) / DT_CODEC_CHUNK; }

size_t dt_codec_bytes(const dt_codec_spec *spec, size_t n) {
    switch (spec->kind) {
    case DT_CODEC_NONE: return n * sizeof(float);
    case DT_CODEC_FP16:
    case DT_CODEC_BF16: return n * sizeof(uint16_t);
    case DT_CODEC_INT8: return nchunks(n) * sizeof(float) + n;
    case DT_CODEC_TOPK: return dt_codec_topk_count(spec, n) * (sizeof(uint32_t) + sizeof(float));
    case DT_CODEC_POWERSGD: return 0; /* not a payload codec (allreduce's low-rank factors) */
    }
    return 0;
}

/* ------------------------------------------------------------------ create / free */

dt_status dt_codec_create(const dt_codec_spec *spec, size_t max_n, dt_codec **out) {
    *out = NULL;
    if (spec->kind == DT_CODEC_POWERSGD)
        return dt_fail(DT_ERR_ARG, "--compress powersgd:%d: low-rank factors are allreduce's own, not a payload codec", spec->rank);
    dt_codec *c;
    DT_TRY(dt_calloc(c, 1, "the codec"));
    c->spec = *spec;
    c->max_n = max_n;
    dt_status st = dt_malloc(c->work, max_n, "compression buffers for %zu values", max_n);
    if (st == DT_OK && spec->kind == DT_CODEC_TOPK &&
        (st = dt_malloc(c->mag, max_n, "compression buffers for %zu values", max_n)) == DT_OK)
        st = dt_malloc(c->idx, max_n, "compression buffers for %zu values", max_n);
    if (st != DT_OK) {
        dt_codec_free(c);
        return st;
    }
    *out = c;
    return DT_OK;
}

void dt_codec_free(dt_codec *c) {
    if (c) dt_free_all(c->work, c->mag, c->idx, c);
}

const dt_codec_spec *dt_codec_get_spec(const dt_codec *c) { return &c->spec; }

/* ------------------------------------------------------------------ scalar conversions */

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

uint16_t dt_f32_to_f16(float f) {
    const uint32_t x = bits_of(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, or nan (kept quiet, with the top of its payload) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                                  /* normal half: >= 2^-14 */
        uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);          /* round to nearest even */
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));   /* rebias 127 -> 15 */
    }
    if (ax < 0x33000000u) return sign; /* below 2^-25: rounds to zero (2^-25 itself ties to 0 below) */
    /* subnormal half: q * 2^-24, q = m * 2^(e-126) with the implicit bit in m */
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e; /* 14..24 */
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++; /* may carry into the smallest normal */
    return (uint16_t)(sign | q);
}

float dt_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return float_of(sign | 0x7f800000u | (m << 13));
    if (e) return float_of(sign | ((e + 112u) << 23) | (m << 13));
    if (!m) return float_of(sign);
    e = 113u; /* subnormal: normalise */
    while (!(m & 0x400u)) { m <<= 1; e--; }
    return float_of(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

/* ------------------------------------------------------------------ topk selection */

static void swap2(float *m, uint32_t *ix, size_t a, size_t b) {
    float t = m[a]; m[a] = m[b]; m[b] = t;
    uint32_t u = ix[a]; ix[a] = ix[b]; ix[b] = u;
}

/* Reorders (mag, idx)[0..n) so that the first k hold the k largest magnitudes (nth_element:
 * quickselect with a three-way partition, so runs of equal values cost nothing; the pivot
 * comes from a fixed pseudo-random sequence, so the result is deterministic). */
static void select_top(float *mag, uint32_t *idx, size_t n, size_t k) {
    size_t lo = 0, hi = n;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    while (hi - lo > 1) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        const float v = mag[lo + (size_t)(s % (hi - lo))];
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) > v, [lt,gt) == v, [gt,hi) < v */
        while (i < gt) {
            if (mag[i] > v) swap2(mag, idx, lt++, i++);
            else if (mag[i] < v) swap2(mag, idx, i, --gt);
            else i++;
        }
        if (k < lt) hi = lt;
        else if (k <= gt) return;
        else lo = gt;
    }
}

/* ------------------------------------------------------------------ encode / decode */

size_t dt_codec_encode(dt_codec *c, const float *x, size_t n, void *out) {
    assert(n <= c->max_n);
    uint8_t *o = out;
    switch (c->spec.kind) {
    case DT_CODEC_NONE:
        memcpy(o, x, n * sizeof(float));
        break;
    case DT_CODEC_FP16:
        for (size_t i = 0; i < n; i++) { uint16_t h = dt_f32_to_f16(x[i]); memcpy(o + 2 * i, &h, 2); }
        break;
    case DT_CODEC_BF16:
        for (size_t i = 0; i < n; i++) { uint16_t h = dt_f32_to_bf16(x[i]); memcpy(o + 2 * i, &h, 2); }
        break;
    case DT_CODEC_INT8: {
        const size_t nc = nchunks(n);
        int8_t *q = (int8_t *)(o + nc * sizeof(float));
        for (size_t ch = 0; ch < nc; ch++) {
            const size_t a = ch * DT_CODEC_CHUNK, b = a + DT_CODEC_CHUNK < n ? a + DT_CODEC_CHUNK : n;
            float mx = 0.0f;
            for (size_t i = a; i < b; i++) mx = fmaxf(mx, fabsf(x[i])); /* fmaxf skips nan */
            const float scale = mx / 127.0f;
            memcpy(o + ch * sizeof(float), &scale, sizeof scale);
            for (size_t i = a; i < b; i++) {
                float r = scale > 0.0f ? x[i] / scale : 0.0f;
                if (r != r) r = 0.0f; /* nan (or inf/inf): no defined int8 */
                r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
                q[i] = (int8_t)lrintf(r);
            }
        }
        break;
    }
    case DT_CODEC_TOPK: {
        const size_t k = dt_codec_topk_count(&c->spec, n);
        for (size_t i = 0; i < n; i++) {
            float m = fabsf(x[i]);
            c->mag[i] = m != m ? INFINITY : m; /* nan first: a total order for the selection */
            c->idx[i] = (uint32_t)i;
        }
        select_top(c->mag, c->idx, n, k);
        for (size_t j = 0; j < k; j++) {
            const uint32_t i = c->idx[j];
            memcpy(o + 8 * j, &i, 4);
            memcpy(o + 8 * j + 4, &x[i], 4);
        }
        break;
    }
    case DT_CODEC_POWERSGD: break; /* never made (dt_codec_create) */
    }
    return dt_codec_bytes(&c->spec, n);
}

/* x = decode (op 0), x += decode (op 1), x -= decode (op -1) */
static void decode_op(const dt_codec *c, const void *in, size_t n, float *x, int op) {
    const uint8_t *p = in;
#define APPLY(i, v) do { float v_ = (v); if (op == 0) x[i] = v_; else if (op > 0) x[i] += v_; else x[i] -= v_; } while (0)
    switch (c->spec.kind) {
    case DT_CODEC_NONE:
        for (size_t i = 0; i < n; i++) { float v; memcpy(&v, p + 4 * i, 4); APPLY(i, v); }
        break;
    case DT_CODEC_FP16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); APPLY(i, dt_f16_to_f32(h)); }
        break;
    case DT_CODEC_BF16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); APPLY(i, dt_bf16_to_f32(h)); }
        break;
    case DT_CODEC_INT8: {
        const size_t nc = nchunks(n);
        const int8_t *q = (const int8_t *)(p + nc * sizeof(float));
        for (size_t ch = 0; ch < nc; ch++) {
            const size_t a = ch * DT_CODEC_CHUNK, b = a + DT_CODEC_CHUNK < n ? a + DT_CODEC_CHUNK : n;
            float scale;
            memcpy(&scale, p + ch * sizeof(float), sizeof scale);
            for (size_t i = a; i < b; i++) APPLY(i, (float)q[i] * scale);
        }
        break;
    }
    case DT_CODEC_TOPK: {
        const size_t k = dt_codec_topk_count(&c->spec, n);
        if (op == 0) memset(x, 0, n * sizeof(float));
        for (size_t j = 0; j < k; j++) {
            uint32_t i;
            float v;
            memcpy(&i, p + 8 * j, 4);
            memcpy(&v, p + 8 * j + 4, 4);
            if (i < n) APPLY(i, v); /* never out of bounds, whatever the bytes say */
        }
        break;
    }
    case DT_CODEC_POWERSGD: break; /* never made (dt_codec_create) */
    }
#undef APPLY
}

void dt_codec_decode(const dt_codec *c, const void *in, size_t n, float *x) { decode_op(c, in, n, x, 0); }
void dt_codec_decode_add(const dt_codec *c, const void *in, size_t n, float *x) { decode_op(c, in, n, x, 1); }

size_t dt_codec_encode_ef(dt_codec *c, const float *g, float *residual, size_t n, void *out) {
    for (size_t i = 0; i < n; i++) residual[i] = g[i] + residual[i]; /* p = g + e */
    size_t bytes = dt_codec_encode(c, residual, n, out);
    decode_op(c, out, n, residual, -1); /* e = p - decode(encode(p)) */
    return bytes;
}

size_t dt_codec_encode_delta(dt_codec *c, const float *x, float *copy, size_t n, void *out) {
    assert(n <= c->max_n);
    for (size_t i = 0; i < n; i++) c->work[i] = x[i] - copy[i];
    size_t bytes = dt_codec_encode(c, c->work, n, out);
    dt_codec_decode_add(c, out, n, copy); /* what the receiver does, the same way */
    return bytes;
}
