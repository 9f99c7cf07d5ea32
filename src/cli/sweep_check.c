/* dtrain sweep: every run's flags checked before any run starts, by `dtrain run` itself
 * (DTRAIN_CHECK_ONLY: every flag, value, scheme flag and output path as a real start would),
 * each distinct set of flags once; its error line becomes the experiment file's line of the
 * flag it names. */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"

/* "dtrain run: --lr abc: expected a number > 0" -> "FILE:LINE: key 'lr': expected ..., got 'abc'" */
static void report_check(const dt_sweep *s, const dt_sweep_run *r, const char *msg) {
    if (!strncmp(msg, "dtrain run: ", 12)) msg += 12;
    const dt_sweep_flag *best = NULL;
    const char *best_at = NULL;
    for (int i = 0; i < r->nflags; i++) {
        const size_t n = strlen(r->flags[i].key);
        for (const char *at = strstr(msg, "--"); at; at = strstr(at + 2, "--"))
            if (!strncmp(at + 2, r->flags[i].key, n) && !(at[2 + n] == '-' || (at[2 + n] >= 'a' && at[2 + n] <= 'z'))) {
                if (!best_at || at < best_at) { best = &r->flags[i]; best_at = at; }
                break;
            }
    }
    if (!best && !strncmp(msg, "-n ", 3)) {
        fprintf(stderr, "dtrain: error: %s:%d: key 'n': %s\n", s->path, r->ranks_line ? r->ranks_line : r->line, msg);
        return;
    }
    if (!best) { fprintf(stderr, "dtrain: error: %s:%d: run '%s': %s\n", s->path, r->line, r->name, msg); return; }
    const int line = best->line ? best->line : r->line;
    const size_t n = strlen(best->key);
    if (best_at == msg && best->value && msg[2 + n] == ' ' && !strncmp(msg + 3 + n, best->value, strlen(best->value)) &&
        !strncmp(msg + 3 + n + strlen(best->value), ": ", 2)) {
        fprintf(stderr, "dtrain: error: %s:%d: key '%s': %s, got '%s'\n", s->path, line, best->key,
                msg + 5 + n + strlen(best->value), best->value);
        return;
    }
    if (strstr(msg, "unknown flag"))
        fprintf(stderr, "dtrain: error: %s:%d: key '%s': not a flag of dtrain train or run (see dtrain run --help)\n", s->path, line, best->key);
    else fprintf(stderr, "dtrain: error: %s:%d: key '%s': %s\n", s->path, line, best->key, msg);
}

/* 0: the flags pass; else the error is printed. */
static int check_run(const dt_sweep *s, const dt_sweep_run *r, const char *folder) {
    char **av = dt_sweep_command(r, folder, 1);
    int fd[2];
    if (pipe(fd) != 0) { perror("dtrain: error: sweep: pipe"); dt_sweep_free_command(av); return 1; }
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) { dup2(nul, 0); dup2(nul, 1); }
        setenv("DTRAIN_CHECK_ONLY", "1", 1);
        execv(dt_sweep_self, av);
        _exit(127);
    }
    close(fd[1]);
    char out[4096];
    size_t len = 0;
    ssize_t got;
    char rest[512]; /* past 4 kB (it is one line) read on and dropped, so that the child never blocks */
    while ((got = len + 1 < sizeof out ? read(fd[0], out + len, sizeof out - 1 - len) : read(fd[0], rest, sizeof rest)) > 0 ||
           (got < 0 && errno == EINTR))
        if (got > 0 && len + 1 < sizeof out) len += (size_t)got;
    close(fd[0]);
    out[len] = 0;
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    dt_sweep_free_command(av);
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    /* the last "dtrain: error:" line */
    char *msg = NULL;
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n"))
        if (!strncmp(l, "dtrain: error: ", 15)) msg = l + 15;
    if (!msg) fprintf(stderr, "dtrain: error: %s:%d: run '%s': checking its flags failed (%s)\n", s->path, r->line, r->name,
                      pid < 0 ? strerror(errno) : "no message");
    else report_check(s, r, msg);
    return 1;
}

int dt_sweep_check_all(const dt_sweep *s) {
    char **seen = calloc((size_t)s->nruns, sizeof *seen);
    int nseen = 0, bad = 0;
    char folder[1100];
    dt_sweep_check_folder(s->out, folder, sizeof folder);
    for (int i = 0; i < s->nruns && !bad; i++) {
        size_t len = 16;
        const dt_sweep_run *r = &s->runs[i];
        for (int j = 0; j < r->nflags; j++) len += strlen(r->flags[j].key) + (r->flags[j].value ? strlen(r->flags[j].value) : 0) + 4;
        char *key = malloc(len);
        if (!seen || !key) dt_nomem_exit("the check of %d runs", s->nruns);
        size_t o = (size_t)sprintf(key, "%d", r->ranks);
        for (int j = 0; j < r->nflags; j++)
            if (strcmp(r->flags[j].key, "seed"))
                o += (size_t)sprintf(key + o, "\n%s\t%s", r->flags[j].key, r->flags[j].value ? r->flags[j].value : "");
        int dup = 0;
        for (int j = 0; j < nseen && !dup; j++) dup = !strcmp(seen[j], key);
        if (dup) { free(key); continue; }
        seen[nseen++] = key;
        bad = check_run(s, r, folder);
    }
    for (int j = 0; j < nseen; j++) free(seen[j]);
    free(seen);
    return bad;
}
