/* Kernel plans (src/models/plan.c, src/trainer/plan_tune.c): the choice among timed kernels
 * (injected times: the same times, the same choice; a tie keeps the simpler kernel), the file
 * (written, read back equal; bad, stale or another CPU's files refused in one line naming
 * file:line or what differs), applying a plan to a model (unknown layers and kernels a layer
 * cannot take refused; a bf16 ask the plan runs in fp32), a planned model computing what the
 * rule's computes (up to the sums' order), and a plan made by timing cnn1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dtrain.h"
#include "models/model_struct.h"
#include "models/plan.h"
#include "trainer/plan_tune.h"

static char dir[] = "/tmp/dtrain-test-plan-XXXXXX";

static void choices(void) {
    const double n = NAN;
    /* rule, own, onednn, onednn-bf16, own-winograd, onednn-direct, own-avx2 */
    const double a[DT_KERNEL_COUNT] = {n, 10, 9.8, 5, n, n, n}, b[DT_KERNEL_COUNT] = {n, 10, 9.8, n, n, n, n},
                 c[DT_KERNEL_COUNT] = {n, 10, 9.0, n, n, n, n}, d[DT_KERNEL_COUNT] = {n, n, n, n, n, n, n},
                 e[DT_KERNEL_COUNT] = {n, n, 7, 7.1, n, n, n}, f[DT_KERNEL_COUNT] = {n, 4, n, 3.9, n, n, n},
                 g[DT_KERNEL_COUNT] = {n, 10, 9, 6, 5.9, 8, n}, h[DT_KERNEL_COUNT] = {n, 10, 9, n, 8, 7, n};
    CHECK(dt_plan_choose(a, 0.03) == DT_KERNEL_ONEDNN_BF16);
    CHECK_MSG(dt_plan_choose(b, 0.03) == DT_KERNEL_OWN, "within the tie: the simpler (own)");
    CHECK(dt_plan_choose(b, 0.0) == DT_KERNEL_ONEDNN);
    CHECK(dt_plan_choose(c, 0.03) == DT_KERNEL_ONEDNN);
    CHECK(dt_plan_choose(d, 0.03) == DT_KERNEL_RULE);
    CHECK(dt_plan_choose(e, 0.03) == DT_KERNEL_ONEDNN);
    CHECK_MSG(dt_plan_choose(f, 0.03) == DT_KERNEL_OWN, "bf16 2.5%% faster: own kept");
    CHECK_MSG(dt_plan_choose(g, 0.03) == DT_KERNEL_ONEDNN_BF16, "own-winograd 1.7%% faster: the earlier kernel kept");
    CHECK(dt_plan_choose(g, 0.0) == DT_KERNEL_OWN_WINOGRAD);
    CHECK(dt_plan_choose(h, 0.03) == DT_KERNEL_ONEDNN_DIRECT);
    const double t[DT_KERNEL_COUNT] = {n, 10, 9, n, n, 8, 7.9};
    CHECK_MSG(dt_plan_choose(t, 0.03) == DT_KERNEL_ONEDNN_DIRECT, "own-avx2 within the tie: the earlier kernel");
    for (int i = 0; i < 100; i++) CHECK(dt_plan_choose(a, 0.03) == DT_KERNEL_ONEDNN_BF16);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* a plan of cnn1 at batch 8 for this CPU and build */
static void cnn1_plan(dt_plan *p, int precision, int runs) {
    memset(p, 0, sizeof *p);
    dt_plan_cpu(p->cpu, sizeof p->cpu);
    snprintf(p->version, sizeof p->version, "%s", dt_version());
    snprintf(p->model, sizeof p->model, "cnn1");
    p->batch = 8, p->precision = precision, p->runs = runs, p->n = 2;
    p->node = calloc(2, sizeof *p->node);
    p->kernel = calloc(2, sizeof *p->kernel);
    snprintf(p->node[0], DT_NODE_NAME, "conv1");
    snprintf(p->node[1], DT_NODE_NAME, "conv2");
    p->kernel[0] = p->kernel[1] = DT_KERNEL_OWN;
}

static int refused(const char *path, const char *text, const char *needle) {
    write_text(path, text);
    dt_plan p;
    const dt_status st = dt_plan_read(path, &p);
    const int ok = st != DT_OK && strstr(dt_last_error(), needle) && !strchr(dt_last_error(), '\n');
    if (!ok) fprintf(stderr, "  %s: %s\n", needle, st == DT_OK ? "read" : dt_last_error());
    if (st == DT_OK) dt_plan_free(&p);
    return ok;
}

