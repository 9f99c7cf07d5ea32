/* The experiment file of `dtrain sweep` (grammar: docs/sweep.md), read with inih and
 * expanded into runs: every [variant] (or the [base] alone) crossed with its own axes, the
 * [axes] and the seeds. Every error is one line naming the file, the line and the key. */
#include "cli/sweep.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/paths.h"
#include "core/alloc.h"

/* Bounds of what a file may ask for; the reader's memory grows with what it holds, not with
 * these (a file of a few lines costs a few allocations). */
#define MAX_ITEMS 256    /* keys of a section, values of an axis, variants, seeds */
#define MAX_RUNS 20000

typedef struct axis {
    char *key;
    char **vals;
    int nvals, cap, line;
} axis;

typedef struct section {
    char name[128];
    int line;                      /* its [header] line; 0: not in the file */
    dt_sweep_flag *flags;
    int nflags, cap_flags;
    axis *axes;
    int naxes, cap_axes;
} section;

enum { SEC_NONE, SEC_SWEEP, SEC_BASE, SEC_AXES, SEC_VARIANT };

typedef struct parser {
    const char *path;
    FILE *fp;
    int line, bad;
    int cur;                       /* SEC_* */
    section *sec;                  /* the current section (not [sweep]) */
    int sweep_line;
    dt_sweep_flag sweep_keys[16];  /* [sweep]'s, as given (for duplicates) */
    int nsweep;
    section base, axes, *variants;
    int nvariants, cap_variants;
} parser;


static char *copy_text(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) dt_nomem_exit("a copy of %s", s ? s : "");
    return d;
}

/* room for one more of n items of `size` bytes in *items (capacity *cap), new ones zeroed */
static void *grow(void *items, int n, int *cap, size_t size) {
    if (n < *cap) return items;
    const int more = *cap ? 2 * *cap : 4;
    char *bigger = realloc(items, (size_t)more * size);
    if (!bigger) dt_nomem_exit("a list of %d items", more);
    memset(bigger + (size_t)*cap * size, 0, (size_t)(more - *cap) * size);
    *cap = more;
    return bigger;
}

