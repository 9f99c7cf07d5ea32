/* The --compress codecs (src/comm/codec.c): flag parsing, fp16/bf16 conversions (exact values,
 * ties to even, specials, every half value), round-trip error bounds, int8 per-chunk scales,
 * topk against a sort, error feedback bookkeeping, and the parameter-copy rule keeping the
 * sender's and the receiver's copies identical bit for bit. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm/codec.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return rng_state;
}
static float uniform(void) { return (float)((rnd() >> 11) * (1.0 / 9007199254740992.0)); } /* [0,1) */
static float normal(void) {
    float u = uniform() + 1e-7f, v = uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static dt_codec_spec spec_of(const char *text) {
    dt_codec_spec s;
    dt_status st = dt_codec_parse(text, &s);
    CHECK_MSG(st == DT_OK, "%s: %s", text, dt_last_error());
    return s;
}

static void test_parse(void) {
    dt_codec_spec s;
    CHECK(dt_codec_parse(NULL, &s) == DT_OK && s.kind == DT_CODEC_NONE);
    CHECK(dt_codec_parse("none", &s) == DT_OK && s.kind == DT_CODEC_NONE);
    CHECK(dt_codec_parse("fp16", &s) == DT_OK && s.kind == DT_CODEC_FP16);
    CHECK(dt_codec_parse("bf16", &s) == DT_OK && s.kind == DT_CODEC_BF16);
    CHECK(dt_codec_parse("int8", &s) == DT_OK && s.kind == DT_CODEC_INT8);
    CHECK(dt_codec_parse("topk:0.1", &s) == DT_OK && s.kind == DT_CODEC_TOPK && s.frac == 0.1);
    CHECK(dt_codec_parse("topk:1", &s) == DT_OK && s.kind == DT_CODEC_TOPK && s.frac == 1.0);
    const char *bad[] = {"", "fp32", "FP16", "int4", "topk", "topk:", "topk:0", "topk:-0.1", "topk:1.5",
                         "topk:abc", "topk:0.1x", "topk:nan", "topk:inf", "topk: ", "none ", "top:0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_status st = dt_codec_parse(bad[i], &s);
        CHECK_MSG(st == DT_ERR_ARG, "'%s' accepted", bad[i]);
        CHECK_MSG(strstr(dt_last_error(), "--compress") && !strchr(dt_last_error(), '\n'), "'%s': %s", bad[i], dt_last_error());
    }
    CHECK(dt_codec_parse("topk:0", &s) == DT_ERR_ARG && strstr(dt_last_error(), "0 < F <= 1"));
    char buf[32];
    s = spec_of("topk:0.25");
    CHECK(!strcmp(dt_codec_spec_str(&s, buf, sizeof buf), "topk:0.25"));
    s = spec_of("int8");
    CHECK(!strcmp(dt_codec_spec_str(&s, buf, sizeof buf), "int8"));
    /* powersgd:R: allreduce's low-rank factors, parsed here, never a payload codec */
    s = spec_of("powersgd:4");
    CHECK(s.kind == DT_CODEC_POWERSGD && s.rank == 4 && !strcmp(dt_codec_spec_str(&s, buf, sizeof buf), "powersgd:4"));
    const char *bad_ranks[] = {"powersgd:", "powersgd:0", "powersgd:-1", "powersgd:2x", "powersgd:1025", "powersgd:1.5"};
    for (size_t i = 0; i < sizeof bad_ranks / sizeof bad_ranks[0]; i++)
        CHECK_MSG(dt_codec_parse(bad_ranks[i], &s) == DT_ERR_ARG && strstr(dt_last_error(), "1 <= R <= 1024"), "%s", bad_ranks[i]);
    dt_codec *none = NULL;
    CHECK(dt_codec_create(&(dt_codec_spec){.kind = DT_CODEC_POWERSGD, .rank = 2}, 10, &none) == DT_ERR_ARG && !none);
    /* sizes */
    CHECK(dt_codec_bytes(&(dt_codec_spec){.kind = DT_CODEC_NONE, .frac = 1}, 1000) == 4000);
    CHECK(dt_codec_bytes(&(dt_codec_spec){.kind = DT_CODEC_FP16, .frac = 1}, 1000) == 2000);
    CHECK(dt_codec_bytes(&(dt_codec_spec){.kind = DT_CODEC_BF16, .frac = 1}, 1000) == 2000);
    CHECK(dt_codec_bytes(&(dt_codec_spec){.kind = DT_CODEC_INT8, .frac = 1}, 1000) == 4 * 4 + 1000);
    CHECK(dt_codec_bytes(&(dt_codec_spec){.kind = DT_CODEC_INT8, .frac = 1}, 256) == 4 + 256);
    CHECK(dt_codec_bytes(&(dt_codec_spec){.kind = DT_CODEC_TOPK, .frac = 0.1}, 1000) == 100 * 8);
    CHECK(dt_codec_topk_count(&(dt_codec_spec){.kind = DT_CODEC_TOPK, .frac = 0.001}, 10) == 1);  /* at least one */
    CHECK(dt_codec_topk_count(&(dt_codec_spec){.kind = DT_CODEC_TOPK, .frac = 0.25}, 10) == 3);   /* round(2.5) */
    CHECK(dt_codec_topk_count(&(dt_codec_spec){.kind = DT_CODEC_TOPK, .frac = 1.0}, 10) == 10);
    CHECK(dt_codec_topk_count(&(dt_codec_spec){.kind = DT_CODEC_TOPK, .frac = 0.5}, 0) == 0);
}

static void test_fp16_scalar(void) {
    /* exact values */
    CHECK(dt_f32_to_f16(0.0f) == 0x0000);
    CHECK(dt_f32_to_f16(-0.0f) == 0x8000);
    CHECK(dt_f32_to_f16(1.0f) == 0x3c00);
    CHECK(dt_f32_to_f16(-2.0f) == 0xc000);
    CHECK(dt_f32_to_f16(0.5f) == 0x3800);
    CHECK(dt_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(dt_f32_to_f16(ldexpf(1, -14)) == 0x0400);     /* smallest normal */
    CHECK(dt_f32_to_f16(ldexpf(1, -24)) == 0x0001);     /* smallest subnormal */
    CHECK(dt_f32_to_f16(ldexpf(3, -24)) == 0x0003);
    CHECK(dt_f32_to_f16(ldexpf(1023, -24)) == 0x03ff);  /* largest subnormal */
    /* ties to even and rounding */
    CHECK(dt_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00); /* tie: down to even */
    CHECK(dt_f32_to_f16(1.0f + ldexpf(3, -11)) == 0x3c02); /* tie: up to even */
    CHECK(dt_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)) == 0x3c01);
    CHECK(dt_f32_to_f16(ldexpf(1, -25)) == 0x0000);     /* tie between 0 and 2^-24: even (0) */
    CHECK(dt_f32_to_f16(ldexpf(3, -26)) == 0x0001);     /* 0.75 * 2^-24 */
    CHECK(dt_f32_to_f16(ldexpf(3, -25)) == 0x0002);     /* 1.5 * 2^-24: tie up to even */
    CHECK(dt_f32_to_f16(-ldexpf(1, -26)) == 0x8000);    /* underflow keeps the sign */
    CHECK(dt_f32_to_f16(ldexpf(2047, -25)) == 0x0400);  /* just below 2^-14 rounds to the normal */
    CHECK(dt_f32_to_f16(1e-30f) == 0x0000);
    CHECK(dt_f32_to_f16(FLT_TRUE_MIN) == 0x0000);
    /* overflow */
    CHECK(dt_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(dt_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(dt_f32_to_f16(-65520.0f) == 0xfc00);
    CHECK(dt_f32_to_f16(1e10f) == 0x7c00);
    CHECK(dt_f32_to_f16(FLT_MAX) == 0x7c00);
    CHECK(dt_f32_to_f16(INFINITY) == 0x7c00);
    CHECK(dt_f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(isnan(dt_f16_to_f32(dt_f32_to_f16(NAN))));
    CHECK((dt_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (dt_f32_to_f16(NAN) & 0x3ff) != 0);
    CHECK(isnan(dt_f16_to_f32(dt_f32_to_f16(from_bits(0x7f800001u))))); /* signalling nan stays nan */
    CHECK(dt_f16_to_f32(0x7c00) == INFINITY && dt_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(dt_f16_to_f32(0x0001) == ldexpf(1, -24));
    CHECK(dt_f16_to_f32(0x03ff) == ldexpf(1023, -24));
    CHECK(bits(dt_f16_to_f32(0x8000)) == 0x80000000u);
    /* every half value survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_f16_to_f32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) bad += !isnan(f);
        else bad += dt_f32_to_f16(f) != h;
    }
    CHECK_MSG(bad == 0, "%d half values do not round-trip", bad);
    /* relative error <= 2^-11 in the normal range, absolute <= 2^-25 below it */
    double worst = 0;
    for (int i = 0; i < 200000; i++) {
        float x = ldexpf(1.0f + uniform(), (int)(rnd() % 30) - 14) * (rnd() & 1 ? 1 : -1);
        if (fabsf(x) >= 65504.0f) continue;
        double e = fabs((double)dt_f16_to_f32(dt_f32_to_f16(x)) - x) / fabs(x);
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= ldexp(1, -11), "fp16 worst relative error %g", worst);
    int far = 0;
    for (int i = 0; i < 100000; i++) {
        float x = ldexpf(uniform(), -14) * (rnd() & 1 ? 1 : -1);
        far += !(fabs((double)dt_f16_to_f32(dt_f32_to_f16(x)) - x) <= ldexp(1, -25));
    }
    CHECK_MSG(far == 0, "%d values below 2^-14 off by more than 2^-25", far);
#ifdef __FLT16_MAX__
    /* against the compiler's own float -> _Float16 (correctly rounded) on random bit patterns */
    int mism = 0;
    for (int i = 0; i < 1000000; i++) {
        float x = from_bits((uint32_t)rnd());
        if (isnan(x)) continue;
        _Float16 h = (_Float16)x;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        mism += hb != dt_f32_to_f16(x);
    }
    CHECK_MSG(mism == 0, "%d of 1e6 random floats convert differently from _Float16", mism);
#endif
}

static void test_bf16_scalar(void) {
    CHECK(dt_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(dt_f32_to_bf16(-0.0f) == 0x8000);
    CHECK(dt_f32_to_bf16(0.0f) == 0x0000);
    CHECK(dt_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80); /* tie: even */
    CHECK(dt_f32_to_bf16(1.0f + ldexpf(3, -8)) == 0x3f82); /* tie: up to even */
    CHECK(dt_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)) == 0x3f81);
    CHECK(dt_f32_to_bf16(INFINITY) == 0x7f80 && dt_f32_to_bf16(-INFINITY) == 0xff80);
    CHECK(dt_f32_to_bf16(FLT_MAX) == 0x7f80); /* rounds past the largest bf16: inf */
    CHECK(isnan(dt_bf16_to_f32(dt_f32_to_bf16(NAN))));
    CHECK(isnan(dt_bf16_to_f32(dt_f32_to_bf16(from_bits(0x7f800001u))))); /* low payload: still nan */
    CHECK(dt_bf16_to_f32(dt_f32_to_bf16(3.0f)) == 3.0f);
    CHECK(dt_bf16_to_f32(0x0001) == from_bits(0x00010000u)); /* subnormals are kept */
    CHECK(dt_f32_to_bf16(from_bits(0x00008000u)) == 0x0000); /* tie to even at the bottom */
    CHECK(dt_f32_to_bf16(from_bits(0x00018000u)) == 0x0002);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        bad += dt_f32_to_bf16(f) != h;
    }
    CHECK_MSG(bad == 0, "%d bf16 values do not round-trip", bad);
    double worst = 0;
    for (int i = 0; i < 200000; i++) {
        float x = ldexpf(1.0f + uniform(), (int)(rnd() % 200) - 100) * (rnd() & 1 ? 1 : -1);
        double e = fabs((double)dt_bf16_to_f32(dt_f32_to_bf16(x)) - x) / fabs(x);
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= ldexp(1, -8), "bf16 worst relative error %g", worst);
}

/* encode + decode through the codec object, and decode_add == decode + base */
static void roundtrip(dt_codec *c, const float *x, size_t n, float *y, uint8_t *buf) {
    size_t b = dt_codec_encode(c, x, n, buf);
    CHECK(b == dt_codec_bytes(dt_codec_get_spec(c), n));
    dt_codec_decode(c, buf, n, y);
}

static void test_codec_arrays(void) {
    enum { N = 1000 };
    float x[N], y[N], z[N];
    uint8_t buf[N * 8];
    for (int i = 0; i < N; i++) x[i] = normal() * ldexpf(1, (int)(rnd() % 20) - 10);
    const char *names[] = {"none", "fp16", "bf16", "int8", "topk:0.1"};
    for (int k = 0; k < 5; k++) {
        dt_codec_spec s = spec_of(names[k]);
        dt_codec *c;
        CHECK(dt_codec_create(&s, N, &c) == DT_OK);
        roundtrip(c, x, N, y, buf);
        for (int i = 0; i < N; i++) z[i] = (float)i;
        dt_codec_decode_add(c, buf, N, z);
        int same = 1;
        for (int i = 0; i < N; i++) same &= z[i] == (float)i + y[i];
        CHECK_MSG(same, "%s: decode_add != base + decode", names[k]);
        if (s.kind == DT_CODEC_NONE) CHECK(!memcmp(x, y, sizeof x));
        if (s.kind == DT_CODEC_FP16 || s.kind == DT_CODEC_BF16) {
            const double tol = s.kind == DT_CODEC_FP16 ? ldexp(1, -11) : ldexp(1, -8);
            int ok = 1;
            for (int i = 0; i < N; i++)
                ok &= fabs((double)y[i] - x[i]) <= tol * fabs(x[i]) + (s.kind == DT_CODEC_FP16 ? ldexp(1, -25) : 0);
            CHECK_MSG(ok, "%s round trip beyond its bound", names[k]);
        }
        dt_codec_free(c);
    }
    /* specials through the fp16 codec */
    dt_codec_spec s = spec_of("fp16");
    dt_codec *c;
    CHECK(dt_codec_create(&s, 8, &c) == DT_OK);
    float sp[7] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 65520.0f, ldexpf(5, -24)};
    roundtrip(c, sp, 7, y, buf);
    CHECK(y[0] == INFINITY && y[1] == -INFINITY && isnan(y[2]) && bits(y[3]) == 0 && bits(y[4]) == 0x80000000u);
    CHECK(y[5] == INFINITY && y[6] == ldexpf(5, -24));
    dt_codec_free(c);
}

static void test_int8(void) {
    enum { N = 1000 }; /* 3 full chunks and a short one */
    float x[N], y[N];
    uint8_t buf[N + 64];
    dt_codec_spec s = spec_of("int8");
    dt_codec *c;
    CHECK(dt_codec_create(&s, N, &c) == DT_OK);
    for (int i = 0; i < N; i++) x[i] = normal() * (i < 256 ? 1e-3f : i < 512 ? 10.0f : 1.0f);
    for (int i = 768; i < 800; i++) x[i] = 0.0f;
    roundtrip(c, x, N, y, buf);
    int ok = 1, exact_max = 1;
    for (int ch = 0; ch * 256 < N; ch++) {
        int a = ch * 256, b = a + 256 < N ? a + 256 : N, at = a;
        float mx = 0, scale;
        for (int i = a; i < b; i++) if (fabsf(x[i]) > mx) { mx = fabsf(x[i]); at = i; }
        memcpy(&scale, buf + 4 * ch, 4);
        CHECK(scale == mx / 127.0f);
        for (int i = a; i < b; i++) ok &= fabs((double)y[i] - x[i]) <= scale * 0.5 * (1 + 1e-6) + 1e-12;
        exact_max &= fabsf(y[at] - x[at]) <= mx * 1e-6f; /* the largest entry is +-127 * scale */
    }
    CHECK_MSG(ok, "int8 error above scale/2");
    CHECK(exact_max);
    /* representable values come back exactly: multiples of a power-of-two scale */
    float r[300];
    for (int i = 0; i < 300; i++) r[i] = (float)((int)(rnd() % 255) - 127) * 0.125f;
    r[0] = 127 * 0.125f;
    r[256] = -127 * 0.125f;
    float scale = 127 * 0.125f / 127.0f;
    CHECK(scale == 0.125f);
    roundtrip(c, r, 300, y, buf);
    CHECK(!memcmp(r, y, sizeof r));
    /* an all-zero chunk: scale 0, zeros back; nan does not become undefined int8 */
    float zr[10] = {0}, zn[4] = {1.0f, NAN, -2.0f, 0.5f};
    roundtrip(c, zr, 10, y, buf);
    CHECK(y[0] == 0 && y[9] == 0);
    roundtrip(c, zn, 4, y, buf);
    CHECK(fabsf(y[0] - 1.0f) <= 1.0f / 127 && y[2] == -2.0f && fabsf(y[3] - 0.5f) <= 1.0f / 127 && y[1] == 0.0f);
    dt_codec_free(c);
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void test_topk(void) {
    enum { N = 10007 };
    static float x[N], y[N], m[N], sel[N];
    static uint8_t buf[N * 8];
    static uint8_t picked[N];
    const double fr[] = {1e-5, 0.01, 0.1, 0.5, 1.0};
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            x[i] = round == 2 ? (float)((int)(rnd() % 7) - 3) : normal() * (round ? 1.0f : ldexpf(1, (int)(rnd() % 30) - 15));
        for (int f = 0; f < 5; f++) {
            dt_codec_spec s = {.kind = DT_CODEC_TOPK, .frac = fr[f]};
            const size_t k = dt_codec_topk_count(&s, N);
            dt_codec *c;
            CHECK(dt_codec_create(&s, N, &c) == DT_OK);
            CHECK(dt_codec_encode(c, x, N, buf) == 8 * k);
            memset(picked, 0, sizeof picked);
            int distinct = 1, values = 1;
            float minsel = INFINITY;
            for (size_t j = 0; j < k; j++) {
                uint32_t i;
                float v;
                memcpy(&i, buf + 8 * j, 4);
                memcpy(&v, buf + 8 * j + 4, 4);
                if (i >= N || picked[i]) { distinct = 0; continue; }
                picked[i] = 1;
                values &= v == x[i];
                if (fabsf(v) < minsel) minsel = fabsf(v);
                sel[j] = fabsf(v);
            }
            CHECK_MSG(distinct && values, "topk:%g: indices not distinct or values not the inputs", fr[f]);
            /* against a full sort: the sent magnitudes, sorted, are the k largest */
            for (int i = 0; i < N; i++) m[i] = fabsf(x[i]);
            qsort(m, N, sizeof(float), cmp_desc);
            qsort(sel, k, sizeof(float), cmp_desc);
            CHECK_MSG(minsel == m[k - 1], "topk:%g: smallest sent %g, k-th largest %g", fr[f], minsel, m[k - 1]);
            CHECK_MSG(!memcmp(sel, m, k * sizeof(float)), "topk:%g: sent magnitudes are not the k largest", fr[f]);
            float maxrest = 0;
            for (int i = 0; i < N; i++) if (!picked[i] && fabsf(x[i]) > maxrest) maxrest = fabsf(x[i]);
            CHECK(k == N || maxrest <= minsel);
            /* decode: the picked entries, zero elsewhere */
            dt_codec_decode(c, buf, N, y);
            int dec = 1;
            for (int i = 0; i < N; i++) dec &= y[i] == (picked[i] ? x[i] : 0.0f);
            CHECK(dec);
            dt_codec_free(c);
        }
    }
    /* all equal (the worst case of a two-way partition), and a nan: still exactly k */
    dt_codec_spec s = {.kind = DT_CODEC_TOPK, .frac = 0.3};
    dt_codec *c;
    CHECK(dt_codec_create(&s, N, &c) == DT_OK);
    for (int i = 0; i < N; i++) x[i] = 1.0f;
    x[77] = NAN;
    const size_t k = dt_codec_topk_count(&s, N);
    dt_codec_encode(c, x, N, buf);
    dt_codec_decode(c, buf, N, y);
    int cnt = 0;
    for (int i = 0; i < N; i++) cnt += y[i] != 0.0f;
    CHECK((size_t)cnt == k && isnan(y[77]));
    float one = -3.0f;
    CHECK(dt_codec_encode(c, &one, 1, buf) == 8);
    dt_codec_decode(c, buf, 1, y);
    CHECK(y[0] == -3.0f);
    dt_codec_free(c);
}

/* error feedback: sum of transmitted + final residual == sum of inputs, to rounding */
static void test_error_feedback(void) {
    enum { N = 777, STEPS = 300 };
    static float g[N], e[N], t[N];
    static double sum_g[N], sum_t[N];
    static uint8_t buf[N * 8];
    const char *names[] = {"fp16", "bf16", "int8", "topk:0.05", "topk:0.5"};
    for (int k = 0; k < 5; k++) {
        dt_codec_spec s = spec_of(names[k]);
        dt_codec *c;
        CHECK(dt_codec_create(&s, N, &c) == DT_OK);
        memset(e, 0, sizeof e);
        memset(sum_g, 0, sizeof sum_g);
        memset(sum_t, 0, sizeof sum_t);
        double mag = 0;
        for (int step = 0; step < STEPS; step++) {
            for (int i = 0; i < N; i++) {
                g[i] = normal() * 1e-2f * (1 + i % 5);
                sum_g[i] += g[i];
                mag += fabs(g[i]);
            }
            dt_codec_encode_ef(c, g, e, N, buf);
            dt_codec_decode(c, buf, N, t);
            for (int i = 0; i < N; i++) sum_t[i] += t[i];
        }
        double worst = 0, emax = 0;
        for (int i = 0; i < N; i++) {
            double d = fabs(sum_t[i] + e[i] - sum_g[i]);
            if (d > worst) worst = d;
            if (fabs(e[i]) > emax) emax = fabs(e[i]);
        }
        /* each step rounds p = g + e once in float (2^-24 relative); |p| stays within ~20 |g| */
        const double tol = 4e-6 * (mag / N);
        CHECK_MSG(worst <= tol, "%s: |sum t + e - sum g| = %g > %g", names[k], worst, tol);
        /* and the residual stays bounded (nothing is lost, nothing piles up without limit) */
        CHECK_MSG(emax < 1.0, "%s: residual %g", names[k], emax);
        dt_codec_free(c);
    }
}

/* parameter payloads: the sender's and the receiver's copies stay identical bit for bit, and
 * follow x */
static void test_parameter_copies(void) {
    enum { N = 1500, ROUNDS = 400 };
    static float x[N], cs[N], cr[N];
    static uint8_t buf[N * 8];
    const char *names[] = {"none", "fp16", "bf16", "int8", "topk:0.01", "topk:0.2"};
    for (int k = 0; k < 6; k++) {
        dt_codec_spec s = spec_of(names[k]);
        dt_codec *snd, *rcv;
        CHECK(dt_codec_create(&s, N, &snd) == DT_OK && dt_codec_create(&s, N, &rcv) == DT_OK);
        for (int i = 0; i < N; i++) x[i] = cs[i] = cr[i] = normal() * 0.1f;
        int identical = 1;
        for (int r = 0; r < ROUNDS; r++) {
            if (r < ROUNDS / 2)
                for (int i = 0; i < N; i++) x[i] += normal() * 1e-3f; /* training moves x */
            dt_codec_encode_delta(snd, x, cs, N, buf);
            dt_codec_decode_add(rcv, buf, N, cr);
            identical &= !memcmp(cs, cr, sizeof cs);
        }
        CHECK_MSG(identical, "%s: sender and receiver copies differ", names[k]);
        /* once x stops moving the copy catches up (topk too: what was owed gets sent) */
        double worst = 0;
        for (int i = 0; i < N; i++) if (fabs((double)cr[i] - x[i]) > worst) worst = fabs((double)cr[i] - x[i]);
        CHECK_MSG(worst <= 1e-6, "%s: copy is %g from x after x stopped", names[k], worst);
        dt_codec_free(snd);
        dt_codec_free(rcv);
    }
}

int main(void) {
    test_parse();
    test_fp16_scalar();
    test_bf16_scalar();
    test_codec_arrays();
    test_int8();
    test_topk();
    test_error_feedback();
    test_parameter_copies();
    return test_summary("test_codec");
}
