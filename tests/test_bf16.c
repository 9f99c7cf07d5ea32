/* --precision bf16 outside the PyTorch oracle (test_oracle.c holds its numbers to PyTorch):
 * the bf16 conversions, the AVX-512, AVX2 and portable forms bit for bit, on every class of float;
 * switching a model's precision (and back to fp32 bit for bit); what reserve sets aside; a few
 * steps of training in bf16 that learn and stay close to fp32 without being fp32. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtrain.h"
#include "layers/bf16_array.h"
#include "layers/kernels.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Known roundings: nearest, ties to even, overflow to infinity, NaN kept NaN (and quiet). */
static void test_scalar(void) {
    CHECK(dt_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(dt_f32_to_bf16(-2.0f) == 0xc000);
    CHECK(dt_f32_to_bf16(from_bits(0x3f808000)) == 0x3f80); /* tie, even stays */
    CHECK(dt_f32_to_bf16(from_bits(0x3f818000)) == 0x3f82); /* tie, odd goes up */
    CHECK(dt_f32_to_bf16(from_bits(0x3f808001)) == 0x3f81); /* above the tie */
    CHECK(dt_f32_to_bf16(from_bits(0x3f807fff)) == 0x3f80); /* below it */
    CHECK(dt_f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80); /* FLT_MAX rounds to +inf */
    CHECK(dt_f32_to_bf16(INFINITY) == 0x7f80 && dt_f32_to_bf16(-INFINITY) == 0xff80);
    CHECK(dt_f32_to_bf16(from_bits(0x00008000)) == 0x0000); /* subnormal tie to even zero */
    CHECK(dt_f32_to_bf16(from_bits(0x00018000)) == 0x0002);
    CHECK(dt_f32_to_bf16(-0.0f) == 0x8000);
    const uint16_t nan = dt_f32_to_bf16(from_bits(0x7f800001)); /* signalling NaN, payload low */
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);         /* still NaN, not infinity */
    CHECK(isnan(dt_bf16_to_f32(nan)));
    CHECK(dt_bf16_to_f32(0x3f80) == 1.0f && dt_bf16_to_f32(0x4049) == 3.140625f);
    /* every bf16 value survives the round trip */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = dt_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && dt_f32_to_bf16(f) != h) bad++;
    }
    CHECK_MSG(bad == 0, "%d bf16 values changed on a round trip", bad);
}

/* Floats of every class: random bits, ties, subnormals, infinities, NaNs, values near FLT_MAX */
static void fill(float *x, size_t n) {
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 32);
        switch (i % 8) {
        case 1: u = (u & 0xffff0000u) | 0x8000u; break;          /* exact tie */
        case 2: u &= 0x807fffffu; break;                          /* subnormal */
        case 3: u = (u & 0x80000000u) | 0x7f800000u | (u & 7); break; /* inf or NaN */
        case 4: u = (u & 0x80000000u) | 0x7f7f8000u | (u & 0x7fff); break; /* near FLT_MAX */
        default: break;
        }
        x[i] = from_bits(u);
    }
}

static int same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* The array forms give the scalar's bits, with the AVX2 kernels and without (lengths that
 * leave every remainder of 8). */
