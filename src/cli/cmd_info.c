/* dtrain info: a model's layers, shapes, parameters and FLOPs. */
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

int dt_cmd_info(int argc, char **argv) {
    const char *model = "cnn1";
    int spec = 0, list = 0;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0, 0, NULL},
        {"spec", OPT_FLAG, &spec, "print the model's spec text", 0, 0, 0, 0, NULL},
        {"list", OPT_FLAG, &list, "list the built-in models", 0, 0, 0, 0, NULL},
    };
    int help;
    if (dt_parse_args("info", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return dt_cli_fail();
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
        if (!text) { dt_model *m; if (dt_model_from_name(model, &m) != DT_OK) return dt_cli_fail(); }
        fputs(text, stdout);
        free(text);
        return 0;
    }
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return dt_cli_fail();
    printf("model %s\n", model);
    dt_model_print(m, stdout);
    dt_model_free(m);
    return 0;
}
