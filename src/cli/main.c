/* dtrain command-line tool: subcommands train, eval, info, bench. Every runtime error is
 * one line on stderr and exit status 2. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "dtrain.h"
#include "trainer/trainer.h"

#define NOPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int fail(void) {
    fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
    return 2;
}

/* Debian's OpenBLAS 0.3.21 does not know recent AVX-512 CPUs (e.g. Zen 5); with a preset or
 * detected AVX2 kernel family (OPENBLAS_CORETYPE=Haswell, Zen) it runs at half the speed. The
 * kernel family is fixed when the library loads, so when the CPU has AVX-512 but an AVX2 family
 * is in use we set OPENBLAS_CORETYPE=SkylakeX (and one BLAS thread) and re-execute ourselves
 * once. DTRAIN_BLAS_AUTO=0 keeps the environment as it is. */
static int is_avx512_core(const char *core) {
    return core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake") ||
                    !strcasecmp(core, "sapphirerapids"));
}

static void ensure_fast_blas(char **argv) {
    const char *opt = getenv("DTRAIN_BLAS_AUTO");
    if ((opt && !strcmp(opt, "0")) || getenv("DTRAIN_REEXECED")) return;
    int reexec = 0;
    if (!getenv("OPENBLAS_NUM_THREADS")) { setenv("OPENBLAS_NUM_THREADS", "1", 1); reexec = 1; }
    __builtin_cpu_init();
    const char *core = openblas_get_corename();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && !is_avx512_core(core)) {
        setenv("DTRAIN_BLAS_WAS", core ? core : "unknown", 1);
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        reexec = 1;
    }
    if (!reexec) return;
    setenv("DTRAIN_REEXECED", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with what we have */
}