static void test_arrays(void) {
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *f = malloc(N * sizeof *f), *ref_f = malloc(N * sizeof *f);
    uint16_t *h = malloc(N * sizeof *h), *ref = malloc(N * sizeof *ref), *acc = malloc(N * sizeof *acc);
    fill(x, N);
    for (int i = 0; i < N; i++) ref[i] = dt_f32_to_bf16(x[i]);
#ifdef DT_KERNELS_AVX512
    const int had_avx2 = dt_cpu_avx2(), had_avx512 = dt_cpu_avx512();
    for (int tier = 0; tier < 3; tier++) { /* as the CPU has them; AVX2 alone; neither */
        atomic_store(&dt_avx512_state, tier == 0 ? had_avx512 : 0);
        atomic_store(&dt_avx2_state, tier < 2 ? had_avx2 : 0);
        const char *name = dt_cpu_avx512() ? "avx512" : dt_cpu_avx2() ? "avx2" : "portable";
#else
    { /* no x86 kernels: the portable forms only */
        const char *name = "portable";
#endif
        for (size_t n = N - 8; n <= N; n++) {
            memset(h, 0, N * sizeof *h);
            dt_bf16_store(h, x, n);
            CHECK_MSG(same_bits(h, ref, n * sizeof *h) && (n == N || h[n] == 0), /* nothing past n */
                      "%s: dt_bf16_store of %zu values", name, n);
            dt_bf16_load(f, h, n);
            int bad = 0;
            for (size_t i = 0; i < n; i++) bad += !same_bits(&f[i], &(float){dt_bf16_to_f32(h[i])}, 4);
            CHECK_MSG(bad == 0, "%s: dt_bf16_load: %d of %zu wrong", name, bad, n);
            dt_bf16_round(f, x, n);
            for (size_t i = 0; i < n; i++) ref_f[i] = dt_bf16_to_f32(ref[i]);
            CHECK_MSG(same_bits(f, ref_f, n * sizeof *f), "%s: dt_bf16_round of %zu values", name, n);
            dt_bf16_round(f, f, n); /* in place, and rounding twice changes nothing */
            CHECK_MSG(same_bits(f, ref_f, n * sizeof *f), "%s: dt_bf16_round in place", name);
            memcpy(acc, ref, n * sizeof *acc);
            dt_bf16_store_add(acc, x, n);
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                const uint16_t want = dt_f32_to_bf16(dt_bf16_to_f32(ref[i]) + x[i]);
                bad += acc[i] != want;
            }
            CHECK_MSG(bad == 0, "%s: dt_bf16_store_add: %d of %zu wrong", name, bad, n);
            /* the layers' bf16 forms: what the fp32 layer computes on the values, rounded once */
            uint16_t *o = malloc(N * sizeof *o), *y = ref, *dy = h; /* h: x rounded (above) */
            for (size_t i = 0; i < n; i++) h[i] = dt_f32_to_bf16(x[(i * 7 + 3) % N]);
            int bad_add = 0, bad_relu = 0, bad_grad = 0, bad_pass = 0;
            dt_bf16_add(o, y, dy, n);
            for (size_t i = 0; i < n; i++)
                bad_add += o[i] != dt_f32_to_bf16(dt_bf16_to_f32(y[i]) + dt_bf16_to_f32(dy[i]));
            dt_bf16_relu(o, y, n);
            for (size_t i = 0; i < n; i++) {
                const float v = dt_bf16_to_f32(y[i]);
                bad_relu += o[i] != dt_f32_to_bf16(v > 0.0f ? v : 0.0f);
            }
            for (int with_acc = 0; with_acc < 2; with_acc++) {
                memcpy(o, acc, n * sizeof *o);
                dt_bf16_relu_grad(o, y, dy, n, with_acc);
                for (size_t i = 0; i < n; i++) {
                    const float g = dt_bf16_to_f32(y[i]) > 0.0f ? dt_bf16_to_f32(dy[i]) : 0.0f;
                    bad_grad += o[i] != dt_f32_to_bf16(with_acc ? dt_bf16_to_f32(acc[i]) + g : g);
                }
                memcpy(o, acc, n * sizeof *o);
                dt_bf16_pass_grad(o, dy, n, with_acc);
                for (size_t i = 0; i < n; i++) {
                    const float g = dt_bf16_to_f32(dy[i]);
                    bad_pass += o[i] != dt_f32_to_bf16(with_acc ? dt_bf16_to_f32(acc[i]) + g : g);
                }
            }
            CHECK_MSG(bad_add + bad_relu + bad_grad + bad_pass == 0,
                      "%s: %zu values: dt_bf16_add %d wrong, relu %d, relu_grad %d, pass_grad %d", name, n, bad_add,
                      bad_relu, bad_grad, bad_pass);
            free(o);
        }
    }
#ifdef DT_KERNELS_AVX512
    atomic_store(&dt_avx2_state, -1); /* asked again (DTRAIN_NO_AVX2, _AVX512) on the next use */
    atomic_store(&dt_avx512_state, -1);
#endif
    free(x); free(f); free(ref_f); free(h); free(ref); free(acc);
}