/* One error, the first: "PATH:LINE: ..." */
static int err(parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int err(parser *p, int line, const char *fmt, ...) {
    if (p->bad) return 0;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dt_fail(DT_ERR_ARG, "%s:%d: %s", p->path, line, msg);
    p->bad = 1;
    return 0;
}

/* '_' too: local_steps is refused later naming local-steps (sweep_keys.c) */
static int flag_name_ok(const char *k) {
    if (!*k) return 0;
    for (; *k; k++)
        if (!isalnum((unsigned char)*k) && *k != '-' && *k != '_') return 0;
    return 1;
}

/* a run's folder name: letters, digits and ._+=- */
static int safe_char(char c) { return isalnum((unsigned char)c) || strchr("._+=-", c); }

static int name_ok(const char *s) {
    if (!*s || *s == '.' || strlen(s) > 100) return 0;
    for (; *s; s++)
        if (!safe_char(*s)) return 0;
    return 1;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* inih's line reader, wrapped: counts lines (inih's own number is not passed to handlers in
 * Debian's build), sees the [section] headers (inih only passes sections with keys), and
 * refuses what inih would silently misread: over-long lines (cut in two), NUL bytes (a line
 * cut short), indented lines (taken as a continuation of the previous value), KEY: VALUE
 * (inih takes ':' for '=') and text after a [section]'s closing bracket (dropped). */
static char *reader(char *str, int num, void *user) {
    parser *p = user;
    if (p->bad) return NULL;
    int len = 0, c = EOF;
    while (len < num - 1 && (c = getc(p->fp)) != EOF) {
        if (c == 0) { err(p, p->line + 1, "a NUL byte: expected a text file"); return NULL; }
        str[len++] = (char)c;
        if (c == '\n') break;
    }
    if (len == 0) return NULL;
    str[len] = 0;
    p->line++;
    if (str[len - 1] != '\n' && len == num - 1) {
        const int next = getc(p->fp);
        if (next != EOF) { err(p, p->line, "line longer than %d characters", num - 2); return NULL; }
    }
    char *t = str;
    if (p->line == 1 && !strncmp(t, "\xEF\xBB\xBF", 3)) t += 3;
    if ((*t == ' ' || *t == '\t') && *trim(t) && *trim(t) != ';' && *trim(t) != '#') {
        err(p, p->line, "indented line: start keys and [sections] at the beginning of the line");
        return NULL;
    }
    char copy[512];
    snprintf(copy, sizeof copy, "%s", t);
    char *h = trim(copy);
    if (*h != '[') {
        const size_t at = strcspn(h, "=:");
        if (*h && *h != ';' && *h != '#' && h[at] == ':')
            err(p, p->line, "expected KEY = VALUE, got ':' after '%.*s' (write '%.*s = ...')", (int)at, h, (int)at, h);
        return p->bad ? NULL : str;
    }
    char *close = strchr(h, ']');
    if (!close) return str; /* inih reports it */
    *close = 0;
    const char *after = trim(close + 1);
    if (*after && *after != ';' && *after != '#') {
        err(p, p->line, "text after [%s]: expected nothing or a ; comment, got '%s'", trim(h + 1), after);
        return NULL;
    }
    char *name = trim(h + 1);
    section *s = NULL;
    if (!strcmp(name, "sweep")) {
        if (p->sweep_line) { err(p, p->line, "section [sweep] given twice (first on line %d)", p->sweep_line); return NULL; }
        p->sweep_line = p->line;
        p->cur = SEC_SWEEP;
        p->sec = NULL;
        return str;
    }
    if (!strcmp(name, "base")) { s = &p->base; p->cur = SEC_BASE; }
    else if (!strcmp(name, "axes")) { s = &p->axes; p->cur = SEC_AXES; }
    else if (!strncmp(name, "variant", 7) && (name[7] == ' ' || name[7] == '\t' || !name[7])) {
        const char *vn = trim(name + 7);
        if (!name_ok(vn)) {
            err(p, p->line, "section [%s]: expected [variant NAME], NAME of letters, digits and ._+=- (at most 100)", name);
            return NULL;
        }
        for (int i = 0; i < p->nvariants; i++)
            if (!strcmp(p->variants[i].name, vn)) {
                err(p, p->line, "section [variant %s] given twice (first on line %d)", vn, p->variants[i].line);
                return NULL;
            }
        if (p->nvariants == MAX_ITEMS) { err(p, p->line, "more than %d variants", MAX_ITEMS); return NULL; }
        p->variants = grow(p->variants, p->nvariants, &p->cap_variants, sizeof *p->variants);
        s = &p->variants[p->nvariants++];
        snprintf(s->name, sizeof s->name, "%s", vn);
        p->cur = SEC_VARIANT;
    } else {
        err(p, p->line, "unknown section [%s] (expected [sweep], [base], [axes] or [variant NAME])", name);
        return NULL;
    }
    if (s->line) { err(p, p->line, "section [%s] given twice (first on line %d)", name, s->line); return NULL; }
    s->line = p->line;
    p->sec = s;
    return str;
}

static int check_ranks(parser *p, int line, const char *v) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > 100000)
        return err(p, line, "key 'n': expected a number of ranks, an integer >= 1, got '%s'", v);
    return 1;
}

static int sweep_key(parser *p, const char *key, const char *value) {
    char why[400];
    if (dt_sweep_sweep_key_unknown(key, why, sizeof why)) return err(p, p->line, "%s", why);
    if (!*value) return err(p, p->line, "key '%s': expected a value, got nothing", key);
    p->sweep_keys[p->nsweep++] = (dt_sweep_flag){copy_text(key), copy_text(value), p->line};
    return 1;
}