static int cmd_train(int argc, char **argv) {
    dt_train_config c = {.model = "cnn1", .data = "mnist", .algo = "local", .epochs = 10, .batch = 64,
                         .lr = 0.05f, .schedule = "const", .seed = 1, .augment = -1};
    const char *out = NULL;
    int no_augment = 0, no_save = 0;
    dt_opt opts[] = {
        {"model", OPT_STR, &c.model, "model name or spec file (dtrain info --list) [cnn1]", 0, 0, 0},
        {"data", OPT_STR, &c.data, "mnist | fashion-mnist | cifar10 [mnist]", 0, 0, 0},
        {"data-dir", OPT_STR, &c.data_dir, "folder with the dataset files [$DTRAIN_DATA/NAME or data/NAME]", 0, 0, 0},
        {"algo", OPT_STR, &c.algo, "training scheme [local]", 0, 0, 0},
        {"epochs", OPT_INT, &c.epochs, "epochs, >= 1 [10]", 1, 1e6, 0},
        {"batch", OPT_INT, &c.batch, "mini-batch size per rank, >= 1 [64]", 1, 1e6, 0},
        {"lr", OPT_FLOAT, &c.lr, "learning rate, > 0 [0.05]", 0, 1e6, 1},
        {"momentum", OPT_FLOAT, &c.momentum, "momentum in [0, 1) [0]", 0, 0.999999, 0},
        {"nesterov", OPT_FLAG, &c.nesterov, "Nesterov momentum", 0, 0, 0},
        {"weight-decay", OPT_FLOAT, &c.weight_decay, "L2 weight decay, >= 0 [0]", 0, 1e6, 0},
        {"schedule", OPT_STR, &c.schedule, "const | step:EVERY:GAMMA | cosine[:MIN_LR] [const]", 0, 0, 0},
        {"seed", OPT_SEED, &c.seed, "run seed (weights, shuffling, dropout) [1]", 0, 0, 0},
        {"train-limit", OPT_INT, &c.train_limit, "use only the first N training examples [all]", 1, 1e9, 0},
        {"test-limit", OPT_INT, &c.test_limit, "use only the first N test examples [all]", 1, 1e9, 0},
        {"no-augment", OPT_FLAG, &no_augment, "no random crop/flip (CIFAR)", 0, 0, 0},
        {"out", OPT_STR, &out, "final weights file [dtrain-MODEL-DATA.weights]", 0, 0, 0},
        {"no-save", OPT_FLAG, &no_save, "do not write final weights", 0, 0, 0},
        {"log", OPT_STR, &c.log_path, "JSON-lines log, one line per epoch and a summary", 0, 0, 0},
        {"checkpoint", OPT_STR, &c.checkpoint, "checkpoint written after every epoch", 0, 0, 0},
        {"resume", OPT_STR, &c.resume, "continue from a checkpoint", 0, 0, 0},
        {"quiet", OPT_FLAG, &c.quiet, "no progress output", 0, 0, 0},
    };
    int help;
    if (dt_parse_args("train", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("train", "[flags]\n\nTrains a model and writes its final weights.", opts, NOPTS(opts));
        return 0;
    }
    char out_default[256];
    if (!out && !no_save) {
        const char *base = strrchr(c.model, '/') ? strrchr(c.model, '/') + 1 : c.model;
        snprintf(out_default, sizeof out_default, "dtrain-%s-%s.weights", base, c.data);
        out = out_default;
    }
    c.weights_out = no_save ? NULL : out;
    if (no_augment) c.augment = 0;
    dt_runtime_init();
    dt_trainer t;
    dt_status st = dt_trainer_init(&t, &c);
    if (st == DT_OK) st = dt_trainer_run(&t);
    double final_acc = t.last.test_acc;
    dt_trainer_free(&t);
    if (st != DT_OK) return fail();
    if (!c.quiet && c.weights_out) printf("final test accuracy %.2f%%, weights written to %s\n", 100 * final_acc, c.weights_out);
    return 0;
}

static int cmd_eval(int argc, char **argv) {
    const char *model = "cnn1", *data = "mnist", *data_dir = NULL, *weights = NULL;
    int batch = 256, limit = 0;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0},
        {"weights", OPT_STR, &weights, "weights file written by dtrain train (required)", 0, 0, 0},
        {"data", OPT_STR, &data, "mnist | fashion-mnist | cifar10 [mnist]", 0, 0, 0},
        {"data-dir", OPT_STR, &data_dir, "folder with the dataset files", 0, 0, 0},
        {"batch", OPT_INT, &batch, "evaluation batch size [256]", 1, 1e6, 0},
        {"test-limit", OPT_INT, &limit, "use only the first N test examples [all]", 1, 1e9, 0},
    };
    int help;
    if (dt_parse_args("eval", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("eval", "--weights FILE [flags]\n\nTest accuracy of saved weights.", opts, NOPTS(opts));
        return 0;
    }
    if (!weights) { dt_fail(DT_ERR_ARG, "dtrain eval: --weights FILE is required"); return fail(); }
    dt_runtime_init();
    dt_model *m = NULL;
    dt_dataset test = {0};
    char dir[1024];
    dt_data_dir(data, data_dir, dir, sizeof dir);
    double acc = 0, loss = 0;
    dt_status st = dt_model_open(model, &m);
    if (st == DT_OK) st = dt_model_load(m, weights);
    if (st == DT_OK) st = dt_dataset_load(data, dir, 0, &test);
    if (st == DT_OK) st = dt_evaluate(m, &test, batch, limit, &acc, &loss);
    int n = limit > 0 && limit < test.n ? limit : test.n;
    dt_dataset_free(&test);
    dt_model_free(m);
    if (st != DT_OK) return fail();
    printf("test accuracy %.2f%% (%ld/%d), loss %.4f\n", 100 * acc, (long)(acc * n + 0.5), n, loss);
    return 0;
}

