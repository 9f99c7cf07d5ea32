/* The experiment file of `dtrain sweep` (grammar: docs/sweep.md), read with inih and
 * expanded into runs: every [variant] (or the [base] alone) crossed with its own axes, the
 * [axes] and the seeds. Every error is one line naming the file, the line and the key.
 * Here: the reading as a whole and [sweep]'s settings; sweep_ini.c reads the lines,
 * sweep_expand.c makes the runs. */
#include "cli/sweep_parse.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/paths.h"

/* Every key of the runs' sections a flag of their command, the first unknown one (by line)
 * refused with what it likely is; once the file is read, since [sweep]'s simulate (it may come
 * last) chooses the command. */
static int check_keys(dt_sweep_parser *p, int sim) {
    const dt_sweep_section *all[2 + DT_SWEEP_MAX_ITEMS] = {&p->base, &p->axes};
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
    return line ? dt_sweep_err(p, line, "%s", first) : 1;
}

/* [sweep] seeds: integers >= 0 separated by spaces or commas, none empty between two commas;
 * each kept as its number (01 is 1) so that no seed runs twice under two names. */
static int read_seeds(dt_sweep_parser *p, const dt_sweep_flag *k, char out[][24], int *n) {
    const char *at = k->value;
    for (;;) {
        const size_t part = strcspn(at, ",");
        int in_part = 0;
        for (size_t i = 0; i < part;) {
            if (isspace((unsigned char)at[i])) { i++; continue; }
            const size_t digits = strspn(at + i, "0123456789"), end = i + strcspn(at + i, " \t,");
            if (digits == 0 || i + digits != end || digits > 18)
                return dt_sweep_err(p, k->line, "key 'seeds': expected seeds (integers >= 0) separated by spaces or commas, got '%.*s'",
                           (int)(end - i), at + i);
            char num[24];
            snprintf(num, sizeof num, "%llu", strtoull(at + i, NULL, 10));
            for (int j = 0; j < *n; j++)
                if (!strcmp(out[j], num)) return dt_sweep_err(p, k->line, "key 'seeds': seed %s given twice", num);
            if (*n == DT_SWEEP_MAX_ITEMS) return dt_sweep_err(p, k->line, "key 'seeds': more than %d seeds", DT_SWEEP_MAX_ITEMS);
            memcpy(out[(*n)++], num, sizeof num);
            in_part = 1;
            i = end;
        }
        if (!in_part) return dt_sweep_err(p, k->line, "key 'seeds': an empty value in '%s' (expected seeds separated by spaces or commas)", k->value);
        if (!at[part]) return 1;
        at += part + 1;
    }
}

static int finish(dt_sweep_parser *p, dt_sweep *s) {
    const dt_sweep_flag *k;
    if ((k = dt_sweep_get(p, "name"))) {
        if (!dt_sweep_name_ok(k->value)) return dt_sweep_err(p, k->line, "key 'name': expected letters, digits and ._+=- (at most 100), got '%s'", k->value);
        snprintf(s->name, sizeof s->name, "%s", k->value);
    } else { /* the file's name without folder and extension */
        const char *b = strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;
        snprintf(s->name, sizeof s->name, "%.*s", (int)(strrchr(b, '.') && strrchr(b, '.') != b ? strrchr(b, '.') - b : (long)strlen(b)), b);
        for (char *c = s->name; *c; c++) if (!dt_sweep_safe_char(*c)) *c = '_';
    }
    if ((k = dt_sweep_get(p, "out"))) snprintf(s->out, sizeof s->out, "%s", k->value);
    else snprintf(s->out, sizeof s->out, "runs/%s", s->name);
    if ((k = dt_sweep_get(p, "parallel")) && strcmp(k->value, "auto")) {
        char *end;
        errno = 0;
        long n = strtol(k->value, &end, 10);
        if (errno || end == k->value || *end || n < 1 || n > 100000)
            return dt_sweep_err(p, k->line, "key 'parallel': expected auto or a number of cores >= 1, got '%s'", k->value);
        s->parallel = (int)n;
    }
    if (dt_sweep_get(p, "hosts") && (k = dt_sweep_get(p, "hostfile"))) return dt_sweep_err(p, k->line, "key 'hostfile': give hosts or hostfile, not both");
    const dt_sweep_flag *sim = dt_sweep_get(p, "simulate");
    if (sim && strcmp(sim->value, "true") && strcmp(sim->value, "false"))
        return dt_sweep_err(p, sim->line, "key 'simulate': expected true or false, got '%s'", sim->value);
    if (!check_keys(p, sim && !strcmp(sim->value, "true"))) return 0;
    char seeds_buf[DT_SWEEP_MAX_ITEMS][24];
    const char *seeds[DT_SWEEP_MAX_ITEMS];
    int nseeds = 0, seeds_line = 0;
    if ((k = dt_sweep_get(p, "seeds")) && !read_seeds(p, k, seeds_buf, &nseeds)) return 0;
    for (int i = 0; i < nseeds; i++) seeds[i] = seeds_buf[i];
    if (k) seeds_line = k->line;
    dt_sweep_section implicit = {.line = 0};
    if (p->nvariants == 0 && !dt_sweep_expand_variant(p, s, &implicit, seeds, nseeds, seeds_line)) return 0;
    for (int i = 0; i < p->nvariants; i++)
        if (!dt_sweep_expand_variant(p, s, &p->variants[i], seeds, nseeds, seeds_line)) return 0;
    /* simulate = true: every run is dtrain sim -n N, all its ranks in one process (a core) */
    if ((k = sim)) {
        if (k->line && (dt_sweep_get(p, "hosts") || dt_sweep_get(p, "hostfile")) && !strcmp(k->value, "true"))
            return dt_sweep_err(p, k->line, "key 'simulate': the hosts are simulated: not with hosts or hostfile");
        for (int i = 0; i < s->nruns && !strcmp(k->value, "true"); i++)
            s->runs[i].sim = 1, s->runs[i].use_run = 0, s->runs[i].exclusive = 0;
    }
    return dt_sweep_distinct_names(p, s);
}

static void free_section(dt_sweep_section *s) {
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
    dt_sweep_parser *p = calloc(1, sizeof *p);
    if (!p) return dt_nomem("the parser of %s", path);
    p->path = path;
    dt_status st = DT_OK;
    if (dt_open_regular(path, &p->fp, NULL) != DT_OK) /* its error: "PATH: why" */
        st = dt_fail(DT_ERR_IO, "%s: cannot read the experiment file: %s", path,
                     dt_last_error() + strnlen(dt_last_error(), strlen(path) + 2));
    else {
        const int rc = ini_parse_stream(dt_sweep_ini_reader, p, dt_sweep_ini_handler, p);
        if (!p->bad && ferror(p->fp)) st = dt_fail(DT_ERR_IO, "%s: cannot read the experiment file: %s", path, strerror(errno));
        else if (!p->bad && rc > 0) dt_sweep_err(p, rc, "expected [section], KEY = VALUE, or a ; comment");
        if (!p->bad && !p->base.line && !p->axes.line && !p->nvariants) dt_sweep_err(p, 1, "no [base], [axes] or [variant NAME]: nothing to run");
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
