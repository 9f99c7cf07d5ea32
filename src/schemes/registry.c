/* The table of training schemes (schemes.def) and their options: lookup, checking the
 * values given against each scheme's declared flags (core/flag_table.h) into its options struct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schemes/registry.h"

#include "core/alloc.h"
#include "core/suggest.h"

#define DT_SCHEME(x) extern const dt_scheme_def dt_scheme_##x;
#include "schemes/schemes.def"
#undef DT_SCHEME

static const dt_scheme_def *const builtin[] = {
#define DT_SCHEME(x) &dt_scheme_##x,
#include "schemes/schemes.def"
#undef DT_SCHEME
};

/* The built-in schemes, then those registered at run time (dt_scheme_register), in order. */
#define MAX_SCHEMES 32
static const dt_scheme_def *schemes[MAX_SCHEMES];
static int nschemes;

static void fill_builtin(void) {
    if (nschemes) return;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) schemes[nschemes++] = builtin[i];
}

const dt_scheme_def *const *dt_schemes(int *n) {
    fill_builtin();
    *n = nschemes;
    return schemes;
}

const dt_scheme_def *dt_scheme_find(const char *name) {
    fill_builtin();
    for (int i = 0; i < nschemes; i++)
        if (!strcmp(schemes[i]->name, name)) return schemes[i];
    return NULL;
}

static const dt_flag *scheme_flag(const dt_scheme_def *sc, const char *name) {
    return dt_flag_find(sc->flags, sc->nflags, name);
}

const char *dt_scheme_any(const dt_scheme_def *sc, const void *arg) {
    (void)sc, (void)arg;
    return "";
}

const char *dt_scheme_takes_flag(const dt_scheme_def *sc, const void *name) { return scheme_flag(sc, name) ? "" : NULL; }

const char *dt_scheme_compresses(const dt_scheme_def *sc, const void *arg) {
    (void)arg;
    return sc->compress == DT_COMPRESS_NO ? NULL : sc->compress == DT_COMPRESS_WITH_SYNC ? " with --sync" : "";
}

/* --compress powersgd:R */
static const char *sums_factors(const dt_scheme_def *sc, const void *arg) {
    (void)arg;
    return sc->compress == DT_COMPRESS_AND_POWERSGD ? "" : NULL;
}

size_t dt_schemes_where(char *out, size_t len, const char *sep, dt_scheme_where_fn where, const void *arg) {
    fill_builtin();
    size_t o = 0;
    if (len) out[0] = 0;
    for (int i = 0; i < nschemes && o < len; i++) { /* a full buffer ends the list (out + o stays inside) */
        const char *then = where(schemes[i], arg);
        if (then)
            o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s%s", o ? sep : "", schemes[i]->name, then);
    }
    return o;
}

const char *dt_scheme_names(void) {
    static char buf[512];
    dt_schemes_where(buf, sizeof buf, ", ", dt_scheme_any, NULL);
    return buf;
}

/* A registered scheme's name is a word of the command line (--algo NAME, a log's "algo"):
 * lower-case letters, digits, '-' and '_', starting with a letter. */
static int good_name(const char *name) {
    if (!name || !(name[0] >= 'a' && name[0] <= 'z') || strlen(name) > 31) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_')) return 0;
    return 1;
}

