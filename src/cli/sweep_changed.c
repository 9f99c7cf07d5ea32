/* dtrain sweep: a run kept (done or failed) whose command.txt is not the command the file gives
 * it now: the file was edited since it ran. The sweep says which flags changed ("lr 0.05 →
 * 0.1"), so that the user sees whether the kept result still answers the file; with
 * --rerun-changed the run runs again. Its old folder is then moved aside whole, to
 * OUT/.old/NAME.K, never removed: what the old run wrote is the user's to keep or delete (a
 * hidden folder, so that scripts/report, plot and table, which read the log.jsonl of every
 * folder in OUT, do not take the old run for one of the sweep's). */
#include "cli/sweep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/paths.h"

/* ------------------------------------------------------------------ what changed */

/* The words of a line dt_sweep_quoted wrote: plain words and '...' parts ('\'' a quote in
 * one), NULL-terminated, every string its own; NULL when the line is not such a line. */
static char **words_of(const char *line) {
    const size_t len = strlen(line);
    char **w = calloc(len / 2 + 2, sizeof *w), *buf = malloc(len + 1);
    if (!w || !buf) dt_nomem_exit("the words of a command.txt of %zu bytes", len);
    int n = 0;
    const char *c = line;
    for (;;) {
        while (*c == ' ' || *c == '\n') c++;
        if (!*c) break;
        size_t o = 0;
        while (*c && *c != ' ' && *c != '\n') {
            if (*c != '\'') { buf[o++] = *c++; continue; }
            for (c++; *c && *c != '\''; c++) buf[o++] = *c;
            if (!*c) { buf[o] = 0; goto bad; } /* an unclosed quote */
            c++;
            if (!strncmp(c, "\\''", 3)) { buf[o++] = '\''; c += 2; } /* '\'' : the quote, and the next part opens */
        }
        buf[o] = 0;
        w[n] = strdup(buf);
        if (!w[n++]) dt_nomem_exit("a word of a command.txt");
    }
    free(buf);
    return w;
bad:
    free(buf);
    dt_sweep_free_command(w);
    return NULL;
}

typedef struct flag {
    const char *key, *value; /* value NULL: a switch */
} flag;

/* A command's flags: n from -n (1 for dtrain train), simulate for dtrain sim, then every --KEY
 * and its value (the next word unless that is a flag). The program (av[0]) is left out: a
 * build moved elsewhere runs the same runs. */
static int flags_of(char **av, flag *f) {
    int n = 0, i = 2;
    if (!av[0] || !av[1]) return 0;
    const int sub = strcmp(av[1], "train") != 0;
    if (!strcmp(av[1], "sim")) f[n++] = (flag){"simulate", NULL};
    if (sub && av[i] && !strcmp(av[i], "-n") && av[i + 1]) { f[n++] = (flag){"n", av[i + 1]}; i += 2; }
    else f[n++] = (flag){"n", "1"};
    for (; av[i]; i++) {
        const char *k = av[i] + (strncmp(av[i], "--", 2) ? 0 : 2);
        const char *v = av[i + 1] && strncmp(av[i + 1], "--", 2) ? av[++i] : NULL;
        f[n++] = (flag){k, v};
    }
    return n;
}

static const flag *find(const flag *f, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].key, key)) return &f[i];
    return NULL;
}

static const char *shown(const flag *f) { return !f ? "(not set)" : f->value ? f->value : "(on)"; }

/* "KEY OLD → NEW, ..." into out (cut short with "..."): the flags whose values differ, as the
 * new command orders them, then those only the old one had. 0 when none does: the same flags,
 * in whatever order. */
static int differences(const flag *was, int nwas, const flag *now, int nnow, char *out, size_t len) {
    size_t o = 0;
    int n = 0;
    out[0] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? nwas : nnow); i++) {
            const flag *a = pass ? &was[i] : find(was, nwas, now[i].key), *b = pass ? NULL : &now[i];
            if (pass && find(now, nnow, was[i].key)) continue;
            if (!pass && a && (a->value && b->value ? !strcmp(a->value, b->value) : a->value == b->value)) continue;
            const char *key = pass ? a->key : b->key;
            if (o < len) o += (size_t)snprintf(out + o, len - o, "%s%s %s → %s", n ? ", " : "", key, shown(a), shown(b));
            n++;
        }
    if (o >= len && len > 4) memcpy(out + len - 4, "...", 4);
    return n;
}

