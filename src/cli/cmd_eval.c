/* dtrain eval: test accuracy of saved weights. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/flag_table.h"
#include "core/paths.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "trainer/trainer.h"

typedef struct {
    const char *model, *data, *data_dir, *weights;
    int batch, limit;
} eval_opts;

static const dt_flag eval_flags[] = {
    {"model", DT_AT_TEXT(eval_opts, model), .help = "model name or spec file", .zero = "the one the weights file names, else cnn1"},
    {"weights", DT_AT_TEXT(eval_opts, weights), .help = "weights file written by dtrain train (required)"},
    {"data", DT_AT_TEXT(eval_opts, data), .help = "mnist | fashion-mnist | cifar10 | kjv | fortunes | text:FILE | tokens:FILE", .zero = "the one the weights file names, else mnist"},
    {"data-dir", DT_AT_TEXT(eval_opts, data_dir), .help = "folder with the dataset files"},
    {"batch", DT_AT_INT(eval_opts, batch), .min = 1, .max = 1e6, .help = "evaluation batch size"},
    {"test-limit", DT_AT_INT(eval_opts, limit), .min = 1, .max = 1e9, .help = "use only the first N test examples", .zero = "all"},
};

int dt_cmd_eval(int argc, char **argv) {
    eval_opts o = {.batch = 256};
    const dt_flag_list list = {.flags = eval_flags, .n = NOPTS(eval_flags), .base = &o};
    const int parsed = dt_cli_flags("eval", argc, argv, 2, &list,
                                    "--weights FILE [flags]\n\nTest accuracy of saved weights (a language model's: its test loss). The file names its model and dataset "
                                    "(files of older\nbuilds do not: give --model and --data).");
    if (parsed >= 0) return parsed;
    const char *model = o.model, *data = o.data, *data_dir = o.data_dir, *weights = o.weights;
    const int batch = o.batch, limit = o.limit;
    if (!weights) { dt_fail(DT_ERR_ARG, "dtrain eval: --weights FILE is required"); return dt_cli_fail(); }
    if (dt_check_input("--weights", weights) != DT_OK) return dt_cli_fail();
    dt_runtime_init();
    dt_weights_meta w;
    if (dt_weights_meta_read(weights, &w) != DT_OK) return dt_cli_fail();
    dt_model *m = NULL;
    dt_dataset test = {0};
    double acc = 0, loss = 0;
    dt_status st = data && w.data && strcmp(data, w.data) != 0
                       ? dt_fail(DT_ERR_ARG, "eval: --data %s: %s was trained on %s", data, weights, w.data)
                       : dt_weights_model("eval", model, weights, &w, &m);
    if (!data) data = w.data ? w.data : "mnist";
    char dir[1024];
    dt_data_dir(data, data_dir, dir, sizeof dir);
    if (st == DT_OK && (st = dt_model_load(m, weights)) != DT_OK && !w.model) {
        /* a file of an older build does not name its model: its shapes tell it is another */
        char why[900];
        snprintf(why, sizeof why, "%s", dt_last_error());
        st = dt_fail(st, "eval: --model %s: %s (weights of another model?)", model ? model : "cnn1", why);
    }
    if (st == DT_OK) st = dt_dataset_load_first(data, dir, 0, limit, &test); /* only what is evaluated */
    /* a text's held-out windows are the model's context long */
    if (st == DT_OK && test.text) st = dt_trainer_fit_data(m, model ? model : w.model ? w.model : "?", data, &test, NULL);
    if (st == DT_OK) st = dt_evaluate(m, &test, batch, limit, &acc, &loss);
    const int n = limit > 0 && limit < test.n ? limit : test.n, text = test.text, bytes = test.bytes;
    dt_dataset_free(&test);
    dt_model_free(m);
    dt_weights_meta_free(&w);
    if (st != DT_OK) return dt_cli_fail();
    if (text && bytes)
        printf("test loss %.4f (%.3f bits per byte), next-token accuracy %.2f%% (%d windows)\n", loss, loss / 0.69314718055994530942,
               100 * acc, n);
    else if (text) printf("test loss %.4f, next-token accuracy %.2f%% (%d windows)\n", loss, 100 * acc, n);
    else printf("test accuracy %.2f%% (%ld/%d), loss %.4f\n", 100 * acc, (long)(acc * n + 0.5), n, loss);
    return 0;
}
