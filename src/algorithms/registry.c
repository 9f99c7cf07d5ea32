/* The table of training schemes. */
#include <stdlib.h>
#include <string.h>

#include "algorithms/strategy.h"
#include "comm/codec.h"

/* compress: the scheme takes --compress (eventgrad checks --sync itself) */
typedef struct { const char *name; dt_status (*create)(dt_strategy *s); int compress; } entry;

static const entry schemes[] = {
    {"local", dt_local_create, 0},   {"allreduce", dt_allreduce_create, 1}, {"ps", dt_ps_create, 1},
    {"fedavg", dt_fedavg_create, 1}, {"dpsgd", dt_dpsgd_create, 1},         {"eventgrad", dt_eventgrad_create, 1},
    {"downpour", dt_downpour_create, 1},
};

static const entry *table(int *n) {
    *n = (int)(sizeof schemes / sizeof schemes[0]);
    return schemes;
}

const char *dt_strategy_names(void) {
    static char buf[128];
    if (!buf[0]) {
        int n;
        const entry *t = table(&n);
        for (int i = 0; i < n; i++) {
            if (i) strcat(buf, ", ");
            strcat(buf, t[i].name);
        }
    }
    return buf;
}

dt_status dt_strategy_create(const char *name, const dt_algo_options *opt, dt_strategy **out) {
    *out = NULL;
    int n;
    const entry *t = table(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) {
            /* --compress: a valid value, and a scheme that knows how to use it */
            dt_codec_spec spec;
            dt_status cs = dt_codec_parse(opt->compress, &spec);
            if (cs != DT_OK) return cs;
            if (spec.kind != DT_CODEC_NONE && !t[i].compress)
                return dt_fail(DT_ERR_ARG, "--compress %s: not supported by --algo %s yet (supported: allreduce, ps, fedavg, "
                               "downpour, dpsgd, eventgrad with --sync)",
                               opt->compress, name);
            dt_strategy *s = calloc(1, sizeof *s);
            if (!s) return dt_fail(DT_ERR_NOMEM, "out of memory");
            s->name = t[i].name;
            s->opt = opt;
            dt_status st = t[i].create(s);
            if (st != DT_OK) { dt_strategy_free(s); return st; }
            *out = s;
            return DT_OK;
        }
    return dt_fail(DT_ERR_ARG, "--algo %s: unknown algorithm (expected one of: %s)", name, dt_strategy_names());
}

void dt_strategy_free(dt_strategy *s) {
    if (!s) return;
    if (s->destroy) s->destroy(s);
    free(s);
}