static int handler(void *user, const char *section_name, const char *name, const char *value) {
    parser *p = user;
    (void)section_name; /* the reader keeps the section, with its line */
    if (p->bad) return 1;
    char key[128];
    snprintf(key, sizeof key, "%s", name);
    if (p->cur == SEC_NONE) return err(p, p->line, "key '%s' before any [section]", key), 1;
    int is_axis = p->cur == SEC_AXES;
    char *k = key;
    if (p->cur == SEC_VARIANT && !strncmp(k, "axis", 4) && (k[4] == ' ' || k[4] == '\t')) { k = trim(k + 4); is_axis = 1; }
    if (p->cur == SEC_SWEEP) {
        for (int i = 0; i < p->nsweep; i++)
            if (!strcmp(p->sweep_keys[i].key, k)) return err(p, p->line, "key '%s' given twice in [sweep] (first on line %d)", k, p->sweep_keys[i].line), 1;
        return sweep_key(p, k, value), 1;
    }
    if (!flag_name_ok(k))
        return err(p, p->line, "key '%s': expected a dtrain train/run flag name without -- (letters, digits, '-')%s", k,
                   p->cur == SEC_VARIANT ? ", or 'axis NAME'" : ""), 1;
    if (!strcmp(k, "help")) return err(p, p->line, "key 'help': not a flag for a run (dtrain sweep --help, docs/sweep.md)"), 1;
    section *s = p->sec;
    for (int i = 0; i < s->nflags; i++)
        if (!strcmp(s->flags[i].key, k)) return err(p, p->line, "key '%s' given twice in this section (first on line %d)", k, s->flags[i].line), 1;
    for (int i = 0; i < s->naxes; i++)
        if (!strcmp(s->axes[i].key, k)) return err(p, p->line, "key '%s' given twice in this section (first on line %d)", k, s->axes[i].line), 1;
    if (s->nflags == MAX_ITEMS || s->naxes == MAX_ITEMS) return err(p, p->line, "more than %d keys in a section", MAX_ITEMS), 1;
    if (!is_axis) {
        if (!*value) return err(p, p->line, "key '%s': expected a value (true for a switch), got nothing", k), 1;
        if (!strcmp(k, "n") && !check_ranks(p, p->line, value)) return 1;
        s->flags = grow(s->flags, s->nflags, &s->cap_flags, sizeof *s->flags);
        s->flags[s->nflags++] = (dt_sweep_flag){copy_text(k), copy_text(value), p->line};
        return 1;
    }
    s->axes = grow(s->axes, s->naxes, &s->cap_axes, sizeof *s->axes);
    axis *a = &s->axes[s->naxes++]; /* counted at once: its values are freed with it, even on an error */
    a->key = copy_text(k);
    a->line = p->line;
    char list[512];
    snprintf(list, sizeof list, "%s", value);
    if (!*trim(list)) return err(p, p->line, "axis '%s': expected values separated by commas, got nothing", k), 1;
    char *at = list;
    for (char *next; at; at = next) {
        next = strchr(at, ',');
        if (next) *next++ = 0;
        char *v = trim(at);
        if (!*v) return err(p, p->line, "axis '%s': an empty value in '%s'", k, value), 1;
        for (int i = 0; i < a->nvals; i++)
            if (!strcmp(a->vals[i], v)) return err(p, p->line, "axis '%s': value '%s' given twice", k, v), 1;
        if (a->nvals == MAX_ITEMS) return err(p, p->line, "axis '%s': more than %d values", k, MAX_ITEMS), 1;
        if (!strcmp(k, "n") && !check_ranks(p, p->line, v)) return 1;
        a->vals = grow(a->vals, a->nvals, &a->cap, sizeof *a->vals);
        a->vals[a->nvals++] = copy_text(v);
    }
    return 1;
}

static const dt_sweep_flag *sweep_get(const parser *p, const char *key) {
    for (int i = 0; i < p->nsweep; i++)
        if (!strcmp(p->sweep_keys[i].key, key)) return &p->sweep_keys[i];
    return NULL;
}

/* Every key of the runs' sections a flag of their command, the first unknown one (by line)
 * refused with what it likely is; once the file is read, since [sweep]'s simulate (it may come
 * last) chooses the command. */
static int check_keys(parser *p, int sim) {
    const section *all[2 + MAX_ITEMS] = {&p->base, &p->axes};
    int nsec = 2, line = 0;
    for (int i = 0; i < p->nvariants; i++) all[nsec++] = &p->variants[i];
    char why[400], first[400];
    for (int q = 0; q < nsec; q++) {
        for (int i = 0; i < all[q]->nflags; i++)
            if ((!line || all[q]->flags[i].line < line) && dt_sweep_key_unknown(all[q]->flags[i].key, sim, why, sizeof why))
                line = all[q]->flags[i].line, memcpy(first, why, sizeof why);
        for (int i = 0; i < all[q]->naxes; i++)
            if ((!line || all[q]->axes[i].line < line) && dt_sweep_key_unknown(all[q]->axes[i].key, sim, why, sizeof why))
                line = all[q]->axes[i].line, memcpy(first, why, sizeof why);
    }
    return line ? err(p, line, "%s", first) : 1;
}