static void file(void) {
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/p.ini", dir);
    snprintf(bad, sizeof bad, "%s/bad.ini", dir);
    dt_plan p, q;
    cnn1_plan(&p, DT_PRECISION_BF16, DT_PRECISION_FP32);
    p.kernel[1] = DT_KERNEL_ONEDNN;
    CHECK(dt_plan_write(path, &p) == DT_OK);
    CHECK_MSG(dt_plan_read(path, &q) == DT_OK, "%s", dt_last_error());
    CHECK(!strcmp(q.cpu, p.cpu) && !strcmp(q.version, p.version) && !strcmp(q.model, "cnn1") && q.batch == 8);
    CHECK(q.precision == DT_PRECISION_BF16 && q.runs == DT_PRECISION_FP32 && q.n == 2);
    CHECK(q.n == 2 && !strcmp(q.node[1], "conv2") && q.kernel[0] == DT_KERNEL_OWN && q.kernel[1] == DT_KERNEL_ONEDNN);
    CHECK(dt_plan_matches(&q, path, "cnn1", 8, DT_PRECISION_BF16) == DT_OK);
    CHECK(dt_plan_matches(&q, path, "cnn1", 16, DT_PRECISION_BF16) != DT_OK && strstr(dt_last_error(), "batch 8, not 16"));
    CHECK(dt_plan_matches(&q, path, "cnn2", 8, DT_PRECISION_BF16) != DT_OK && strstr(dt_last_error(), "model cnn1"));
    CHECK(dt_plan_matches(&q, path, "cnn1", 8, DT_PRECISION_FP32) != DT_OK && strstr(dt_last_error(), "--precision bf16"));
    snprintf(q.cpu, sizeof q.cpu, "Some Other CPU | family 1 model 1 | kernels portable");
    CHECK(dt_plan_matches(&q, path, "cnn1", 8, DT_PRECISION_BF16) != DT_OK && strstr(dt_last_error(), "another CPU"));
    dt_plan_cpu(q.cpu, sizeof q.cpu);
    snprintf(q.version, sizeof q.version, "0.0.1");
    CHECK(dt_plan_matches(&q, path, "cnn1", 8, DT_PRECISION_BF16) != DT_OK && strstr(dt_last_error(), "dtrain 0.0.1"));
    dt_plan_free(&q);
    dt_plan_free(&p);

    const char *head = "; dtrain kernel plan\n[plan]\ncpu = x\ndtrain = y\nmodel = cnn1\nbatch = 8\nprecision = fp32\nruns = fp32\n";
    char text[1024];
    CHECK(refused(bad, "[plan]\ncpu = x\n", "bad.ini:1: not a kernel plan"));
    snprintf(text, sizeof text, "%s[kernels]\nconv1 = gpu\n", head);
    CHECK(refused(bad, text, "bad.ini:10: conv1 = gpu: expected own, onednn, onednn-bf16, own-winograd, onednn-direct or own-avx2"));
    snprintf(text, sizeof text, "%s[kernels]\nconv1 = own\nconv1 = own\n", head);
    CHECK(refused(bad, text, "bad.ini:11: conv1: named twice"));
    snprintf(text, sizeof text, "%scolour = blue\n", head);
    CHECK(refused(bad, text, "bad.ini:9: unknown key 'colour' in [plan]"));
    snprintf(text, sizeof text, "%s[kernels]\nconv1 = own\n  = own\n", head);
    CHECK(refused(bad, text, "bad.ini:11: an indented line")); /* inih: a continuation of conv1's value */
    snprintf(text, sizeof text, "%s[extra]\na = b\n", head);
    CHECK(refused(bad, text, "bad.ini:10: unknown section [extra]"));
    CHECK(refused(bad, "; dtrain kernel plan\n[plan]\nbatch = 0\n", "bad.ini:3: batch: expected a whole number"));
    CHECK(refused(bad, "; dtrain kernel plan\n[plan]\nprecision = fp16\n", "bad.ini:3: precision: expected fp32 or bf16"));
    CHECK(refused(bad, "; dtrain kernel plan\n[plan]\nmodel = cnn1\n", "expected [plan] cpu, dtrain, model"));
    snprintf(text, sizeof text, "%s", head);
    memcpy(strstr(text, "runs = fp32"), "runs = bf16", 11);
    CHECK(refused(bad, text, "runs = bf16 for precision = fp32"));
    snprintf(text, sizeof text, "%s/nothing.ini", dir);
    dt_plan r;
    CHECK(dt_plan_read(text, &r) != DT_OK && strstr(dt_last_error(), "nothing.ini"));
}

