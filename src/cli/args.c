#include "cli/args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/suggest.h"

static dt_status bad(const char *cmd, const dt_opt *o, const char *v) {
    if (o->kind == OPT_INT || o->kind == OPT_SEED) {
        if (o->max > o->min)
            return dt_fail(DT_ERR_ARG, "dtrain %s: --%s %s: expected an integer %s %.0f%s", cmd, o->name, v,
                           o->min_exclusive ? ">" : ">=", o->min, o->max < 1e15 ? " (and not huge)" : "");
        return dt_fail(DT_ERR_ARG, "dtrain %s: --%s %s: expected an integer", cmd, o->name, v);
    }
    return dt_fail(DT_ERR_ARG, "dtrain %s: --%s %s: expected a number %s %g%s", cmd, o->name, v,
                   o->min_exclusive ? ">" : ">=", o->min, o->max < 1e15 ? " and within range" : "");
}

/* One line: the flag, and the closest of the command's (shown) flags when it is likely a typo. */
static dt_status unknown(const char *cmd, const char *name, size_t nlen, const dt_opt *opts, int nopts) {
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)nlen, name);
    const char *names[256];
    int n = 0;
    for (int k = 0; k < nopts && n < 256; k++)
        if (!opts[k].hidden) names[n++] = opts[k].name;
    const char *near = dt_suggest(word, names, n);
    if (near) return dt_fail(DT_ERR_ARG, "dtrain %s: unknown flag '--%.*s' (did you mean --%s?)", cmd, (int)nlen, name, near);
    return dt_fail(DT_ERR_ARG, "dtrain %s: unknown flag '--%.*s' (see dtrain %s --help)", cmd, (int)nlen, name, cmd);
}

static int in_range(const dt_opt *o, double x) {
    if (o->max <= o->min) return 1; /* no bounds */
    if (o->min_exclusive ? !(x > o->min) : !(x >= o->min)) return 0;
    return x <= o->max;
}

dt_status dt_parse_args(const char *cmd, int argc, char **argv, int first, const dt_opt *opts,
                        int nopts, int *help) {
    *help = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = 1; continue; }
        if (strncmp(a, "--", 2) != 0)
            return dt_fail(DT_ERR_ARG, "dtrain %s: unexpected argument '%s' (flags start with --; see dtrain %s --help)", cmd, a, cmd);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const dt_opt *o = NULL;
        for (int k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == nlen && !strncmp(opts[k].name, name, nlen)) o = &opts[k];
        if (!o) return unknown(cmd, name, nlen, opts, nopts);
        if (o->kind == OPT_FLAG) {
            if (eq) return dt_fail(DT_ERR_ARG, "dtrain %s: --%s takes no value", cmd, o->name);
            *(int *)o->dst = 1;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return dt_fail(DT_ERR_ARG, "dtrain %s: --%s needs a value", cmd, o->name);
        char *end = NULL;
        errno = 0;
        switch (o->kind) {
        case OPT_INT: {
            long x = strtol(v, &end, 10);
            if (errno || end == v || *end || x < -2147483647L || x > 2147483647L || !in_range(o, (double)x)) return bad(cmd, o, v);
            *(int *)o->dst = (int)x;
            break;
        }
        case OPT_SEED: {
            if (*v == '-') return bad(cmd, o, v);
            unsigned long long x = strtoull(v, &end, 10);
            if (errno || end == v || *end) return bad(cmd, o, v);
            *(uint64_t *)o->dst = (uint64_t)x;
            break;
        }
        case OPT_FLOAT: {
            double x = strtod(v, &end);
            if (errno || end == v || *end || x != x || !in_range(o, x)) return bad(cmd, o, v);
            *(float *)o->dst = (float)x;
            break;
        }
        case OPT_STR:
            if (!*v) return dt_fail(DT_ERR_ARG, "dtrain %s: --%s needs a non-empty value", cmd, o->name);
            *(const char **)o->dst = v;
            break;
        case OPT_FLAG: break;
        }
    }
    return DT_OK;
}

void dt_print_help(const char *cmd, const char *usage, const dt_opt *opts, int nopts) {
    printf("usage: dtrain %s %s\n\n", cmd, usage);
    for (int k = 0; k < nopts; k++) {
        if (opts[k].hidden) continue;
        char left[64];
        const char *arg = opts[k].metavar ? opts[k].metavar : opts[k].kind == OPT_FLAG ? "" : opts[k].kind == OPT_STR ? "S"
                        : opts[k].kind == OPT_FLOAT ? "X" : "N";
        snprintf(left, sizeof left, "--%s%s%s", opts[k].name, *arg ? " " : "", arg);
        printf("  %-22s %s\n", left, opts[k].help);
    }
}