/* ------------------------------------------------------------------ expansion */

/* A run's flags as they are resolved: room for every key the file can give one run ([base]'s,
 * the variant's, one per axis) and the three the sweep adds (seed, hosts, hostfile). */
typedef struct builder {
    dt_sweep_flag *f;
    int n;
} builder;

static void put(builder *b, const char *key, const char *value, int line) {
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->f[i].key, key)) { b->f[i].value = (char *)value; b->f[i].line = line; return; }
    b->f[b->n++] = (dt_sweep_flag){(char *)key, (char *)value, line};
}

static int has(const builder *b, const char *key) {
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->f[i].key, key) && strcmp(b->f[i].value, "false")) return 1;
    return 0;
}

static void append_name(char *name, size_t len, const char *part) {
    size_t o = strlen(name);
    if (o && o + 1 < len) name[o++] = '-';
    for (const char *c = part; *c && o + 1 < len; c++) name[o++] = safe_char(*c) ? *c : '_';
    name[o] = 0;
}

/* A value with each {seed} made the run's seed (replay = runs/x/a-seed{seed}/log.jsonl: each
 * seed's run replays that seed's log); NULL when it has one and the run has no seed. */
static char *with_seed(const char *value, const char *seed) {
    size_t n = 0;
    for (const char *c = strstr(value, "{seed}"); c; c = strstr(c + 6, "{seed}")) n++;
    if (n && !seed) return NULL;
    char *out = malloc(strlen(value) + n * (seed ? strlen(seed) : 0) + 1);
    if (!out) dt_nomem_exit("a copy of %s", value);
    char *o = out;
    for (const char *c = value; *c;) {
        if (!strncmp(c, "{seed}", 6)) {
            o += sprintf(o, "%s", seed);
            c += 6;
        } else {
            *o++ = *c++;
        }
    }
    *o = 0;
    return out;
}

/* One run: the builder's flags resolved (n taken out, false dropped, true a switch, {seed} the
 * run's seed). */
static int add_run(parser *p, dt_sweep *s, const builder *b, const char *name, int line) {
    if (!strcmp(name, "sweep.json") || !strcmp(name, DT_SWEEP_LOCK))
        return err(p, line, "a run named '%s' would take the sweep's own file of that name: name the variant otherwise", name);
    if (s->nruns == MAX_RUNS) return err(p, line, "more than %d runs", MAX_RUNS);
    s->runs = grow(s->runs, s->nruns, &s->cap_runs, sizeof *s->runs);
    dt_sweep_run *r = &s->runs[s->nruns++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->line = line;
    r->ranks = 1;
    r->flags = calloc((size_t)b->n + 1, sizeof *r->flags);
    if (!r->flags) dt_nomem_exit("the flags of a run");
    const char *seed = NULL;
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->f[i].key, "seed")) seed = b->f[i].value;
    for (int i = 0; i < b->n; i++) {
        const dt_sweep_flag *f = &b->f[i];
        if (!strcmp(f->key, "n")) { r->ranks = atoi(f->value); r->ranks_line = f->line; continue; }
        if (!strcmp(f->value, "false")) continue;
        char *value = NULL; /* a switch (true) has none */
        if (strcmp(f->value, "true") && !(value = with_seed(f->value, seed)))
            return err(p, f->line, "key '%s': {seed} in '%s', but the run has no seed (give [sweep] seeds, or seed)", f->key,
                       f->value);
        r->flags[r->nflags++] = (dt_sweep_flag){copy_text(f->key), value, f->line};
    }
    /* the one rank-count error a flag check without ranks cannot see, and the likeliest */
    const char *algo = "local";
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->f[i].key, "algo")) algo = b->f[i].value;
    if (r->ranks > 1 && !strcmp(algo, "local"))
        for (int i = 0; i < b->n; i++)
            if (!strcmp(b->f[i].key, "n"))
                return err(p, b->f[i].line, "key 'n': %d ranks need an algo other than local (run '%s')", r->ranks, name);
    r->use_run = r->ranks > 1 || has(b, "hosts") || has(b, "hostfile") || has(b, "max-restarts") || has(b, "start-timeout");
    /* across hosts (or namespace hosts: DTRAIN_MPIEXEC=scripts/netcluster mpiexec) runs would share them */
    r->exclusive = has(b, "hosts") || has(b, "hostfile") || (r->use_run && getenv("DTRAIN_MPIEXEC") != NULL);
    return 1;
}