dt_status dt_scheme_register(const dt_scheme_def *def) {
    fill_builtin();
    if (!def || !good_name(def->name))
        return dt_fail(DT_ERR_ARG, "dt_scheme_register: the name '%s' is not a scheme name (a-z, 0-9, - and _, "
                       "starting with a letter, up to 31)", def && def->name ? def->name : "(null)");
    if (!def->create) return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: no create function", def->name);
    if (dt_scheme_find(def->name)) {
        if (dt_scheme_find(def->name) == def) return DT_OK; /* registered twice: once */
        return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: a scheme of that name exists", def->name);
    }
    if (nschemes == MAX_SCHEMES) return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: %d schemes at most", def->name, MAX_SCHEMES);
    /* the flags fit the options struct and their defaults parse (a mistake in the table, named) */
    if (def->nflags > 0 && !def->flags) return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: nflags without flags", def->name);
    for (int i = 0; i < def->nflags; i++) {
        const dt_flag *f = &def->flags[i];
        if (!f->name || !f->name[0] || f->at + f->size > def->opts_size)
            return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: flag %d has no name or lies outside the options struct "
                           "(DT_SCHEME_FLAGS(table, struct))", def->name, i);
    }
    if (def->opts_size) {
        void *probe = calloc(1, def->opts_size);
        if (!probe) return dt_nomem("the options of %s", def->name);
        const dt_status st = dt_flags_defaults(def->flags, def->nflags, probe);
        free(probe);
        char why[256];
        snprintf(why, sizeof why, "%s", dt_last_error());
        if (st != DT_OK) return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: %s", def->name, why);
    }
    /* a flag two schemes declare is one flag of the command line: the same kind and default */
    for (int i = 0; i < def->nflags; i++) {
        const dt_flag *f = &def->flags[i];
        for (int k = 0; k < nschemes; k++) {
            const dt_flag *g = scheme_flag(schemes[k], f->name);
            if (g && (g->kind != f->kind || (g->def != f->def && (!g->def || !f->def || strcmp(g->def, f->def)))))
                return dt_fail(DT_ERR_ARG, "dt_scheme_register %s: --%s is a flag of %s with another kind or default",
                               def->name, f->name, schemes[k]->name);
        }
    }
    schemes[nschemes++] = def;
    return DT_OK;
}

dt_status dt_scheme_config_set(dt_scheme_config *a, const char *name, const char *value) {
    int known = 0, n;
    const dt_scheme_def *const *all = dt_schemes(&n);
    for (int i = 0; i < n && !known; i++) known = scheme_flag(all[i], name) != NULL;
    if (!known) {
        const char *names[256];
        int k = 0;
        for (int i = 0; i < n; i++)
            for (int f = 0; f < all[i]->nflags && k < 256; f++)
                if (!all[i]->flags[f].hidden) names[k++] = all[i]->flags[f].name;
        const char *near = dt_suggest(name, names, k);
        if (near) return dt_fail(DT_ERR_ARG, "--%s: no scheme takes this flag (did you mean --%s?)", name, near);
        return dt_fail(DT_ERR_ARG, "--%s: no scheme takes this flag", name);
    }
    for (int i = 0; i < a->nset; i++)
        if (!strcmp(a->set[i].name, name)) { a->set[i].value = value; return DT_OK; }
    if (a->nset == DT_SCHEME_MAX_SET) return dt_fail(DT_ERR_ARG, "--%s: too many scheme flags given", name);
    a->set[a->nset].name = name;
    a->set[a->nset].value = value;
    a->nset++;
    return DT_OK;
}

/* The scheme's options struct: its declared defaults, then the values given (each checked by
 * its flag, one line naming it), then the defaults that depend on --compress (the def's
 * adjust). *out NULL for a scheme without flags; freed by the caller. */
static dt_status fill_opts(const dt_scheme_def *sc, const dt_scheme_config *a, const dt_codec_spec *codec, void **out) {
    *out = NULL;
    if (!sc->opts_size) return DT_OK;
    void *o = calloc(1, sc->opts_size);
    if (!o) return dt_nomem("the options of %s", sc->name);
    dt_status st = dt_flags_defaults(sc->flags, sc->nflags, o);
    for (int i = 0; st == DT_OK && i < a->nset; i++) {
        const dt_flag *f = scheme_flag(sc, a->set[i].name);
        if (f) st = dt_flag_set(f, o, a->set[i].value);
    }
    if (st == DT_OK && sc->adjust) sc->adjust(o, codec);
    if (st != DT_OK) { free(o); return st; }
    *out = o;
    return DT_OK;
}

