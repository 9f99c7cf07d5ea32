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
#include "dtrain.h"
#include "core/paths.h"
#include "trainer/trainer.h"
#include "core/tensorfile.h"

/* The model a weights file is evaluated with: --model, else the one the file names (its spec
 * text, or a built-in model's name), else cnn1 (files of older builds name none). A model
 * named inside a file is never opened as a path: the file is not the user, and what it names
 * could be any local file (a FIFO that never answers, a secret whose line would come back in
 * the parser's error). A --model or --data that contradicts the file is refused: weights
 * evaluated on the wrong data give a plausible, wrong figure. */
static dt_status eval_model(const char *model, const char *data, const char *weights, const dt_weights_meta *w,
                            dt_model **m) {
    if (model && !dt_weights_meta_same_model(w, model))
        return dt_fail(DT_ERR_ARG, "eval: --model %s: %s holds weights of %s", model, weights, w->model);
    if (data && w->data && strcmp(data, w->data) != 0)
        return dt_fail(DT_ERR_ARG, "eval: --data %s: %s was trained on %s", data, weights, w->data);
    if (model) return dt_model_open(model, m);
    if (w->spec) {
        char origin[1100];
        snprintf(origin, sizeof origin, "%s (its model %s)", weights, w->model ? w->model : "");
        return dt_model_from_spec(w->spec, origin, m);
    }
    if (!w->model) return dt_model_from_name("cnn1", m);
    char *zoo = dt_model_spec_text(w->model);
    if (!zoo)
        return dt_fail(DT_ERR_FORMAT, "%s: names its model '%s' without the model's spec text, and no built-in model "
                       "has that name (a model named in a file is never opened as a path): give --model", weights, w->model);
    free(zoo);
    return dt_model_from_name(w->model, m);
}

typedef struct {
    const char *model, *data, *data_dir, *weights;
    int batch, limit;
} eval_opts;

static const dt_flag eval_flags[] = {
    {"model", DT_AT_TEXT(eval_opts, model), .help = "model name or spec file", .zero = "the one the weights file names, else cnn1"},
    {"weights", DT_AT_TEXT(eval_opts, weights), .help = "weights file written by dtrain train (required)"},
    {"data", DT_AT_TEXT(eval_opts, data), .help = "mnist | fashion-mnist | cifar10", .zero = "the one the weights file names, else mnist"},
    {"data-dir", DT_AT_TEXT(eval_opts, data_dir), .help = "folder with the dataset files"},
    {"batch", DT_AT_INT(eval_opts, batch), .min = 1, .max = 1e6, .help = "evaluation batch size"},
    {"test-limit", DT_AT_INT(eval_opts, limit), .min = 1, .max = 1e9, .help = "use only the first N test examples", .zero = "all"},
};

int dt_cmd_eval(int argc, char **argv) {
    eval_opts o = {.batch = 256};
    const dt_flag_list list = {.flags = eval_flags, .n = NOPTS(eval_flags), .base = &o};
    int help;
    if (dt_flags_parse_argv("eval", argc, argv, 2, &list, 1, &help) != DT_OK) return dt_cli_fail();
    if (help) {
        dt_flags_help("eval", "--weights FILE [flags]\n\nTest accuracy of saved weights. The file names its model and dataset "
                              "(files of older\nbuilds do not: give --model and --data).", &list, 1);
        return 0;
    }
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
    dt_status st = eval_model(model, data, weights, &w, &m);
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
    if (st == DT_OK) st = dt_evaluate(m, &test, batch, limit, &acc, &loss);
    int n = limit > 0 && limit < test.n ? limit : test.n;
    dt_dataset_free(&test);
    dt_model_free(m);
    dt_weights_meta_free(&w);
    if (st != DT_OK) return dt_cli_fail();
    printf("test accuracy %.2f%% (%ld/%d), loss %.4f\n", 100 * acc, (long)(acc * n + 0.5), n, loss);
    return 0;
}