int dt_sweep_command_changed(const dt_sweep_run *r, const dt_sweep_slot *sl, char *diff, size_t len) {
    char path[1400], *old = NULL;
    size_t cap = 0;
    FILE *f = NULL;
    struct stat sb;
    snprintf(path, sizeof path, "%s/command.txt", sl->dir);
    /* none (an older sweep's folder, a write that failed): nothing to compare, nothing said */
    if (lstat(path, &sb) != 0 || dt_open_regular(path, &f, NULL) != DT_OK) return 0;
    const ssize_t got = getline(&old, &cap, f);
    fclose(f);
    char **was = got > 0 ? words_of(old) : NULL, **now = dt_sweep_command(r, sl->dir, 0);
    free(old);
    int n = 0;
    if (!was) snprintf(diff, len, "its command.txt is not a command");
    else {
        int nw = 0, nn = 0;
        while (was[nw]) nw++;
        while (now[nn]) nn++;
        flag *fw = calloc((size_t)nw + 2, sizeof *fw), *fn = calloc((size_t)nn + 2, sizeof *fn);
        if (!fw || !fn) dt_nomem_exit("the flags of two commands");
        n = differences(fw, flags_of(was, fw), fn, flags_of(now, fn), diff, len);
        free(fw);
        free(fn);
        dt_sweep_free_command(was);
    }
    dt_sweep_free_command(now);
    return !was || n > 0;
}

/* ------------------------------------------------------------------ running it again */

/* A file the run names by a path of the file's (not its folder's: KEY = true), that exists:
 * the run would append to the old run's log, replace its weights or resume its checkpoint.
 * Its key, or NULL. */
static const char *outside_output(const dt_sweep_run *r, char *path, size_t len) {
    static const char *const keys[] = {"checkpoint", "log", "out", "trace", "run-dir"};
    struct stat sb;
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        for (int i = 0; i < r->nflags; i++)
            if (!strcmp(r->flags[i].key, keys[k]) && r->flags[i].value && lstat(r->flags[i].value, &sb) == 0) {
                snprintf(path, len, "%s", r->flags[i].value);
                return keys[k];
            }
    return NULL;
}

int dt_sweep_can_rerun(const dt_sweep *s, const dt_sweep_run *r, const dt_sweep_slot *sl) {
    struct stat sb;
    char path[1100];
    const char *key;
    if (lstat(sl->dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "dtrain: error: %s:%d: run '%s': --rerun-changed: %s is not a folder (a symlink or a file): it is "
                "not moved; move it away yourself to run the run again\n", s->path, r->line, r->name, sl->dir);
        return 0;
    }
    if ((key = outside_output(r, path, sizeof path))) {
        int line = r->line;
        for (int i = 0; i < r->nflags; i++)
            if (!strcmp(r->flags[i].key, key) && r->flags[i].line) line = r->flags[i].line;
        fprintf(stderr, "dtrain: error: %s:%d: run '%s': --rerun-changed: its %s %s, outside its folder, is the old run's: "
                "run again, it would %s it; move it away (or write %s = true: the run's own, in its folder)\n", s->path,
                line, r->name, key, path,
                !strcmp(key, "checkpoint") ? "resume" : !strcmp(key, "log") ? "append to" : "replace", key);
        return 0;
    }
    return 1;
}

int dt_sweep_move_aside(const char *out, const char *dir, const char *name, char *moved, size_t len) {
    char old[1100];
    struct stat sb;
    snprintf(old, sizeof old, "%s/.old", out);
    if (mkdir(old, 0755) != 0 && errno != EEXIST) return dt_fail(DT_ERR_IO, "cannot make %s: %s", old, strerror(errno)), -1;
    /* never through a symlink: the old runs would go wherever it points */
    if (lstat(old, &sb) != 0 || !S_ISDIR(sb.st_mode)) return dt_fail(DT_ERR_IO, "%s is not a folder", old), -1;
    /* the first free NAME.K, claimed by making it: rename(2) then puts the folder in its place
     * (it replaces an empty folder), and two sweeps never take the same one */
    for (int k = 1; k <= 100000; k++) {
        snprintf(moved, len, "%s/%s.%d", old, name, k);
        if (mkdir(moved, 0755) == 0) {
            if (rename(dir, moved) == 0) return 0;
            const int why = errno;
            rmdir(moved);
            return dt_fail(DT_ERR_IO, "cannot move %s to %s: %s", dir, moved, strerror(why)), -1;
        }
        if (errno != EEXIST) return dt_fail(DT_ERR_IO, "cannot make %s: %s", moved, strerror(errno)), -1;
    }
    return dt_fail(DT_ERR_IO, "%s: no free name %s.K", old, name), -1;
}
