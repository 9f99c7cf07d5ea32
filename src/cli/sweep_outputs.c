/* dtrain sweep: the files a run writes for itself. Each must be the run's own: a path that
 * several runs share would have each replace another's weights, log or trace, and a shared
 * checkpoint is worse, as a run given --resume resumes another run's set and its results are
 * that run's (issue 44). So a shared path is refused before anything starts, in one line naming
 * the key, and KEY = true gives every run its own file in its own folder, where it goes with the
 * folder: checkpoint = true is OUT/NAME/checkpoint. */
#include "cli/sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"

/* the keys of a run's own files; file: its name in the run's folder for KEY = true (run-dir
 * has none: the run's folder is the sweep's) */
static const struct {
    const char *key, *file, *own; /* own: how to give every run its own */
} outputs[] = {
    {"checkpoint", "checkpoint", "write checkpoint = true: each run its own, in its folder"},
    {"trace", "trace.json", "write trace = true: each run its own, in its folder"},
    {"log", "log.jsonl", "leave the key out: each run logs to its folder's log.jsonl"},
    {"out", "model.weights", "leave the key out: each run's weights go to its folder's model.weights"},
    {"run-dir", NULL, "leave the key out: the sweep gives each run its folder"},
};
#define NOUTPUTS (int)(sizeof outputs / sizeof *outputs)

static const dt_sweep_flag *flag_of(const dt_sweep_run *r, const char *key) {
    for (int i = 0; i < r->nflags; i++)
        if (!strcmp(r->flags[i].key, key)) return &r->flags[i];
    return NULL;
}

int dt_sweep_own_file(const dt_sweep_run *r, const char *key, const char *dir, int check, char *buf, size_t len) {
    const dt_sweep_flag *f = flag_of(r, key);
    if (!f) return 0;
    if (f->value) { snprintf(buf, len, "%s", f->value); return 1; }
    for (int k = 0; k < NOUTPUTS; k++)
        if (!strcmp(outputs[k].key, key) && outputs[k].file && dir) {
            /* the check's name is no run's (a folder of the user's named checkpoint there would
             * be refused as a directory) and is never written: the check only checks */
            snprintf(buf, len, check ? "%s/.dtrain-sweep-check.%s" : "%s/%s", dir, outputs[k].file);
            return 1;
        }
    return 0;
}

void dt_sweep_check_folder(const char *out, char *buf, size_t len) {
    snprintf(buf, len, "%s", out);
    struct stat sb;
    for (;;) {
        if (stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode)) return;
        char *slash = strrchr(buf, '/');
        while (slash && slash > buf && slash[1] == 0) { *slash = 0; slash = strrchr(buf, '/'); } /* "a/b/" */
        if (!slash) { snprintf(buf, len, "."); return; }
        if (slash == buf) { snprintf(buf, len, "/"); return; }
        *slash = 0;
    }
}

typedef struct use {
    const char *value;
    const dt_sweep_run *run;
    int line;
} use;

static int by_value(const void *a, const void *b) {
    const use *x = a, *y = b;
    const int c = strcmp(x->value, y->value);
    return c ? c : (x->run > y->run) - (x->run < y->run);
}

/* Sorted by value, so that 20,000 runs cost no 2 * 10^8 compares. */
dt_status dt_sweep_check_outputs(const dt_sweep *s) {
    use *u = malloc((size_t)(s->nruns ? s->nruns : 1) * sizeof *u);
    if (!u) dt_nomem_exit("the outputs of %d runs", s->nruns);
    dt_status st = DT_OK;
    for (int k = 0; k < NOUTPUTS && st == DT_OK; k++) {
        int n = 0;
        for (int i = 0; i < s->nruns && st == DT_OK; i++) {
            const dt_sweep_flag *f = flag_of(&s->runs[i], outputs[k].key);
            if (f && f->value) u[n++] = (use){f->value, &s->runs[i], f->line ? f->line : s->runs[i].line};
            else if (f && !outputs[k].file)
                st = dt_fail(DT_ERR_ARG, "%s:%d: key '%s': expected a folder, got true; %s", s->path,
                             f->line ? f->line : s->runs[i].line, outputs[k].key, outputs[k].own);
        }
        qsort(u, (size_t)n, sizeof *u, by_value);
        for (int i = 1; i < n && st == DT_OK; i++)
            if (!strcmp(u[i - 1].value, u[i].value))
                st = dt_fail(DT_ERR_ARG, "%s:%d: key '%s': '%s' is one path for several runs ('%s' and '%s'): each would "
                             "replace%s another's; %s", s->path, u[i].line, outputs[k].key, u[i].value, u[i - 1].run->name,
                             u[i].run->name, strcmp(outputs[k].key, "checkpoint") ? "" : " or resume", outputs[k].own);
    }
    free(u);
    return st;
}