typedef struct {
    dt_model *m;
    float *x;
    uint8_t *y; /* batch x positions */
    int batch;
} fixture;

/* Every bf16 form adding a gradient to one another consumer wrote first (a node's consumers
 * run backward from the last: the earlier ones add): bn2, r2, mp1 and d1 to r1's, s1 to bn2's. */
static const char spec_forms_add[] = "input c=3 h=8 w=8\n"
                                     "conv out=8 k=3 pad=1 name=c1\n"
                                     "batchnorm name=bn1\n"
                                     "relu name=r1\n"
                                     "batchnorm name=bn2 in=r1\n"
                                     "relu name=r2 in=r1\n"
                                     "add name=s1 in=bn2,r2\n"
                                     "relu name=r3 in=bn2\n"
                                     "add name=s2 in=s1,r3\n"
                                     "dropout name=d1 p=0.25 in=r1\n"
                                     "maxpool name=mp1 k=2 stride=2 in=r1\n"
                                     "add name=s3 in=s2,r1\n"
                                     "add name=s3b in=s3,d1\n"
                                     "maxpool name=mp2 k=2 stride=2 in=s3b\n"
                                     "add name=s4 in=mp1,mp2\n"
                                     "flatten name=f\n"
                                     "linear out=10 name=fc\n";

static int open_model(fixture *t, const char *name, int batch, dt_precision p) {
    memset(t, 0, sizeof *t);
    t->batch = batch;
    if (strchr(name, '\n') ? dt_model_from_spec(name, "forms-add", &t->m) != DT_OK
                           : dt_model_from_name(name, &t->m) != DT_OK)
        return 0;
    dt_model_init(t->m, 5);
    CHECK(dt_model_set_precision(t->m, p) == DT_OK);
    CHECK(dt_model_reserve(t->m, batch) == DT_OK);
    int c, h, w;
    dt_model_input_shape(t->m, &c, &h, &w);
    const size_t n = (size_t)batch * c * h * w;
    const int rows = batch * dt_model_positions(t->m), vocab = dt_model_vocab(t->m);
    t->x = malloc(n * sizeof *t->x);
    t->y = malloc((size_t)rows);
    for (size_t i = 0; i < n; i++) t->x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    for (int i = 0; i < rows; i++) t->y[i] = (uint8_t)((i * 7 + 3) % dt_model_num_classes(t->m));
    /* a language model: windows of a text whose next token follows from the last one (23 of
     * them in a cycle: learnt smoothly, where a text needing attention first sat on a plateau
     * for a number of steps that float noise decided) */
    for (int i = 0, tok = 40; vocab && i < rows + batch; i++) {
        tok = 40 + ((tok - 40) * 5 + 3) % 23;
        const int b = i / (h + 1), pos = i % (h + 1);
        if (b < batch && pos < h) t->x[b * h + pos] = (float)tok;
        if (b < batch && pos > 0) t->y[b * h + pos - 1] = (uint8_t)tok;
    }
    return 1;
}

static void close_model(fixture *t) {
    free(t->x);
    free(t->y);
    dt_model_free(t->m);
}

/* The loss in evaluation mode (no dropout). */
static float eval_loss(fixture *t) {
    dt_model_forward(t->m, t->x, t->batch, 0);
    return dt_model_loss(t->m, t->y, NULL);
}

/* Steps of plain SGD; returns the loss after them and leaves the parameters in the model. */
static float train(fixture *t, int steps, float lr) {
    for (int s = 0; s < steps; s++) {
        dt_model_forward(t->m, t->x, t->batch, 1);
        dt_model_backward(t->m, t->y, NULL);
        float *w = dt_model_params(t->m);
        const float *g = dt_model_grads(t->m);
        for (size_t i = 0; i < dt_model_num_params(t->m); i++) w[i] -= lr * g[i];
    }
    return eval_loss(t);
}

/* bf16 learns a batch by heart as fp32 does, with different (bf16) numbers; switching back
 * gives fp32 exactly. */
