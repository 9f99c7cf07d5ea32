/* What the subcommands share (cli.h). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/flag_table.h"
#include "dtrain.h"
#include "trainer/trainer.h"

int dt_cli_fail(void) {
    fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
    return 2;
}

int dt_cli_flags(const char *cmd, int argc, char **argv, int first, const struct dt_flag_list *list, const char *usage) {
    int help;
    if (dt_flags_parse_argv(cmd, argc, argv, first, list, 1, &help) != DT_OK) return dt_cli_fail();
    if (help) {
        dt_flags_help(cmd, usage, list, 1);
        return 0;
    }
    return -1;
}

/* The model a weights file is evaluated with: --model, else the one the file names (its spec
 * text, or a built-in model's name), else cnn1 (files of older builds name none). A model
 * named inside a file is never opened as a path: the file is not the user, and what it names
 * could be any local file (a FIFO that never answers, a secret whose line would come back in
 * the parser's error). A --model that contradicts the file is refused. */
dt_status dt_weights_model(const char *cmd, const char *model, const char *weights, const dt_weights_meta *w, dt_model **m) {
    if (model && !dt_weights_meta_same_model(w, model))
        return dt_fail(DT_ERR_ARG, "%s: --model %s: %s holds weights of %s", cmd, model, weights, w->model);
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