dt_status dt_scheme_check(const dt_scheme_config *a, dt_scheme_choice *out) {
    if (out) *out = (dt_scheme_choice){0};
    const char *name = a->name ? a->name : "local";
    const dt_scheme_def *sc = dt_scheme_find(name);
    if (!sc) {
        const char *names[MAX_SCHEMES];
        for (int i = 0; i < nschemes; i++) names[i] = schemes[i]->name;
        const char *near = dt_suggest(name, names, nschemes);
        if (near) return dt_fail(DT_ERR_ARG, "--algo %s: unknown scheme (did you mean %s?)", name, near);
        return dt_fail(DT_ERR_ARG, "--algo %s: unknown scheme (expected one of: %s)", name, dt_scheme_names());
    }
    /* a flag of another scheme would be silently ignored: refused, naming who takes it */
    for (int i = 0; i < a->nset; i++) {
        if (scheme_flag(sc, a->set[i].name)) continue;
        char takes[200];
        if (!dt_schemes_where(takes, sizeof takes, ", ", dt_scheme_takes_flag, a->set[i].name)) return dt_fail(DT_ERR_ARG, "--%s: no scheme takes this flag", a->set[i].name);
        return dt_fail(DT_ERR_ARG, "--%s: a flag of %s, not of --algo %s", a->set[i].name, takes, name);
    }
    dt_codec_spec spec;
    dt_status st = dt_codec_parse(a->compress, &spec);
    if (st != DT_OK) return st;
    if (spec.kind != DT_CODEC_NONE && sc->compress == DT_COMPRESS_NO) {
        char takes[160];
        dt_schemes_where(takes, sizeof takes, ", ", dt_scheme_compresses, NULL);
        return dt_fail(DT_ERR_ARG, "--compress %s: not supported by --algo %s (supported: %s)", a->compress, name, takes);
    }
    if (spec.kind == DT_CODEC_POWERSGD && sc->compress != DT_COMPRESS_AND_POWERSGD) {
        char takes[160];
        dt_schemes_where(takes, sizeof takes, ", ", sums_factors, NULL);
        return dt_fail(DT_ERR_ARG, "--compress %s: low-rank factors are summed by --algo %s only, not --algo %s", a->compress,
                       takes, name);
    }
    /* the values, then what create checks across them: a scheme's create touches no MPI, so a
     * trial create says what is wrong before any rank starts */
    void *opts;
    if ((st = fill_opts(sc, a, &spec, &opts)) != DT_OK) return st;
    dt_scheme probe = {.def = sc, .opts = opts, .codec = spec};
    st = sc->create(&probe);
    if (probe.ops && probe.ops->destroy) probe.ops->destroy(&probe);
    if (st != DT_OK || !out) { free(opts); return st; }
    *out = (dt_scheme_choice){.def = sc, .opts = opts, .codec = spec};
    return DT_OK;
}

void dt_scheme_choice_free(dt_scheme_choice *c) {
    free(c->opts);
    c->opts = NULL;
}

dt_status dt_scheme_create(dt_scheme_choice *c, dt_scheme **out) {
    *out = NULL;
    if (!c->def) return dt_fail(DT_ERR_STATE, "dt_scheme_create: the configuration was not checked (dt_scheme_check)");
    dt_scheme *s = calloc(1, sizeof *s);
    if (!s) return dt_nomem("the %s scheme", c->def->name);
    *s = (dt_scheme){.def = c->def, .opts = c->opts, .codec = c->codec};
    c->opts = NULL;
    dt_status st = s->def->create(s);
    if (st == DT_OK && !s->ops) st = dt_fail(DT_ERR_STATE, "--algo %s: its create set no hooks", s->def->name);
    if (st != DT_OK) { dt_scheme_free(s); return st; }
    *out = s;
    return DT_OK;
}

dt_status dt_scheme_make(const dt_scheme_config *a, dt_scheme **out) {
    dt_scheme_choice c;
    *out = NULL;
    dt_status st = dt_scheme_check(a, &c);
    if (st == DT_OK) st = dt_scheme_create(&c, out);
    dt_scheme_choice_free(&c);
    return st;
}

void dt_scheme_free(dt_scheme *s) {
    if (!s) return;
    if (s->ops && s->ops->destroy) s->ops->destroy(s);
    free((void *)s->opts);
    free(s);
}

void *dt_scheme_new_at(dt_scheme *s, size_t size, const dt_scheme_ops *ops, int traits, const char *file, int line) {
    void *p = dt_alloc_at(1, size, 1, file, line, "the %s scheme", s->def->name);
    if (!p) return NULL;
    s->impl = p;
    s->ops = ops;
    s->decentralized = (traits & DT_SCHEME_DECENTRALIZED) != 0;
    s->own_baseline = (traits & DT_SCHEME_OWN_BASELINE) != 0;
    return p;
}

void dt_scheme_flags_json(const dt_scheme *s, dt_json *line) {
    for (int i = 0; s->opts && i < s->def->nflags; i++) dt_flag_json(&s->def->flags[i], s->opts, line);
}