static void test_training(const char *name, int batch) {
    fixture a, b;
    if (!open_model(&a, name, batch, DT_PRECISION_FP32) || !open_model(&b, name, batch, DT_PRECISION_BF16)) {
        CHECK_MSG(0, "%s: %s", name, dt_last_error());
        return;
    }
    CHECK(dt_model_precision(b.m) == DT_PRECISION_BF16 && dt_model_precision(a.m) == DT_PRECISION_FP32);
    const float l0 = eval_loss(&a);
    const size_t np = dt_model_num_params(a.m);
    const float *wa = dt_model_params(a.m), *wb = dt_model_params(b.m);
    float *w0 = malloc(np * sizeof *w0);
    memcpy(w0, wa, np * sizeof *w0);
    /* one step: the updates differ by bf16's rounding (7% of the update for resblock-tiny, whose
     * batch-norm gradients at batch 8 are sums of terms larger than themselves), not more */
    train(&a, 1, 0.1f);
    train(&b, 1, 0.1f);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < np; i++) {
        diff += ((double)wa[i] - wb[i]) * ((double)wa[i] - wb[i]);
        norm += ((double)wa[i] - w0[i]) * ((double)wa[i] - w0[i]);
    }
    const double rel = sqrt(diff / norm);
    free(w0);
    /* then both learn the batch by heart (the trajectories part: it is chaotic) */
    const float la = train(&a, 59, 0.1f), lb = train(&b, 59, 0.1f);
    printf("%-14s first updates differ by %.2e of their norm; loss %.4f -> fp32 %.4f, bf16 %.4f\n", name, rel, l0,
           la, lb);
    CHECK_MSG(rel > 1e-4 && rel < 0.15, "%s: the bf16 update is %.3g (of its norm) from fp32's", name, rel);
    CHECK_MSG(lb < 0.25f * l0 && la < 0.25f * l0, "%s: loss %g -> fp32 %g, bf16 %g", name, l0, la, lb);
    CHECK_MSG(fabsf(la - lb) < 0.05f * l0, "%s: bf16 loss %g far from fp32 %g", name, lb, la);
    /* back to fp32 (re-reserved for the same batch): the same step as a model never in bf16 */
    memcpy(dt_model_params(b.m), wa, dt_model_num_params(a.m) * sizeof(float));
    memcpy(dt_model_state(b.m), dt_model_state(a.m), dt_model_num_state(a.m) * sizeof(float));
    CHECK(dt_model_set_precision(b.m, DT_PRECISION_FP32) == DT_OK);
    const float *za = dt_model_forward(a.m, a.x, batch, 0), *zb = dt_model_forward(b.m, b.x, batch, 0);
    CHECK_MSG(same_bits(za, zb, (size_t)batch * dt_model_positions(a.m) * dt_model_num_classes(a.m) * sizeof(float)),
              "%s: fp32 after bf16 differs from fp32", name);
    close_model(&a);
    close_model(&b);
}

/* The layers' bf16 forms (batch-norm, ReLU, add, flatten on the stored bf16 values) against
 * the same layers on fp32 copies (DTRAIN_BF16_FORMS=0): every loss, gradient and weight the
 * same bit for bit over steps of training (a second consumer's gradient added, in resblock-tiny,
 * evaluation mode too). */
static void test_forms(const char *name, int batch) {
    const char *label = strchr(name, '\n') ? "the forms-add spec" : name;
    fixture t[2];
    for (int k = 0; k < 2; k++) {
        setenv("DTRAIN_BF16_FORMS", k ? "0" : "1", 1);
        if (!open_model(&t[k], name, batch, DT_PRECISION_BF16)) {
            CHECK_MSG(0, "%s: %s", label, dt_last_error());
            return;
        }
    }
    unsetenv("DTRAIN_BF16_FORMS");
    const size_t np = dt_model_num_params(t[0].m);
    int same = 1;
    for (int s = 0; s < 4 && same; s++) {
        float loss[2];
        for (int k = 0; k < 2; k++) {
            dt_model_forward(t[k].m, t[k].x, batch, 1);
            loss[k] = dt_model_backward(t[k].m, t[k].y, NULL);
        }
        same = same_bits(&loss[0], &loss[1], sizeof loss[0]) &&
               same_bits(dt_model_grads(t[0].m), dt_model_grads(t[1].m), np * sizeof(float));
        CHECK_MSG(same, "%s step %d: bf16 forms: loss %.9g, on fp32 copies %.9g; gradients %s", label, s, loss[0],
                  loss[1], same_bits(dt_model_grads(t[0].m), dt_model_grads(t[1].m), np * sizeof(float)) ? "same" : "differ");
        for (int k = 0; k < 2; k++) {
            float *w = dt_model_params(t[k].m);
            const float *g = dt_model_grads(t[k].m);
            for (size_t i = 0; i < np; i++) w[i] -= 0.1f * g[i];
        }
    }
    const float le = eval_loss(&t[0]), lc = eval_loss(&t[1]);
    CHECK_MSG(same_bits(&le, &lc, sizeof le), "%s: evaluation loss %.9g with the forms, %.9g without", label, le, lc);
    close_model(&t[0]);
    close_model(&t[1]);
}

