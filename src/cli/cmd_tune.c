/* dtrain tune: a kernel plan for a model, batch and precision on this CPU (models/plan.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/flag_table.h"
#include "dtrain.h"
#include "trainer/plan_cache.h"
#include "trainer/plan_tune.h"

typedef struct {
    const char *model, *out;
    int batch, precision, repeats, steps;
} tune_opts;

static const dt_flag tune_flags[] = {
    {"model", DT_AT_TEXT(tune_opts, model), .help = "model name or spec file"},
    {"batch", DT_AT_INT(tune_opts, batch), .min = 1, .max = 1e6, .help = "batch size (a rank's)"},
    {"precision", DT_AT_CHOICE(tune_opts, precision, dt_precision_names), .help = "fp32 | bf16 (as dtrain train)"},
    {"out", DT_AT_TEXT(tune_opts, out), .help = "the plan file to write", .zero = "the cache --plan auto reads"},
    {"repeats", DT_AT_INT(tune_opts, repeats), .min = 1, .max = 99, .help = "alternating rounds; medians over them"},
    {"steps", DT_AT_INT(tune_opts, steps), .min = 1, .max = 1000, .help = "timed steps a kernel a round (after one untimed)"},
};

int dt_cmd_tune(int argc, char **argv) {
    tune_opts o = {.model = "cnn1", .batch = 64, .repeats = 3, .steps = 2};
    const dt_flag_list list = {.flags = tune_flags, .n = NOPTS(tune_flags), .base = &o};
    const int parsed = dt_cli_flags("tune", argc, argv, 2, &list,
                                    "[--model M] [--batch B] [--precision P] [--out FILE]\n\n"
                                    "Times each layer's candidate kernels on this CPU and writes the fastest as a plan\n"
                                    "(train, run, sim and bench take it: --plan FILE, or --plan auto for the cached one).");
    if (parsed >= 0) return parsed;
    dt_runtime_init();
    char path[4096];
    if (o.out) snprintf(path, sizeof path, "%s", o.out);
    else if (dt_plan_auto_path(o.model, o.batch, o.precision, path, sizeof path) != DT_OK) return dt_cli_fail();
    const dt_plan_opts po = {.repeats = o.repeats, .steps = o.steps, .tie = 0.03, .log = stderr};
    dt_plan p;
    if (dt_plan_make(o.model, o.batch, o.precision, &po, &p) != DT_OK) return dt_cli_fail();
    dt_plan_print(&p, stdout);
    const dt_status st = dt_plan_write(path, &p);
    if (st == DT_OK) printf("written: %s\n", path);
    dt_plan_free(&p);
    return st == DT_OK ? 0 : dt_cli_fail();
}
