/* local: single-process mini-batch SGD (the accuracy reference). Every hook is the
 * trainer's default, so the strategy is empty. */
#include "algorithms/strategy.h"

#include <stdlib.h>
#include <string.h>

dt_status dt_strategy_create(const char *name, dt_strategy **out) {
    *out = NULL;
    if (strcmp(name, "local") != 0)
        return dt_fail(DT_ERR_ARG, "--algo %s: unknown algorithm (expected: local)", name);
    dt_strategy *s = calloc(1, sizeof *s);
    if (!s) return dt_fail(DT_ERR_NOMEM, "out of memory");
    s->name = "local";
    *out = s;
    return DT_OK;
}

void dt_strategy_free(dt_strategy *s) {
    if (!s) return;
    if (s->destroy) s->destroy(s);
    free(s);
}
