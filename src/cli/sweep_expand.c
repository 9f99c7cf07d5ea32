/* The experiment file's sections (sweep_ini.c read them) expanded into runs: every [variant]
 * (or the [base] alone) crossed with its own axes, the [axes] and the seeds, each run's flags
 * resolved and its folder named. */
#include "cli/sweep_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
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
    for (const char *c = part; *c && o + 1 < len; c++) name[o++] = dt_sweep_safe_char(*c) ? *c : '_';
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
static int add_run(dt_sweep_parser *p, dt_sweep *s, const builder *b, const char *name, int line) {
    if (!strcmp(name, "sweep.json") || !strcmp(name, DT_SWEEP_LOCK))
        return dt_sweep_err(p, line, "a run named '%s' would take the sweep's own file of that name: name the variant otherwise", name);
    if (s->nruns == DT_SWEEP_MAX_RUNS) return dt_sweep_err(p, line, "more than %d runs", DT_SWEEP_MAX_RUNS);
    s->runs = dt_sweep_grow(s->runs, s->nruns, &s->cap_runs, sizeof *s->runs);
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
            return dt_sweep_err(p, f->line, "key '%s': {seed} in '%s', but the run has no seed (give [sweep] seeds, or seed)", f->key,
                       f->value);
        r->flags[r->nflags++] = (dt_sweep_flag){dt_sweep_copy_text(f->key), value, f->line};
    }
    /* the one rank-count error a flag check without ranks cannot see, and the likeliest */
    const char *algo = "local";
    for (int i = 0; i < b->n; i++)
        if (!strcmp(b->f[i].key, "algo")) algo = b->f[i].value;
    if (r->ranks > 1 && !strcmp(algo, "local"))
        for (int i = 0; i < b->n; i++)
            if (!strcmp(b->f[i].key, "n"))
                return dt_sweep_err(p, b->f[i].line, "key 'n': %d ranks need an algo other than local (run '%s')", r->ranks, name);
    r->use_run = r->ranks > 1 || has(b, "hosts") || has(b, "hostfile") || has(b, "max-restarts") || has(b, "start-timeout");
    /* across hosts (or namespace hosts: DTRAIN_MPIEXEC=scripts/netcluster mpiexec) runs would share them */
    r->exclusive = has(b, "hosts") || has(b, "hostfile") || (r->use_run && getenv("DTRAIN_MPIEXEC") != NULL);
    return 1;
}

int dt_sweep_expand_variant(dt_sweep_parser *p, dt_sweep *s, const dt_sweep_section *v, const char **seeds, int nseeds, int seeds_line) {
    const dt_sweep_axis *ax[2 * DT_SWEEP_MAX_ITEMS];
    int nax = 0;
    for (int i = 0; i < v->naxes; i++) ax[nax++] = &v->axes[i];
    for (int i = 0; i < p->axes.naxes; i++) ax[nax++] = &p->axes.axes[i];
    /* a key an axis sets for every run of the variant cannot also be fixed by it, nor be two axes */
    for (int i = 0; i < p->axes.naxes; i++) {
        const char *k = p->axes.axes[i].key;
        for (int j = 0; j < v->nflags; j++)
            if (!strcmp(v->flags[j].key, k)) return dt_sweep_err(p, v->flags[j].line, "key '%s': an axis of [axes] (line %d) already sets it", k, p->axes.axes[i].line);
        for (int j = 0; j < v->naxes; j++)
            if (!strcmp(v->axes[j].key, k)) return dt_sweep_err(p, v->axes[j].line, "axis '%s': [axes] (line %d) has it too", k, p->axes.axes[i].line);
    }
    if (nseeds) {
        const dt_sweep_section *ss[] = {&p->base, v};
        for (int q = 0; q < 2; q++)
            for (int j = 0; j < ss[q]->nflags; j++)
                if (!strcmp(ss[q]->flags[j].key, "seed")) return dt_sweep_err(p, ss[q]->flags[j].line, "key 'seed': [sweep] has seeds (line %d)", seeds_line);
        for (int j = 0; j < nax; j++)
            if (!strcmp(ax[j]->key, "seed")) return dt_sweep_err(p, ax[j]->line, "axis 'seed': [sweep] has seeds (line %d)", seeds_line);
    }
    int idx[2 * DT_SWEEP_MAX_ITEMS] = {0};
    const dt_sweep_flag *hosts = dt_sweep_get(p, "hosts"), *hostfile = dt_sweep_get(p, "hostfile");
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
int dt_sweep_distinct_names(dt_sweep_parser *p, const dt_sweep *s) {
    const dt_sweep_run **order = malloc((size_t)s->nruns * sizeof *order);
    if (!order) dt_nomem_exit("the order of %d runs", s->nruns);
    for (int i = 0; i < s->nruns; i++) order[i] = &s->runs[i];
    qsort(order, (size_t)s->nruns, sizeof *order, by_name);
    for (int i = 1; i < s->nruns; i++)
        if (!strcmp(order[i - 1]->name, order[i]->name)) {
            const dt_sweep_run *later = order[i];
            free(order);
            return dt_sweep_err(p, later->line, "two runs get the folder name '%s' (values that differ only in characters "
                       "other than letters, digits and ._+=-?)", later->name);
        }
    free(order);
    return 1;
}