static int expand_variant(parser *p, dt_sweep *s, const section *v, const char **seeds, int nseeds, int seeds_line) {
    const axis *ax[2 * MAX_ITEMS];
    int nax = 0;
    for (int i = 0; i < v->naxes; i++) ax[nax++] = &v->axes[i];
    for (int i = 0; i < p->axes.naxes; i++) ax[nax++] = &p->axes.axes[i];
    /* a key an axis sets for every run of the variant cannot also be fixed by it, nor be two axes */
    for (int i = 0; i < p->axes.naxes; i++) {
        const char *k = p->axes.axes[i].key;
        for (int j = 0; j < v->nflags; j++)
            if (!strcmp(v->flags[j].key, k)) return err(p, v->flags[j].line, "key '%s': an axis of [axes] (line %d) already sets it", k, p->axes.axes[i].line);
        for (int j = 0; j < v->naxes; j++)
            if (!strcmp(v->axes[j].key, k)) return err(p, v->axes[j].line, "axis '%s': [axes] (line %d) has it too", k, p->axes.axes[i].line);
    }
    if (nseeds) {
        const section *ss[] = {&p->base, v};
        for (int q = 0; q < 2; q++)
            for (int j = 0; j < ss[q]->nflags; j++)
                if (!strcmp(ss[q]->flags[j].key, "seed")) return err(p, ss[q]->flags[j].line, "key 'seed': [sweep] has seeds (line %d)", seeds_line);
        for (int j = 0; j < nax; j++)
            if (!strcmp(ax[j]->key, "seed")) return err(p, ax[j]->line, "axis 'seed': [sweep] has seeds (line %d)", seeds_line);
    }
    int idx[2 * MAX_ITEMS] = {0};
    const dt_sweep_flag *hosts = sweep_get(p, "hosts"), *hostfile = sweep_get(p, "hostfile");
    const int line = v->line ? v->line : p->base.line ? p->base.line : 1;
    builder b = {.f = calloc((size_t)(p->base.nflags + v->nflags + nax + 3), sizeof *b.f)};
    if (!b.f) dt_nomem_exit("the flags of a run");
    for (;;) {
        for (int sd = 0; sd < (nseeds ? nseeds : 1); sd++) {
            b.n = 0;
            for (int i = 0; i < p->base.nflags; i++) put(&b, p->base.flags[i].key, p->base.flags[i].value, p->base.flags[i].line);
            for (int i = 0; i < v->nflags; i++) put(&b, v->flags[i].key, v->flags[i].value, v->flags[i].line);
            char name[256] = "";
            if (v->name[0]) append_name(name, sizeof name, v->name);
            for (int a = 0; a < nax; a++) {
                put(&b, ax[a]->key, ax[a]->vals[idx[a]], ax[a]->line);
                char part[300];
                snprintf(part, sizeof part, "%s=%s", ax[a]->key, ax[a]->vals[idx[a]]);
                append_name(name, sizeof name, part);
            }
            if (nseeds) {
                put(&b, "seed", seeds[sd], seeds_line);
                char part[40];
                snprintf(part, sizeof part, "seed%s", seeds[sd]);
                append_name(name, sizeof name, part);
            }
            if (hosts) put(&b, "hosts", hosts->value, hosts->line);
            if (hostfile) put(&b, "hostfile", hostfile->value, hostfile->line);
            if (!name[0]) snprintf(name, sizeof name, "run");
            if (!add_run(p, s, &b, name, line)) { free(b.f); return 0; }
        }
        int a = nax - 1; /* the odometer: the last axis turns fastest */
        while (a >= 0 && ++idx[a] == ax[a]->nvals) idx[a--] = 0;
        if (a < 0) { free(b.f); return 1; }
    }
}

