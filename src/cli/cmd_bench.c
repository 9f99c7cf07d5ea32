/* dtrain bench: training-step speed on random data. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/args.h"
#include "dtrain.h"
#include "trainer/trainer.h"
#include <cblas.h>
#include <sys/resource.h>

/* Training-step speed on random data (no data loading, no evaluation), for bench/run. */
int dt_cmd_bench(int argc, char **argv) {
    const char *model = "cnn1";
    int batch = 64, warmup = 20, steps = 200;
    float lr = 0.01f, momentum = 0.9f;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0, 0, NULL},
        {"batch", OPT_INT, &batch, "batch size [64]", 1, 1e6, 0, 0, NULL},
        {"warmup", OPT_INT, &warmup, "untimed steps first [20]", 0, 1e9, 0, 0, NULL},
        {"steps", OPT_INT, &steps, "timed steps [200]", 1, 1e9, 0, 0, NULL},
        {"lr", OPT_FLOAT, &lr, "learning rate [0.01]", 0, 1e6, 1, 0, NULL},
        {"momentum", OPT_FLOAT, &momentum, "momentum [0.9]", 0, 0.999999, 0, 0, NULL},
    };
    int help;
    if (dt_parse_args("bench", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return dt_cli_fail();
    if (help) {
        dt_print_help("bench", "[flags]\n\nTimes training steps on random data; prints one line.", opts, NOPTS(opts));
        return 0;
    }
    dt_runtime_init();
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return dt_cli_fail();
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    size_t in = (size_t)c * h * w;
    float *x = malloc((size_t)batch * in * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    dt_sgd opt;
    dt_status st = (x && y) ? dt_model_reserve(m, batch) : dt_fail(DT_ERR_NOMEM, "out of memory");
    if (st == DT_OK) st = dt_sgd_init(&opt, dt_model_num_params(m), momentum, 0, 0);
    if (st != DT_OK) { free(x); free(y); dt_model_free(m); return dt_cli_fail(); }
    dt_rng r;
    dt_rng_seed(&r, 7);
    for (size_t i = 0; i < (size_t)batch * in; i++) x[i] = 2 * dt_rng_uniform(&r) - 1;
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)dt_rng_below(&r, (uint32_t)dt_model_num_classes(m));
    dt_model_init(m, 1);
    double t0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t0 = dt_now();
        dt_model_forward(m, x, batch, 1);
        dt_model_backward(m, y, NULL);
        dt_sgd_step(&opt, dt_model_params(m), dt_model_grads(m), lr);
    }
    double secs = dt_now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("dtrain model=%s batch=%d images_per_s=%.1f fwd_flops=%.0f maxrss_kb=%ld blas=%s\n", model, batch,
           (double)steps * batch / secs, dt_model_flops(m), ru.ru_maxrss, openblas_get_corename());
    dt_sgd_free(&opt);
    free(x); free(y);
    dt_model_free(m);
    return 0;
}
