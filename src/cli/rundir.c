/* Run folders and recorded command lines (rundir.h). */
#include "cli/rundir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/paths.h"

static int plain(const char *a) {
    if (!*a) return 0;
    for (const char *p = a; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *p)) return 0;
    return 1;
}

char *dt_shell_quote(char *const *argv, int n) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += 4 * strlen(argv[i]) + 3;
    char *out = malloc(len), *o = out;
    if (!out) return NULL;
    for (int i = 0; i < n; i++) {
        if (i) *o++ = ' ';
        if (plain(argv[i])) { o += sprintf(o, "%s", argv[i]); continue; }
        *o++ = '\'';
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'') { memcpy(o, "'\\''", 4); o += 4; }
            else *o++ = *p;
        }
        *o++ = '\'';
    }
    *o = 0;
    return out;
}

char **dt_shell_split(const char *line, int *n) {
    const size_t len = strlen(line);
    /* at most len/2+1 words; the words' text takes at most len+1 bytes each word ended */
    const size_t words = len / 2 + 2;
    char **argv = malloc(words * sizeof *argv + 2 * len + 2);
    if (!argv) return NULL;
    char *text = (char *)(argv + words);
    int k = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ') p++;
        if (!*p) break;
        argv[k++] = text;
        while (*p && *p != ' ') {
            if (*p == '\'') {
                const char *end = strchr(p + 1, '\'');
                if (!end) { free(argv); return NULL; }
                memcpy(text, p + 1, (size_t)(end - p - 1));
                text += end - p - 1;
                p = end + 1;
            } else if (*p == '\\' && p[1]) {
                *text++ = p[1];
                p += 2;
            } else {
                *text++ = *p++;
            }
        }
        *text++ = 0;
    }
    argv[k] = NULL;
    *n = k;
    return argv;
}

dt_status dt_run_dir_path(const char *dir, const char *name, char *out, size_t len) {
    if ((size_t)snprintf(out, len, "%s/%s", dir, name) >= len)
        return dt_fail(DT_ERR_ARG, "--run-dir %s: path too long", dir);
    return DT_OK;
}

/* Whether the log holds a summary line: the run that wrote it finished. Not a regular file
 * (a FIFO there): no finished run, and never waited on; opening the log will say. */
static int finished(const char *log) {
    FILE *f;
    if (dt_open_regular(log, &f, NULL) != DT_OK) return 0;
    char line[4096];
    int done = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "{\"type\":\"summary\"", 17)) done = 1;
        if (!strncmp(line, "{\"type\":\"config\"", 16)) done = 0; /* a later attempt started */
    }
    fclose(f);
    return done;
}

dt_status dt_run_dir_make(const char *dir, int resuming) {
    char path[4096];
    if (!*dir) return dt_fail(DT_ERR_ARG, "--run-dir: empty folder name");
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return dt_fail(DT_ERR_ARG, "--run-dir %s: path too long", dir);
    for (char *p = path + 1;; p++) {
        const int end = *p == 0;
        if (*p == '/' || end) {
            *p = 0;
            struct stat sb;
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return dt_fail(DT_ERR_IO, "--run-dir %s: cannot create %s: %s", dir, path, strerror(errno));
            if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
                return dt_fail(DT_ERR_ARG, "--run-dir %s: %s exists and is not a folder", dir, path);
            if (end) break;
            *p = '/';
        }
    }
    char log[4200];
    dt_status st = dt_run_dir_path(dir, "log.jsonl", log, sizeof log);
    if (st == DT_OK && !resuming && finished(log))
        st = dt_fail(DT_ERR_ARG, "--run-dir %s: holds a finished run (its log.jsonl ends with a summary); choose another "
                     "folder, or continue it with --resume", dir);
    return st;
}

static dt_status fill_line(void *ctx, void *file) {
    return fprintf(file, "%s\n", (const char *)ctx) > 0 ? DT_OK : dt_fail(DT_ERR_IO, "command.txt: write failed");
}

dt_status dt_run_dir_command(const char *dir, char *const *argv, int n) {
    char path[4200];
    dt_status st = dt_run_dir_path(dir, "command.txt", path, sizeof path);
    char *line = st == DT_OK ? dt_shell_quote(argv, n) : NULL;
    if (st == DT_OK && !line) st = dt_nomem("the run's command line");
    if (st == DT_OK) st = dt_write_atomic(path, fill_line, line);
    free(line);
    return st;
}
