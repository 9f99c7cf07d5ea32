/* Flags (flag.h): values from text into typed members, back to text, and command lines. */
#include "core/flag_table.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/suggest.h"

const dt_flag *dt_flag_find(const dt_flag *flags, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(flags[i].name, name)) return &flags[i];
    return NULL;
}

static int in_range(const dt_flag *f, double x) {
    if (f->max <= f->min) return 1;
    if (f->min_open ? !(x > f->min) : !(x >= f->min)) return 0;
    return x <= f->max;
}

/* "an integer >= 1 and <= 1000": what a number flag takes. */
static void number_wanted(const dt_flag *f, const char *what, const char *fmt, char *why, size_t len) {
    if (f->max <= f->min) { snprintf(why, len, "%s", what); return; }
    char lo[40], hi[40];
    snprintf(lo, sizeof lo, fmt, f->min);
    snprintf(hi, sizeof hi, fmt, f->max);
    snprintf(why, len, "%s %s %s and <= %s", what, f->min_open ? ">" : ">=", lo, hi);
}

/* "a, b or c" */
static void word_list(const char *const *w, char *out, size_t len) {
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; w[i] && o < len; i++)
        o += (size_t)snprintf(out + o, len - o, "%s%s", i == 0 ? "" : w[i + 1] ? ", " : " or ", w[i]);
}

/* The text's value into *dst (f->size bytes); NULL, or what was expected (in why). */
static const char *parse_value(const dt_flag *f, const char *v, void *dst, char *why, size_t len) {
    char *end = NULL;
    errno = 0;
    switch (f->kind) {
    case DT_FLAG_INT: {
        const long lim = f->size == sizeof(int) ? INT_MAX : LONG_MAX;
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < -lim || x > lim || !in_range(f, (double)x))
            return number_wanted(f, "an integer", "%.0f", why, len), why;
        if (f->size == sizeof(int)) { int k = (int)x; memcpy(dst, &k, sizeof k); }
        else memcpy(dst, &x, sizeof x);
        return NULL;
    }
    case DT_FLAG_FLOAT: {
        double x = strtod(v, &end);
        const int fits = f->size == sizeof(double) || (isfinite(x) ? fabs(x) <= 3.4e38 : 0);
        /* a float member: the range holds for the value stored (1e-50 is 0 as a float, not > 0) */
        if (fits && f->size == sizeof(float)) x = (double)(float)x;
        if (errno || end == v || *end || !isfinite(x) || !fits || !in_range(f, x))
            return number_wanted(f, "a number", "%g", why, len), why;
        if (f->size == sizeof(float)) { float k = (float)x; memcpy(dst, &k, sizeof k); }
        else memcpy(dst, &x, sizeof x);
        return NULL;
    }
    case DT_FLAG_SEED: {
        unsigned long long x = strtoull(v, &end, 10);
        if (*v == '-' || *v == '+' || errno || end == v || *end) return "an integer >= 0 (a seed, below 2^64)";
        uint64_t k = (uint64_t)x;
        memcpy(dst, &k, sizeof k);
        return NULL;
    }
    case DT_FLAG_SWITCH: {
        if (strcmp(v, "0") && strcmp(v, "1")) return "0 or 1";
        int k = v[0] == '1';
        memcpy(dst, &k, sizeof k);
        return NULL;
    }
    case DT_FLAG_TEXT:
        if (!*v) return "a value, not nothing";
        memcpy(dst, &v, sizeof v);
        return NULL;
    case DT_FLAG_CHOICE:
        for (int i = 0; f->words[i]; i++)
            if (!strcmp(f->words[i], v)) { memcpy(dst, &i, sizeof i); return NULL; }
        word_list(f->words, why, len);
        int n = 0;
        while (f->words[n]) n++;
        const char *near = dt_suggest(v, f->words, n);
        if (near) snprintf(why + strlen(why), len - strlen(why), " (did you mean %s?)", near);
        return why;
    case DT_FLAG_CUSTOM: return f->parse(v, dst);
    }
    return "a value of a known kind";
}

/* One line for a bad value: "--name text: expected ..." */
static dt_status bad_value(const char *prefix, const dt_flag *f, const char *v, const char *why) {
    if (!*v) return dt_fail(DT_ERR_ARG, "%s--%s: expected %s", prefix, f->name, why);
    return dt_fail(DT_ERR_ARG, "%s--%s %s: expected %s", prefix, f->name, v, why);
}