static int by_name(const void *a, const void *b) {
    const dt_sweep_run *x = *(dt_sweep_run *const *)a, *y = *(dt_sweep_run *const *)b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x > y) - (x < y);
}

/* Every run its own folder: sorted by name, so that 20,000 runs cost no 2 * 10^8 compares. */
static int distinct_names(parser *p, const dt_sweep *s) {
    const dt_sweep_run **order = malloc((size_t)s->nruns * sizeof *order);
    if (!order) dt_nomem_exit("the order of %d runs", s->nruns);
    for (int i = 0; i < s->nruns; i++) order[i] = &s->runs[i];
    qsort(order, (size_t)s->nruns, sizeof *order, by_name);
    for (int i = 1; i < s->nruns; i++)
        if (!strcmp(order[i - 1]->name, order[i]->name)) {
            const dt_sweep_run *later = order[i];
            free(order);
            return err(p, later->line, "two runs get the folder name '%s' (values that differ only in characters "
                       "other than letters, digits and ._+=-?)", later->name);
        }
    free(order);
    return 1;
}

/* [sweep] seeds: integers >= 0 separated by spaces or commas, none empty between two commas;
 * each kept as its number (01 is 1) so that no seed runs twice under two names. */
static int read_seeds(parser *p, const dt_sweep_flag *k, char out[][24], int *n) {
    const char *at = k->value;
    for (;;) {
        const size_t part = strcspn(at, ",");
        int in_part = 0;
        for (size_t i = 0; i < part;) {
            if (isspace((unsigned char)at[i])) { i++; continue; }
            const size_t digits = strspn(at + i, "0123456789"), end = i + strcspn(at + i, " \t,");
            if (digits == 0 || i + digits != end || digits > 18)
                return err(p, k->line, "key 'seeds': expected seeds (integers >= 0) separated by spaces or commas, got '%.*s'",
                           (int)(end - i), at + i);
            char num[24];
            snprintf(num, sizeof num, "%llu", strtoull(at + i, NULL, 10));
            for (int j = 0; j < *n; j++)
                if (!strcmp(out[j], num)) return err(p, k->line, "key 'seeds': seed %s given twice", num);
            if (*n == MAX_ITEMS) return err(p, k->line, "key 'seeds': more than %d seeds", MAX_ITEMS);
            memcpy(out[(*n)++], num, sizeof num);
            in_part = 1;
            i = end;
        }
        if (!in_part) return err(p, k->line, "key 'seeds': an empty value in '%s' (expected seeds separated by spaces or commas)", k->value);
        if (!at[part]) return 1;
        at += part + 1;
    }
}

