/* dtrain sweep --slurm: each run one Slurm job. The sweep submits it with `sbatch --wait`,
 * which returns when the job ends with the job's exit status, so the sweep watches its jobs as
 * it watches its own runs (sweep.c: as many at once as --parallel, status.json when a run
 * ends, resumable as before) while Slurm places them. The job runs the run's own command (a
 * run of several ranks: `dtrain run -n N`, whose mpiexec takes the job's nodes from Slurm),
 * its output is the run's console.txt, and sbatch's own line (the job id) is slurm.txt. A job
 * cancelled (scancel, or a node lost) leaves no status.json: the next start runs it again,
 * alone. */
#include "cli/sweep.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* a formatted string the caller frees (NULL: no memory) */
static char *text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *text(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!out) return NULL;
    va_start(ap, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return out;
}

char **dt_sweep_slurm_command(const dt_sweep *s, const dt_sweep_run *r, const char *dir, char **run, const char *extra,
                              int append) {
    char *wrap = NULL;
    size_t wlen = 0;
    FILE *m = open_memstream(&wrap, &wlen);
    if (!m) return NULL;
    fputs("exec ", m);
    dt_sweep_quoted(m, run); /* the words, shell-quoted for `sbatch --wrap` (sh -c) */
    fclose(m);
    /* sbatch --wait --parsable -J SWEEP/RUN -o DIR/console.txt [--open-mode=append] -n N [extra...]
     * --wrap CMD (extra's words, split at spaces, are at most half its length plus one) */
    char **av = calloc((extra ? strlen(extra) / 2 + 1 : 0) + 16, sizeof *av);
    if (!av) { free(wrap); return NULL; }
    int k = 0;
    av[k++] = strdup("sbatch");
    av[k++] = strdup("--wait");
    av[k++] = strdup("--parsable");
    av[k++] = strdup("--job-name");
    av[k++] = text("%s/%s", s->name, r->name);
    av[k++] = text("--output=%s/console.txt", dir);
    if (append) av[k++] = strdup("--open-mode=append"); /* resumed in its folder: Slurm would truncate it */
    av[k++] = text("--ntasks=%d", r->sim ? 1 : r->ranks);
    char *words = extra ? strdup(extra) : NULL, *save = NULL;
    for (char *p = words ? strtok_r(words, " ", &save) : NULL; p; p = strtok_r(NULL, " ", &save)) av[k++] = strdup(p);
    free(words);
    av[k++] = strdup("--wrap");
    av[k++] = wrap;
    av[k] = NULL;
    for (int i = 0; i < k; i++)
        if (!av[i]) { dt_sweep_free_command(av); return NULL; }
    return av;
}

int dt_sweep_slurm_cancelled(const char *dir, long long from, char *job, size_t len) {
    char path[1400], line[128], id[32] = "";
    snprintf(path, sizeof path, "%s/slurm.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    /* this start's job: a run resumed in its folder adds to slurm.txt, and an earlier job of
     * its was maybe cancelled when this one's submission failed */
    if (from > 0 && fseeko(f, (off_t)from, SEEK_SET) != 0) rewind(f); /* then the whole file */
    while (fgets(line, sizeof line, f)) {
        const size_t n = strspn(line, "0123456789"); /* --parsable: "ID" or "ID;cluster" */
        if (n && n < sizeof id && (line[n] == '\n' || line[n] == ';' || !line[n])) snprintf(id, sizeof id, "%.*s", (int)n, line);
    }
    fclose(f);
    snprintf(job, len, "%s", id);
    if (!id[0]) return 0;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "scontrol show job %s 2>/dev/null", id);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int cancelled = 0;
    char buf[512];
    while (fgets(buf, sizeof buf, p))
        if (strstr(buf, "JobState=CANCELLED") || strstr(buf, "JobState=NODE_FAIL") || strstr(buf, "JobState=PREEMPTED"))
            cancelled = 1;
    pclose(p);
    return cancelled;
}