static void mark_given(const dt_flag *f, void *base, int given) {
    if (f->given_at) memcpy((char *)base + f->given_at - 1, &given, sizeof given);
}

static dt_status set_prefixed(const char *prefix, const dt_flag *f, void *base, const char *text) {
    char why[300];
    /* parsed aside first: a bad value leaves the member as it was */
    union { long l; double d; uint64_t u; const char *s; char custom[DT_FLAG_CUSTOM_MAX]; } tmp;
    const char *wrong = parse_value(f, text, &tmp, why, sizeof why);
    if (wrong) return bad_value(prefix, f, text, wrong);
    memcpy((char *)base + f->at, &tmp, f->size);
    mark_given(f, base, 1);
    return DT_OK;
}

dt_status dt_flag_set(const dt_flag *f, void *base, const char *text) { return set_prefixed("", f, base, text); }

dt_status dt_flags_defaults(const dt_flag *flags, int n, void *base) {
    for (int i = 0; i < n; i++) {
        if (!flags[i].def) continue;
        if (set_prefixed("", &flags[i], base, flags[i].def) != DT_OK)
            return dt_fail(DT_ERR_STATE, "--%s: its declared default '%s' is not a value it takes", flags[i].name, flags[i].def);
        mark_given(&flags[i], base, 0);
    }
    return DT_OK;
}

void dt_flag_shortest(double x, int is_float, char *out, size_t len) {
    for (int digits = is_float ? 6 : 15; digits <= 17; digits++) {
        snprintf(out, len, "%.*g", digits, x);
        if (is_float ? strtof(out, NULL) == (float)x : strtod(out, NULL) == x) return;
    }
}

void dt_flag_format(const dt_flag *f, const void *base, char *out, size_t len) {
    const char *p = (const char *)base + f->at;
    int i = 0;
    switch (f->kind) {
    case DT_FLAG_INT:
        if (f->size == sizeof(int)) { memcpy(&i, p, sizeof i); snprintf(out, len, "%d", i); }
        else { long l; memcpy(&l, p, sizeof l); snprintf(out, len, "%ld", l); }
        return;
    case DT_FLAG_FLOAT:
        if (f->size == sizeof(float)) { float x; memcpy(&x, p, sizeof x); dt_flag_shortest(x, 1, out, len); }
        else { double x; memcpy(&x, p, sizeof x); dt_flag_shortest(x, 0, out, len); }
        return;
    case DT_FLAG_SEED: { uint64_t u; memcpy(&u, p, sizeof u); snprintf(out, len, "%llu", (unsigned long long)u); return; }
    case DT_FLAG_SWITCH: memcpy(&i, p, sizeof i); snprintf(out, len, "%d", i != 0); return;
    case DT_FLAG_TEXT: { const char *s; memcpy(&s, p, sizeof s); snprintf(out, len, "%s", s ? s : ""); return; }
    case DT_FLAG_CHOICE: {
        memcpy(&i, p, sizeof i);
        int n = 0;
        while (f->words[n]) n++;
        snprintf(out, len, "%s", i >= 0 && i < n ? f->words[i] : "?");
        return;
    }
    case DT_FLAG_CUSTOM: f->format(p, out, len); return;
    }
}

void dt_flag_json(const dt_flag *f, const void *base, dt_json *line) {
    char v[300];
    dt_flag_format(f, base, v, sizeof v);
    if (f->kind == DT_FLAG_SWITCH) dt_json_bool(line, f->name, v[0] == '1');
    else if (f->kind == DT_FLAG_INT || f->kind == DT_FLAG_FLOAT || f->kind == DT_FLAG_SEED) dt_json_raw(line, f->name, v);
    else dt_json_str(line, f->name, v);
}

/* ------------------------------------------------------------------ command lines */

static const dt_flag *lookup(const dt_flag_list *lists, int nlists, const char *name, size_t nlen, const dt_flag_list **in) {
    for (int l = 0; l < nlists; l++)
        for (int k = 0; k < lists[l].n; k++)
            if (strlen(lists[l].flags[k].name) == nlen && !strncmp(lists[l].flags[k].name, name, nlen)) {
                if (in) *in = &lists[l];
                return &lists[l].flags[k];
            }
    return NULL;
}