static int cmd_info(int argc, char **argv) {
    const char *model = "cnn1";
    int spec = 0, list = 0;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0},
        {"spec", OPT_FLAG, &spec, "print the model's spec text", 0, 0, 0},
        {"list", OPT_FLAG, &list, "list the built-in models", 0, 0, 0},
    };
    int help;
    if (dt_parse_args("info", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("info", "[--model NAME]\n\nLayers, output shapes, parameters and FLOPs of a model.", opts, NOPTS(opts));
        return 0;
    }
    if (list) {
        for (const char *const *n = dt_model_names(); *n; n++) printf("%s\n", *n);
        return 0;
    }
    if (spec) {
        char *text = dt_model_spec_text(model);
        if (!text) { dt_model *m; if (dt_model_from_name(model, &m) != DT_OK) return fail(); }
        fputs(text, stdout);
        free(text);
        return 0;
    }
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return fail();
    printf("model %s\n", model);
    dt_model_print(m, stdout);
    dt_model_free(m);
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Training-step speed on random data (no data loading, no evaluation), for bench/run. */
static int cmd_bench(int argc, char **argv) {
    const char *model = "cnn1";
    int batch = 64, warmup = 20, steps = 200;
    float lr = 0.01f, momentum = 0.9f;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0},
        {"batch", OPT_INT, &batch, "batch size [64]", 1, 1e6, 0},
        {"warmup", OPT_INT, &warmup, "untimed steps first [20]", 0, 1e9, 0},
        {"steps", OPT_INT, &steps, "timed steps [200]", 1, 1e9, 0},
        {"lr", OPT_FLOAT, &lr, "learning rate [0.01]", 0, 1e6, 1},
        {"momentum", OPT_FLOAT, &momentum, "momentum [0.9]", 0, 0.999999, 0},
    };
    int help;
    if (dt_parse_args("bench", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("bench", "[flags]\n\nTimes training steps on random data; prints one line.", opts, NOPTS(opts));
        return 0;
    }
    dt_runtime_init();
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return fail();
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    size_t in = (size_t)c * h * w;
    float *x = malloc((size_t)batch * in * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    dt_sgd opt;
    dt_status st = (x && y) ? dt_model_reserve(m, batch) : dt_fail(DT_ERR_NOMEM, "out of memory");
    if (st == DT_OK) st = dt_sgd_init(&opt, dt_model_num_params(m), momentum, 0, 0);
    if (st != DT_OK) { free(x); free(y); dt_model_free(m); return fail(); }
    dt_rng r;
    dt_rng_seed(&r, 7);
    for (size_t i = 0; i < (size_t)batch * in; i++) x[i] = 2 * dt_rng_uniform(&r) - 1;
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)dt_rng_below(&r, (uint32_t)dt_model_num_classes(m));
    dt_model_init(m, 1);
    double t0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t0 = now();
        dt_model_forward(m, x, batch, 1);
        dt_model_backward(m, y, NULL);
        dt_sgd_step(&opt, dt_model_params(m), dt_model_grads(m), lr);
    }
    double secs = now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("dtrain model=%s batch=%d images_per_s=%.1f fwd_flops=%.0f maxrss_kb=%ld blas=%s\n", model, batch,
           (double)steps * batch / secs, dt_model_flops(m), ru.ru_maxrss, openblas_get_corename());
    dt_sgd_free(&opt);
    free(x); free(y);
    dt_model_free(m);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: dtrain COMMAND [flags]   (dtrain COMMAND --help for its flags)\n\n"
            "commands:\n"
            "  train   train a model (single process; distributed schemes come with MPI)\n"
            "  eval    test accuracy of saved weights\n"
            "  info    layers, shapes, parameter count and FLOPs of a model\n"
            "  bench   time training steps on random data\n");
}

int main(int argc, char **argv) {
    ensure_fast_blas(argv);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "train")) return cmd_train(argc, argv);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc, argv);
    if (!strcmp(cmd, "info")) return cmd_info(argc, argv);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    fprintf(stderr, "dtrain: error: unknown command '%s' (expected train, eval, info or bench)\n", cmd);
    return 2;
}