static int finish(parser *p, dt_sweep *s) {
    const dt_sweep_flag *k;
    if ((k = sweep_get(p, "name"))) {
        if (!name_ok(k->value)) return err(p, k->line, "key 'name': expected letters, digits and ._+=- (at most 100), got '%s'", k->value);
        snprintf(s->name, sizeof s->name, "%s", k->value);
    } else { /* the file's name without folder and extension */
        const char *b = strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;
        snprintf(s->name, sizeof s->name, "%.*s", (int)(strrchr(b, '.') && strrchr(b, '.') != b ? strrchr(b, '.') - b : (long)strlen(b)), b);
        for (char *c = s->name; *c; c++) if (!safe_char(*c)) *c = '_';
    }
    if ((k = sweep_get(p, "out"))) snprintf(s->out, sizeof s->out, "%s", k->value);
    else snprintf(s->out, sizeof s->out, "runs/%s", s->name);
    if ((k = sweep_get(p, "parallel")) && strcmp(k->value, "auto")) {
        char *end;
        errno = 0;
        long n = strtol(k->value, &end, 10);
        if (errno || end == k->value || *end || n < 1 || n > 100000)
            return err(p, k->line, "key 'parallel': expected auto or a number of cores >= 1, got '%s'", k->value);
        s->parallel = (int)n;
    }
    if (sweep_get(p, "hosts") && (k = sweep_get(p, "hostfile"))) return err(p, k->line, "key 'hostfile': give hosts or hostfile, not both");
    const dt_sweep_flag *sim = sweep_get(p, "simulate");
    if (sim && strcmp(sim->value, "true") && strcmp(sim->value, "false"))
        return err(p, sim->line, "key 'simulate': expected true or false, got '%s'", sim->value);
    if (!check_keys(p, sim && !strcmp(sim->value, "true"))) return 0;
    char seeds_buf[MAX_ITEMS][24];
    const char *seeds[MAX_ITEMS];
    int nseeds = 0, seeds_line = 0;
    if ((k = sweep_get(p, "seeds")) && !read_seeds(p, k, seeds_buf, &nseeds)) return 0;
    for (int i = 0; i < nseeds; i++) seeds[i] = seeds_buf[i];
    if (k) seeds_line = k->line;
    section implicit = {.line = 0};
    if (p->nvariants == 0 && !expand_variant(p, s, &implicit, seeds, nseeds, seeds_line)) return 0;
    for (int i = 0; i < p->nvariants; i++)
        if (!expand_variant(p, s, &p->variants[i], seeds, nseeds, seeds_line)) return 0;
    /* simulate = true: every run is dtrain sim -n N, all its ranks in one process (a core) */
    if ((k = sim)) {
        if (k->line && (sweep_get(p, "hosts") || sweep_get(p, "hostfile")) && !strcmp(k->value, "true"))
            return err(p, k->line, "key 'simulate': the hosts are simulated: not with hosts or hostfile");
        for (int i = 0; i < s->nruns && !strcmp(k->value, "true"); i++)
            s->runs[i].sim = 1, s->runs[i].use_run = 0, s->runs[i].exclusive = 0;
    }
    return distinct_names(p, s);
}

static void free_section(section *s) {
    for (int i = 0; i < s->nflags; i++) { free(s->flags[i].key); free(s->flags[i].value); }
    for (int i = 0; i < s->naxes; i++) {
        free(s->axes[i].key);
        for (int j = 0; j < s->axes[i].nvals; j++) free(s->axes[i].vals[j]);
        free(s->axes[i].vals);
    }
    free(s->flags);
    free(s->axes);
}

dt_status dt_sweep_read(const char *path, dt_sweep *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    parser *p = calloc(1, sizeof *p);
    if (!p) return dt_nomem("the parser of %s", path);
    p->path = path;
    dt_status st = DT_OK;
    if (dt_open_regular(path, &p->fp, NULL) != DT_OK) /* its error: "PATH: why" */
        st = dt_fail(DT_ERR_IO, "%s: cannot read the experiment file: %s", path,
                     dt_last_error() + strnlen(dt_last_error(), strlen(path) + 2));
    else {
        const int rc = ini_parse_stream(reader, p, handler, p);
        if (!p->bad && ferror(p->fp)) st = dt_fail(DT_ERR_IO, "%s: cannot read the experiment file: %s", path, strerror(errno));
        else if (!p->bad && rc > 0) err(p, rc, "expected [section], KEY = VALUE, or a ; comment");
        if (!p->bad && !p->base.line && !p->axes.line && !p->nvariants) err(p, 1, "no [base], [axes] or [variant NAME]: nothing to run");
        if (!p->bad && finish(p, s) && dt_sweep_check_outputs(s) != DT_OK) p->bad = 1; /* one file for several runs */
        if (p->bad) st = DT_ERR_ARG;
    }
    if (p->fp) fclose(p->fp);
    free_section(&p->base);
    free_section(&p->axes);
    for (int i = 0; p->variants && i < p->nvariants; i++) free_section(&p->variants[i]);
    for (int i = 0; i < p->nsweep; i++) { free(p->sweep_keys[i].key); free(p->sweep_keys[i].value); }
    free(p->variants);
    free(p);
    if (st != DT_OK) dt_sweep_free(s);
    return st;
}

void dt_sweep_free(dt_sweep *s) {
    for (int i = 0; s->runs && i < s->nruns; i++) {
        for (int j = 0; j < s->runs[i].nflags; j++) { free(s->runs[i].flags[j].key); free(s->runs[i].flags[j].value); }
        free(s->runs[i].flags);
    }
    free(s->runs);
    s->runs = NULL;
    s->nruns = s->cap_runs = 0;
}