/* Token ids reach an embedding as they are under bf16 (bf16 holds integers exactly only up to
 * 256: 257 would read row 256): a vocabulary of 1000, ids above 256, the logits as fp32's within
 * bf16's rounding (another row would be off by the rows' difference). */
static void test_token_ids(void) {
    const char *spec = "input seq=4\nembed vocab=1000 out=8\nlinear out=5\n";
    dt_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        CHECK(dt_model_from_spec(spec, "ids", &m[k]) == DT_OK);
        if (!m[k]) return;
        dt_model_init(m[k], 3);
        CHECK(dt_model_set_precision(m[k], k ? DT_PRECISION_BF16 : DT_PRECISION_FP32) == DT_OK);
        CHECK(dt_model_reserve(m[k], 2) == DT_OK);
    }
    const float ids[8] = {257, 999, 513, 3, 771, 258, 0, 997};
    const float *a = dt_model_forward(m[0], ids, 2, 0), *b = dt_model_forward(m[1], ids, 2, 0);
    double worst = 0, top = 0;
    for (int i = 0; i < 2 * 4 * 5; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        top = fmax(top, fabs((double)a[i]));
    }
    printf("token ids above 256 under bf16: logits within %.2e of fp32's largest\n", worst / top);
    CHECK_MSG(worst < 0x1p-6 * top, "bf16 logits of ids above 256 are %.3g of the largest from fp32's: the ids were "
              "rounded?", worst / top);
    dt_model_free(m[0]);
    dt_model_free(m[1]);
}

/* bf16 halves the stored activations: resnet18-cifar at batch 32 (issue 20's memory case). */
static void test_memory(void) {
    dt_model *m = NULL;
    CHECK(dt_model_from_name("resnet18-cifar", &m) == DT_OK);
    if (!m) return;
    CHECK(dt_model_activation_bytes(m) == 0); /* nothing reserved yet */
    CHECK(dt_model_reserve(m, 32) == DT_OK);
    const size_t fp32 = dt_model_activation_bytes(m);
    CHECK(dt_model_set_precision(m, DT_PRECISION_BF16) == DT_OK);
    const size_t bf16 = dt_model_activation_bytes(m);
    printf("resnet18-cifar batch 32: activations, gradients, scratch %.1f MB fp32, %.1f MB bf16 (%.2f)\n", fp32 / 1e6,
           bf16 / 1e6, (double)bf16 / fp32);
    CHECK_MSG(bf16 < 0.65 * fp32, "bf16 reserves %zu bytes, fp32 %zu", bf16, fp32);
    CHECK(dt_model_set_precision(m, (dt_precision)7) != DT_OK && strstr(dt_last_error(), "fp32 or bf16"));
    CHECK(dt_model_precision(m) == DT_PRECISION_BF16);
    dt_model_free(m);
}

int main(void) {
    dt_runtime_init();
    test_scalar();
    test_arrays();
    test_training("cnn1", 8);
    test_training("resblock-tiny", 8);
    test_training("mlp", 8);
    test_training("gpt-tiny", 4);
    test_forms("resblock-tiny", 8);
    test_forms("cnn1", 8);
    test_forms(spec_forms_add, 8);
    test_memory();
    test_token_ids();
    return test_summary("test_bf16");
}
