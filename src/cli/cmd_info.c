/* dtrain info: a model's layers, shapes, parameters and FLOPs. */
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
#include "models/plan.h"
#include "trainer/trainer.h"

typedef struct {
    const char *model, *plan;
    int spec, list;
} info_opts;

static const dt_flag info_flags[] = {
    {"model", DT_AT_TEXT(info_opts, model), .help = "model name or spec file"},
    {"spec", DT_AT_SWITCH(info_opts, spec), .help = "print the model's spec text"},
    {"list", DT_AT_SWITCH(info_opts, list), .help = "list the built-in models"},
    {"plan", DT_AT_TEXT(info_opts, plan), .help = "print a kernel plan file (dtrain tune): each layer's kernel and times"},
};

int dt_cmd_info(int argc, char **argv) {
    info_opts o = {.model = "cnn1"};
    const dt_flag_list flags = {.flags = info_flags, .n = NOPTS(info_flags), .base = &o};
    const int parsed = dt_cli_flags("info", argc, argv, 2, &flags,
                                    "[--model NAME]\n\nLayers, output shapes, parameters and FLOPs of a model.");
    if (parsed >= 0) return parsed;
    const char *model = o.model;
    const int spec = o.spec, list = o.list;
    if (list) {
        for (const char *const *n = dt_model_names(); *n; n++) printf("%s\n", *n);
        return 0;
    }
    if (o.plan) {
        dt_plan p;
        if (dt_plan_read(o.plan, &p) != DT_OK) return dt_cli_fail();
        dt_plan_print(&p, stdout);
        char cpu[sizeof p.cpu];
        dt_plan_cpu(cpu, sizeof cpu);
        if (strcmp(cpu, p.cpu) != 0 || strcmp(dt_version(), p.version) != 0)
            printf("(not usable here: made %s)\n", strcmp(cpu, p.cpu) != 0 ? "on another CPU" : "by another dtrain version");
        dt_plan_free(&p);
        return 0;
    }
    if (spec) {
        char *text = dt_model_spec_text(model);
        if (!text) { dt_model *m; if (dt_model_from_name(model, &m) != DT_OK) return dt_cli_fail(); }
        fputs(text, stdout);
        free(text);
        return 0;
    }
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return dt_cli_fail();
    printf("model %s\n", model);
    dt_model_print(m, stdout);
    char engines[256];
    dt_model_engines(m, engines, sizeof engines);
    printf("engines: %s\n", *engines ? engines : "dtrain's own kernels for every layer (a build without oneDNN)");
    dt_model_print_precision(m, stdout);
    dt_model_free(m);
    return 0;
}
