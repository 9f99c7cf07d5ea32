/* The table of training schemes (schemes.def) and their options: lookup, checking the
 * values given against each scheme's declared flags, and the values in force. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/strategy.h"
#include "core/suggest.h"

#define DT_SCHEME(x) extern const dt_scheme dt_scheme_##x;
#include "algorithms/schemes.def"
#undef DT_SCHEME

static const dt_scheme *const schemes[] = {
#define DT_SCHEME(x) &dt_scheme_##x,
#include "algorithms/schemes.def"
#undef DT_SCHEME
};

const dt_scheme *const *dt_schemes(int *n) {
    *n = (int)(sizeof schemes / sizeof schemes[0]);
    return schemes;
}

const dt_scheme *dt_scheme_find(const char *name) {
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (!strcmp(schemes[i]->name, name)) return schemes[i];
    return NULL;
}

const char *dt_strategy_names(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t o = 0;
        for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "", schemes[i]->name);
    }
    return buf;
}

static const dt_flag *scheme_flag(const dt_scheme *sc, const char *name) {
    for (int i = 0; i < sc->nflags; i++)
        if (!strcmp(sc->flags[i].name, name)) return &sc->flags[i];
    return NULL;
}

dt_status dt_algo_config_set(dt_algo_config *a, const char *name, const char *value) {
    int known = 0, n;
    const dt_scheme *const *all = dt_schemes(&n);
    for (int i = 0; i < n && !known; i++) known = scheme_flag(all[i], name) != NULL;
    if (!known) return dt_fail(DT_ERR_ARG, "--%s: no scheme takes this flag", name);
    for (int i = 0; i < a->nset; i++)
        if (!strcmp(a->set[i].name, name)) { a->set[i].value = value; return DT_OK; }
    if (a->nset == DT_ALGO_MAX_SET) return dt_fail(DT_ERR_ARG, "--%s: too many scheme flags given", name);
    a->set[a->nset].name = name;
    a->set[a->nset].value = value;
    a->nset++;
    return DT_OK;
}

static const char *value_text(const dt_algo_config *a, const dt_flag *f) {
    for (int i = 0; a && i < a->nset; i++)
        if (!strcmp(a->set[i].name, f->name)) return a->set[i].value;
    return f->def;
}

static int in_range(const dt_flag *f, double x) {
    if (f->max <= f->min) return 1;
    if (f->min_open ? !(x > f->min) : !(x >= f->min)) return 0;
    return x <= f->max;
}

/* A flag's value as a number, checked; *x untouched on error. */
static dt_status parse_number(const dt_flag *f, const char *v, double *x) {
    char *end = NULL;
    errno = 0;
    if (f->type == DT_FLAG_INT || f->type == DT_FLAG_SWITCH) {
        long k = strtol(v, &end, 10);
        if (errno || end == v || *end || k < -2147483647L || k > 2147483647L || !in_range(f, (double)k)) {
            if (f->type == DT_FLAG_SWITCH) return dt_fail(DT_ERR_ARG, "--%s %s: expected 0 or 1", f->name, v);
            if (f->max > f->min)
                return dt_fail(DT_ERR_ARG, "--%s %s: expected an integer %s %.0f and <= %.0f", f->name, v,
                               f->min_open ? ">" : ">=", f->min, f->max);
            return dt_fail(DT_ERR_ARG, "--%s %s: expected an integer", f->name, v);
        }
        *x = (double)k;
        return DT_OK;
    }
    double d = strtod(v, &end);
    if (errno || end == v || *end || d != d || !in_range(f, d)) {
        if (f->max > f->min)
            return dt_fail(DT_ERR_ARG, "--%s %s: expected a number %s %g and <= %g", f->name, v, f->min_open ? ">" : ">=",
                           f->min, f->max);
        return dt_fail(DT_ERR_ARG, "--%s %s: expected a number", f->name, v);
    }
    *x = d;
    return DT_OK;
}