static void apply(void) {
    dt_model *m;
    dt_plan p;
    CHECK(dt_model_from_name("cnn1", &m) == DT_OK);
    cnn1_plan(&p, DT_PRECISION_FP32, DT_PRECISION_FP32);
    snprintf(p.node[1], DT_NODE_NAME, "conv9");
    CHECK(dt_plan_apply(&p, "P", m) != DT_OK && strstr(dt_last_error(), "layer conv9: the model has no layer"));
    snprintf(p.node[1], DT_NODE_NAME, "conv2");
    p.kernel[1] = DT_KERNEL_ONEDNN_BF16; /* not in fp32 */
    CHECK(dt_plan_apply(&p, "P", m) != DT_OK && strstr(dt_last_error(), "layer conv2: onednn-bf16 cannot run it here"));
    p.kernel[1] = DT_KERNEL_OWN;
    CHECK(dt_plan_apply(&p, "P", m) == DT_OK && m->nodes[0].kernel == DT_KERNEL_OWN);
    dt_plan_free(&p);
    /* a bf16 ask that the plan runs in fp32 */
    CHECK(dt_model_set_precision(m, DT_PRECISION_BF16) == DT_OK);
    cnn1_plan(&p, DT_PRECISION_BF16, DT_PRECISION_FP32);
    CHECK(dt_plan_apply(&p, "P", m) == DT_OK && dt_model_precision(m) == DT_PRECISION_FP32);
    dt_plan_free(&p);
    dt_model_free(m);
}

/* resnet-like convolutions (64 channels) on every kernel they can take: the same loss and
 * gradients as the rule's, up to the order of the sums (and bf16's rounding under bf16) */
static void same_results(int precision) {
    const char *spec = "input c=16 h=8 w=8\nconv out=64 k=3 pad=1\nrelu\nconv out=64 k=3 pad=1\nrelu\nflatten\nlinear out=10\n";
    dt_model *m;
    CHECK(dt_model_from_spec(spec, "test", &m) == DT_OK);
    CHECK(dt_model_set_precision(m, precision) == DT_OK);
    const int B = 4;
    CHECK(dt_model_reserve(m, B) == DT_OK);
    dt_model_init(m, 3);
    float x[4 * 16 * 64];
    uint8_t y[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4 * 16 * 64; i++) x[i] = (float)((i * 7919) % 201) / 100.0f - 1.0f;
    const size_t np = dt_model_num_params(m);
    float *g0 = malloc(np * sizeof *g0);
    dt_model_forward(m, x, B, 1);
    const float l0 = dt_model_backward(m, y, NULL);
    memcpy(g0, dt_model_grads(m), np * sizeof *g0);
    for (int k = DT_KERNEL_OWN; k < DT_KERNEL_COUNT; k++) {
        const unsigned can = m->nodes[0].ops->kernels ? m->nodes[0].ops->kernels(&m->nodes[0], precision == DT_PRECISION_BF16) : 2u;
        if (!(can >> k & 1)) continue;
        for (int i = 0; i < m->nn; i++)
            if (!strcmp(m->nodes[i].ops->kind, "conv")) m->nodes[i].kernel = k;
        dt_model_forward(m, x, B, 1);
        const float l = dt_model_backward(m, y, NULL);
        double num = 0, den = 0;
        for (size_t i = 0; i < np; i++) {
            const double d = dt_model_grads(m)[i] - g0[i];
            num += d * d, den += (double)g0[i] * g0[i];
        }
        const double tol = precision == DT_PRECISION_BF16 ? 2e-2 : 1e-4;
        CHECK_MSG(fabs(l - l0) <= tol * fabs(l0) && sqrt(num / den) <= tol, "%s, %s: loss %g vs %g, gradient %.2g apart",
                  dt_precision_name(precision), dt_kernel_name(k), l, l0, sqrt(num / den));
    }
    free(g0);
    dt_model_free(m);
}

static void make(void) {
    const dt_plan_opts o = {.repeats = 1, .steps = 1, .tie = 0.03, .log = NULL};
    dt_plan p;
    CHECK_MSG(dt_plan_make("cnn1", 8, DT_PRECISION_BF16, &o, &p) == DT_OK, "%s", dt_last_error());
    CHECK(!strcmp(p.model, "cnn1") && p.batch == 8 && p.precision == DT_PRECISION_BF16 && p.n >= 2);
    CHECK(p.runs == DT_PRECISION_FP32 || p.runs == DT_PRECISION_BF16);
    dt_model *m;
    CHECK(dt_model_from_name("cnn1", &m) == DT_OK);
    CHECK(dt_model_set_precision(m, DT_PRECISION_BF16) == DT_OK);
    CHECK_MSG(dt_plan_apply(&p, "made", m) == DT_OK, "%s", dt_last_error());
    for (int i = 0; i < p.n; i++) CHECK(p.kernel[i] > DT_KERNEL_RULE && p.kernel[i] < DT_KERNEL_COUNT && !isnan(p.ms[i * DT_KERNEL_COUNT + p.kernel[i]]));
    dt_model_free(m);
    dt_plan_free(&p);
}