const dt_flag *dt_flags_lookup(const dt_flag_list *lists, int nlists, const char *a, const dt_flag_list **in) {
    if (strncmp(a, "--", 2) != 0) return NULL;
    const char *name = a + 2, *eq = strchr(name, '=');
    return lookup(lists, nlists, name, eq ? (size_t)(eq - name) : strlen(name), in);
}

/* One line: the flag, and the closest of the command's (shown) flags when it is likely a typo. */
static dt_status unknown(const char *cmd, const char *name, size_t nlen, const dt_flag_list *lists, int nlists) {
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)nlen, name);
    const char *names[256];
    int n = 0;
    for (int l = 0; l < nlists; l++)
        for (int k = 0; k < lists[l].n && n < 256; k++)
            if (!lists[l].flags[k].hidden) names[n++] = lists[l].flags[k].name;
    const char *near = dt_suggest(word, names, n);
    if (near) return dt_fail(DT_ERR_ARG, "dtrain %s: unknown flag '--%.*s' (did you mean --%s?)", cmd, (int)nlen, name, near);
    return dt_fail(DT_ERR_ARG, "dtrain %s: unknown flag '--%.*s' (see dtrain %s --help)", cmd, (int)nlen, name, cmd);
}

dt_status dt_flags_parse_argv(const char *cmd, int argc, char **argv, int first, const dt_flag_list *lists, int nlists,
                              int *help) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dtrain %s: ", cmd);
    *help = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = 1; continue; }
        /* a one-letter flag also as --help writes it: -n 4 (as mpiexec's) */
        const int short_form = a[0] == '-' && a[1] && a[1] != '-' && (!a[2] || a[2] == '=');
        if (strncmp(a, "--", 2) != 0 && !short_form)
            return dt_fail(DT_ERR_ARG, "%sunexpected argument '%s' (flags start with --; see dtrain %s --help)", prefix, a, cmd);
        const char *name = a + (short_form ? 1 : 2), *eq = strchr(name, '=');
        const size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const dt_flag_list *in = NULL;
        const dt_flag *f = lookup(lists, nlists, name, nlen, &in);
        if (!f) return unknown(cmd, name, nlen, lists, nlists);
        const char *v = "1";
        if (f->kind == DT_FLAG_SWITCH) {
            if (eq) return dt_fail(DT_ERR_ARG, "%s--%s takes no value", prefix, f->name);
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            return dt_fail(DT_ERR_ARG, "%s--%s needs a value", prefix, f->name);
        }
        dt_status st = in->take ? in->take(in->ctx, f, v) : set_prefixed(prefix, f, in->base, v);
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

/* " [DEFAULT]" for --help: the value in force (the list's struct), or the declared default. */
static void help_default(const dt_flag *f, const dt_flag_list *l, char *out, size_t len) {
    char v[200] = "";
    out[0] = 0;
    if (f->kind == DT_FLAG_SWITCH || (f->zero && !*f->zero)) return;
    if (l->base) {
        dt_flag_format(f, l->base, v, sizeof v);
        const char *p = (const char *)l->base + f->at;
        size_t z = 0;
        while (z < f->size && !p[z]) z++;
        if (z == f->size && f->zero) snprintf(v, sizeof v, "%s", f->zero);
    } else if (f->def) {
        snprintf(v, sizeof v, "%s", f->def);
    }
    if (*v) snprintf(out, len, " [%s]", v);
}

void dt_flags_help(const char *cmd, const char *usage, const dt_flag_list *lists, int nlists) {
    printf("usage: dtrain %s %s\n\n", cmd, usage);
    for (int l = 0; l < nlists; l++)
        for (int k = 0; k < lists[l].n; k++) {
            const dt_flag *f = &lists[l].flags[k];
            if (f->hidden) continue;
            const char *arg = f->metavar ? f->metavar
                            : f->kind == DT_FLAG_SWITCH ? ""
                            : f->kind == DT_FLAG_INT || f->kind == DT_FLAG_SEED ? "N"
                            : f->kind == DT_FLAG_FLOAT ? "X" : "S";
            char left[64], def[220];
            /* a one-letter flag as its usage line and every example write it: -n 4 */
            snprintf(left, sizeof left, "%s%s%s%s", f->name[1] ? "--" : "-", f->name, *arg ? " " : "", arg);
            help_default(f, &lists[l], def, sizeof def);
            printf("  %-22s %s%s\n", left, f->help, def);
        }
}
