/* dtrain bench: training-step speed on random data. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "core/flag_table.h"
#include "dtrain.h"
#include "layers/layer.h"
#include "trainer/plan_cache.h"
#include "trainer/trainer.h"
#include <cblas.h>
#include <sys/resource.h>

typedef struct {
    const char *model;
    int batch, warmup, steps;
    float lr, momentum;
    int precision;
    const char *plan;
} bench_opts;

static const dt_flag bench_flags[] = {
    {"model", DT_AT_TEXT(bench_opts, model), .help = "model name or spec file"},
    {"batch", DT_AT_INT(bench_opts, batch), .min = 1, .max = 1e6, .help = "batch size"},
    {"warmup", DT_AT_INT(bench_opts, warmup), .min = 0, .max = 1e9, .help = "untimed steps first"},
    {"steps", DT_AT_INT(bench_opts, steps), .min = 1, .max = 1e9, .help = "timed steps"},
    {"lr", DT_AT_FLOAT(bench_opts, lr), .min = 0, .max = 1e6, .min_open = 1, .help = "learning rate"},
    {"momentum", DT_AT_FLOAT(bench_opts, momentum), .min = 0, .max = 0.999999, .help = "momentum"},
    {"precision", DT_AT_CHOICE(bench_opts, precision, dt_precision_names), .help = "fp32 | bf16 (as dtrain train)"},
    {"plan", DT_AT_TEXT(bench_opts, plan), .help = "auto | off | FILE: the kernel plan (dtrain tune)", .zero = "off"},
};

/* A model training on random data: the batch, its targets and an SGD optimizer. */
typedef struct {
    dt_model *m;
    float *x;
    uint16_t *y;
    dt_sgd opt;
    int batch, opt_made;
} bench_rig;

static void rig_free(bench_rig *r) {
    if (r->opt_made) dt_sgd_free(&r->opt);
    free(r->x);
    free(r->y);
    dt_model_free(r->m);
}

static dt_status rig_make(bench_rig *r, const char *model, int batch, int precision, const char *plan, float momentum) {
    memset(r, 0, sizeof *r);
    r->batch = batch;
    dt_status st = dt_model_open(model, &r->m);
    if (st == DT_OK) st = dt_model_set_precision(r->m, (dt_precision)precision);
    char path[4096];
    if (st == DT_OK) st = dt_plan_use(plan, model, batch, precision, r->m, stderr, path, sizeof path);
    if (st != DT_OK) { rig_free(r); return st; }
    int c, h, w;
    dt_model_input_shape(r->m, &c, &h, &w);
    const size_t in = (size_t)c * h * w;
    /* a language model: token ids in, a target at every position */
    const int vocab = dt_model_vocab(r->m), positions = dt_model_positions(r->m);
    r->x = malloc((size_t)batch * in * sizeof(float));
    r->y = malloc((size_t)batch * positions * sizeof *r->y);
    st = (r->x && r->y) ? dt_model_reserve(r->m, batch) : dt_nomem("the batch of %d", batch);
    if (st == DT_OK && (st = dt_sgd_init(&r->opt, dt_model_num_params(r->m), momentum, 0, 0)) == DT_OK) r->opt_made = 1;
    if (st != DT_OK) { rig_free(r); return st; }
    dt_rng g;
    dt_rng_seed(&g, 7);
    for (size_t i = 0; i < (size_t)batch * in; i++) r->x[i] = vocab ? (float)dt_rng_below(&g, (uint32_t)vocab) : 2 * dt_rng_uniform(&g) - 1;
    for (int i = 0; i < batch * positions; i++) r->y[i] = (uint16_t)dt_rng_below(&g, (uint32_t)dt_model_num_classes(r->m));
    dt_model_init(r->m, 1);
    return DT_OK;
}

static void rig_step(bench_rig *r, float lr) {
    dt_model_forward(r->m, r->x, r->batch, 1);
    dt_model_backward_targets(r->m, r->y, NULL);
    dt_sgd_step(&r->opt, dt_model_params(r->m), dt_model_grads(r->m), lr);
}

dt_status dt_bench_time_steps(const char *model, int batch, int warmup, int steps, double *secs, double *fwd_flops) {
    bench_rig r;
    dt_runtime_init();
    dt_status st = rig_make(&r, model, batch, DT_PRECISION_FP32, NULL, 0.9f);
    if (st != DT_OK) return st;
    for (int s = 0; s < warmup + steps; s++) {
        const double t0 = dt_now();
        rig_step(&r, 0.01f);
        if (s >= warmup) secs[s - warmup] = dt_now() - t0;
    }
    *fwd_flops = dt_model_flops(r.m);
    rig_free(&r);
    return DT_OK;
}

struct dt_bench_rig {
    bench_rig r;
};

dt_status dt_bench_rig_new(const char *model, int batch, dt_bench_rig **out) {
    dt_runtime_init();
    dt_bench_rig *g;
    DT_TRY(dt_calloc(g, 1, "a model to time"));
    const dt_status st = rig_make(&g->r, model, batch, DT_PRECISION_FP32, NULL, 0.9f);
    if (st != DT_OK) { free(g); return st; }
    *out = g;
    return DT_OK;
}

void dt_bench_rig_steps(dt_bench_rig *g, int n) {
    for (int s = 0; s < n; s++) rig_step(&g->r, 0.01f);
}

void dt_bench_rig_free(dt_bench_rig *g) {
    if (!g) return;
    rig_free(&g->r);
    free(g);
}

/* Training-step speed on random data (no data loading, no evaluation), for bench/run. */
int dt_cmd_bench(int argc, char **argv) {
    bench_opts o = {.model = "cnn1", .batch = 64, .warmup = 20, .steps = 200, .lr = 0.01f, .momentum = 0.9f};
    const dt_flag_list list = {.flags = bench_flags, .n = NOPTS(bench_flags), .base = &o};
    const int parsed = dt_cli_flags("bench", argc, argv, 2, &list,
                                    "[flags]\n\nTimes training steps on random data; prints one line.");
    if (parsed >= 0) return parsed;
    const char *model = o.model;
    const int batch = o.batch, warmup = o.warmup, steps = o.steps;
    dt_runtime_init();
    bench_rig rig;
    if (rig_make(&rig, model, batch, o.precision, o.plan, o.momentum) != DT_OK) return dt_cli_fail();
    dt_model *m = rig.m;
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    const int vocab = dt_model_vocab(m);
    double t0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t0 = dt_now();
        rig_step(&rig, o.lr);
    }
    double secs = dt_now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char engines[256];
    dt_model_engines(m, engines, sizeof engines);
    /* a language model's windows are images_per_s; its tokens a second too */
    char tokens[64] = "";
    if (vocab) snprintf(tokens, sizeof tokens, " positions=%d tokens_per_s=%.1f", h, (double)steps * batch * h / secs);
    printf("dtrain model=%s batch=%d precision=%s images_per_s=%.1f%s fwd_flops=%.0f maxrss_kb=%ld activation_kb=%zu "
           "blas=%s kernels=%s engines=%s\n",
           model, batch, dt_precision_name(dt_model_precision(m)), (double)steps * batch / secs, tokens,
           dt_model_flops(m), ru.ru_maxrss, dt_model_activation_bytes(m) / 1024, openblas_get_corename(),
           dt_layer_kernels(), *engines ? engines : "own");
    rig_free(&rig);
    return 0;
}