/* A transformer's attention layers are planned too (under bf16, where oneDNN has bf16
 * arithmetic): both kernels timed in a plan, and a step with oneDNN's products gives the own
 * products' loss and gradients to bf16's rounding, dt_model_engines naming it */
static void attention(void) {
    dt_model *m;
    CHECK(dt_model_from_name("gpt-tiny", &m) == DT_OK);
    CHECK(dt_model_set_precision(m, DT_PRECISION_BF16) == DT_OK);
    const int B = 2, T = dt_model_positions(m), V = dt_model_vocab(m);
    CHECK(dt_model_reserve(m, B) == DT_OK);
    dt_model_init(m, 5);
    unsigned can = 0;
    for (int i = 0; i < m->nn; i++)
        if (!strcmp(m->nodes[i].ops->kind, "attention") && m->nodes[i].ops->kernels) can = m->nodes[i].ops->kernels(&m->nodes[i], 1);
    if (!(can >> DT_KERNEL_ONEDNN_BF16 & 1)) {
        printf("test_plan: attention: no oneDNN bf16 products here (a build without oneDNN, or a CPU without bf16 "
               "arithmetic): one kernel, nothing to plan\n");
        dt_model_free(m);
        return;
    }
    float *x = malloc((size_t)B * T * sizeof *x);
    uint16_t *y = malloc((size_t)B * T * sizeof *y);
    for (int i = 0; i < B * T; i++) x[i] = (float)((i * 37) % V), y[i] = (uint16_t)((i * 11 + 3) % V);
    const size_t np = dt_model_num_params(m);
    float *g[2] = {malloc(np * sizeof(float)), malloc(np * sizeof(float))}, l[2];
    char engines[2][160];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < m->nn; i++)
            if (!strcmp(m->nodes[i].ops->kind, "attention")) m->nodes[i].kernel = k ? DT_KERNEL_ONEDNN_BF16 : DT_KERNEL_OWN;
        dt_model_forward(m, x, B, 1);
        l[k] = dt_model_backward_targets(m, y, NULL);
        memcpy(g[k], dt_model_grads(m), np * sizeof(float));
        dt_model_engines(m, engines[k], sizeof engines[k]);
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < np; i++) num += ((double)g[1][i] - g[0][i]) * ((double)g[1][i] - g[0][i]), den += (double)g[0][i] * g[0][i];
    CHECK_MSG(fabsf(l[1] - l[0]) <= 1e-2f * fabsf(l[0]) && sqrt(num / den) <= 2e-2 && num > 0,
              "gpt-tiny bf16, attention on oneDNN: loss %g vs %g, gradients %.2g apart", l[1], l[0], sqrt(num / den));
    CHECK_MSG(strstr(engines[0], "attention:own:4") && strstr(engines[1], "attention:oneDNN-bf16:4"), "engines: %s | %s",
              engines[0], engines[1]);
    free(x), free(y), free(g[0]), free(g[1]);
    dt_model_free(m);
    const dt_plan_opts o = {.repeats = 1, .steps = 1, .tie = 0.03, .log = NULL};
    dt_plan p;
    CHECK_MSG(dt_plan_make("gpt-tiny", 2, DT_PRECISION_BF16, &o, &p) == DT_OK, "%s", dt_last_error());
    int timed = 0;
    for (int i = 0; i < p.n; i++)
        if (strstr(p.node[i], ".attn") && !strstr(p.node[i], ".attn.")) /* transformer.h.N.attn */
            timed += !isnan(p.ms[i * DT_KERNEL_COUNT + DT_KERNEL_OWN]) && !isnan(p.ms[i * DT_KERNEL_COUNT + DT_KERNEL_ONEDNN_BF16]);
    CHECK_MSG(p.runs == DT_PRECISION_FP32 || timed == 4, "gpt-tiny bf16 plan: %d of 4 attention layers timed both ways", timed);
    dt_plan_free(&p);
}

int main(void) {
    dt_runtime_init();
    if (!mkdtemp(dir)) return 1;
    choices();
    file();
    apply();
    same_results(DT_PRECISION_FP32);
    same_results(DT_PRECISION_BF16);
    make();
    attention();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_summary("test_plan");
}