dt_status dt_algo_check(const dt_algo_config *a) {
    const char *name = a->algo ? a->algo : "local";
    const dt_scheme *sc = dt_scheme_find(name);
    if (!sc) {
        const char *names[sizeof schemes / sizeof schemes[0]];
        for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) names[i] = schemes[i]->name;
        const char *near = dt_suggest(name, names, (int)(sizeof schemes / sizeof schemes[0]));
        if (near) return dt_fail(DT_ERR_ARG, "--algo %s: unknown algorithm (did you mean %s?)", name, near);
        return dt_fail(DT_ERR_ARG, "--algo %s: unknown algorithm (expected one of: %s)", name, dt_strategy_names());
    }
    /* a flag of another scheme would be silently ignored: refused, naming who takes it */
    for (int i = 0; i < a->nset; i++) {
        if (scheme_flag(sc, a->set[i].name)) continue;
        char takes[200] = "";
        size_t o = 0;
        for (size_t k = 0; k < sizeof schemes / sizeof schemes[0] && o < sizeof takes; k++)
            if (scheme_flag(schemes[k], a->set[i].name))
                o += (size_t)snprintf(takes + o, sizeof takes - o, "%s%s", o ? ", " : "", schemes[k]->name);
        if (!o) return dt_fail(DT_ERR_ARG, "--%s: no scheme takes this flag", a->set[i].name);
        return dt_fail(DT_ERR_ARG, "--%s: a flag of %s, not of --algo %s", a->set[i].name, takes, name);
    }
    dt_codec_spec spec;
    dt_status st = dt_codec_parse(a->compress, &spec);
    if (st != DT_OK) return st;
    if (spec.kind != DT_CODEC_NONE && sc->compress == DT_COMPRESS_NO) {
        char takes[160] = "";
        size_t o = 0;
        for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
            if (schemes[i]->compress != DT_COMPRESS_NO)
                o += (size_t)snprintf(takes + o, sizeof takes - o, "%s%s%s", o ? ", " : "", schemes[i]->name,
                                      schemes[i]->compress == DT_COMPRESS_WITH_SYNC ? " with --sync" : "");
        return dt_fail(DT_ERR_ARG, "--compress %s: not supported by --algo %s (supported: %s)", a->compress, name, takes);
    }
    for (int i = 0; i < sc->nflags; i++) {
        const dt_flag *f = &sc->flags[i];
        if (f->type == DT_FLAG_TEXT) continue; /* the scheme checks its words at create */
        double x;
        if ((st = parse_number(f, value_text(a, f), &x)) != DT_OK) return st;
    }
    /* the words (--threshold, --topology, ...): a scheme's create checks them and touches no
     * MPI, so a trial create says what is wrong before any rank starts */
    dt_strategy probe = {.scheme = sc, .cfg = a, .codec = spec};
    st = sc->create(&probe);
    if (probe.ops && probe.ops->destroy) probe.ops->destroy(&probe);
    return st;
}

dt_status dt_strategy_create(const dt_algo_config *a, dt_strategy **out) {
    *out = NULL;
    dt_status st = dt_algo_check(a);
    if (st != DT_OK) return st;
    dt_strategy *s = calloc(1, sizeof *s);
    if (!s) return dt_fail(DT_ERR_NOMEM, "out of memory");
    s->scheme = dt_scheme_find(a->algo ? a->algo : "local");
    s->cfg = a;
    if ((st = dt_codec_parse(a->compress, &s->codec)) == DT_OK) st = s->scheme->create(s);
    if (st == DT_OK && !s->ops) st = dt_fail(DT_ERR_STATE, "--algo %s: its create set no hooks", s->scheme->name);
    if (st != DT_OK) { dt_strategy_free(s); return st; }
    *out = s;
    return DT_OK;
}

void dt_strategy_free(dt_strategy *s) {
    if (!s) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s);
    free(s);
}

/* ------------------------------------------------------------------ values in force */

static const dt_flag *declared(const dt_strategy *s, const char *name, dt_flag_type type) {
    const dt_flag *f = scheme_flag(s->scheme, name);
    assert(f && "the scheme reads a flag it does not declare");
    assert(f->type == type && "the scheme reads a flag as another type");
    (void)type;
    return f;
}

static double number(const dt_strategy *s, const char *name, dt_flag_type type) {
    const dt_flag *f = declared(s, name, type);
    double x = 0;
    dt_status st = parse_number(f, value_text(s->cfg, f), &x);
    assert(st == DT_OK && "checked at create");
    (void)st;
    return x;
}

long dt_algo_int(const dt_strategy *s, const char *name) { return (long)number(s, name, DT_FLAG_INT); }
double dt_algo_float(const dt_strategy *s, const char *name) { return number(s, name, DT_FLAG_FLOAT); }
int dt_algo_switch(const dt_strategy *s, const char *name) { return number(s, name, DT_FLAG_SWITCH) != 0; }
int dt_algo_given(const dt_strategy *s, const char *name) {
    const dt_flag *f = scheme_flag(s->scheme, name);
    assert(f && "the scheme asks of a flag it does not declare");
    for (int i = 0; i < s->cfg->nset; i++)
        if (!strcmp(s->cfg->set[i].name, f->name)) return 1;
    return 0;
}

const char *dt_algo_text(const dt_strategy *s, const char *name) {
    return value_text(s->cfg, declared(s, name, DT_FLAG_TEXT));
}

void dt_algo_config_json(const dt_algo_config *a, dt_json *line) {
    const dt_scheme *sc = dt_scheme_find(a->algo ? a->algo : "local");
    dt_json_str(line, "compress", a->compress ? a->compress : "none");
    for (int i = 0; sc && i < sc->nflags; i++) {
        const dt_flag *f = &sc->flags[i];
        const char *v = value_text(a, f);
        double x = 0;
        if (f->type == DT_FLAG_TEXT || parse_number(f, v, &x) != DT_OK) dt_json_str(line, f->name, v);
        else if (f->type == DT_FLAG_SWITCH) dt_json_bool(line, f->name, x != 0);
        else dt_json_num(line, f->name, x);
    }
}
