/* `dtrain sweep FILE`: the runs of an experiment file (sweep_file.c), each in its own folder
 * OUT/NAME (command.txt, console.txt, log.jsonl, model.weights, status.json when it ends),
 * as many at once as the cores hold. Every run's flags are checked by `dtrain run` itself
 * (DTRAIN_CHECK_ONLY) before any starts, so a typo in the 20th run stops the sweep before the
 * first. A restart skips what is done (and what failed, unless --retry-failed) and redoes
 * what has no status.json (a run killed with the sweep). */
#include "cli/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "core/json.h"

#define STOP_GRACE_S 20 /* after SIGTERM, what has not ended is killed */

enum { PENDING, RUNNING, DONE, FAILED };

typedef struct slot {
    int state;
    pid_t pid;
    int killed;             /* stopped by the sweep's interruption: no status */
    double t0, seconds;
    int exit;
    char error[400];
    char dir[1300];
} slot;

static volatile sig_atomic_t stop_signal = 0;
static void on_stop(int sig) { stop_signal = sig; }

static char self_path[4096];

/* ------------------------------------------------------------------ commands */

static int has_flag(const dt_sweep_run *r, const char *key) {
    for (int i = 0; i < r->nflags; i++)
        if (!strcmp(r->flags[i].key, key)) return 1;
    return 0;
}

static char *xdup(const char *a, const char *b) {
    char *d = malloc(strlen(a) + strlen(b) + 1);
    if (!d) { fputs("dtrain: error: out of memory\n", stderr); exit(2); }
    return strcat(strcpy(d, a), b);
}

/* The run's command: dtrain train (n = 1) or dtrain run -n N, its flags, and (outputs set)
 * --log and --out into its folder unless the file sets them. check: as `dtrain run` always
 * (its flags include train's), without the outputs and the seed. Every string its own. */
static char **command(const dt_sweep_run *r, const char *dir, int check) {
    char **av = calloc((size_t)(2 * r->nflags + 12), sizeof *av);
    if (!av) { fputs("dtrain: error: out of memory\n", stderr); exit(2); }
    int k = 0;
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", r->ranks);
    av[k++] = xdup(self_path, "");
    if (check || r->use_run) { av[k++] = xdup("run", ""); av[k++] = xdup("-n", ""); av[k++] = xdup(nbuf, ""); }
    else av[k++] = xdup("train", "");
    for (int i = 0; i < r->nflags; i++) {
        if (check && !strcmp(r->flags[i].key, "seed")) continue;
        av[k++] = xdup("--", r->flags[i].key);
        if (r->flags[i].value) av[k++] = xdup(r->flags[i].value, "");
    }
    if (!check && !has_flag(r, "log")) { av[k++] = xdup("--log", ""); av[k++] = xdup(dir, "/log.jsonl"); }
    if (!check && !has_flag(r, "out") && !has_flag(r, "no-save")) { av[k++] = xdup("--out", ""); av[k++] = xdup(dir, "/model.weights"); }
    av[k] = NULL;
    return av;
}

static void free_command(char **av) {
    for (int i = 0; av[i]; i++) free(av[i]);
    free(av);
}

/* shell-quoted, one line (command.txt, --dry-run) */
static void quoted(FILE *f, char **av) {
    for (int i = 0; av[i]; i++) {
        const char *a = av[i];
        int plain = *a != 0;
        for (const char *c = a; *c; c++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%", *c)) plain = 0;
        if (i) fputc(' ', f);
        if (plain) { fputs(a, f); continue; }
        fputc('\'', f);
        for (const char *c = a; *c; c++) *c == '\'' ? fputs("'\\''", f) : fputc(*c, f);
        fputc('\'', f);
    }
    fputc('\n', f);
}

/* ------------------------------------------------------------------ checking the flags */

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
static int check_run(const dt_sweep *s, const dt_sweep_run *r) {
    char **av = command(r, NULL, 1);
    int fd[2];
    if (pipe(fd) != 0) { perror("dtrain: error: sweep: pipe"); free_command(av); return 1; }
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) { dup2(nul, 0); dup2(nul, 1); }
        setenv("DTRAIN_CHECK_ONLY", "1", 1);
        execv(self_path, av);
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
    free_command(av);
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

/* every run's flags, each distinct set once (the seed aside) */
static int check_all(const dt_sweep *s) {
    char **seen = calloc((size_t)s->nruns, sizeof *seen);
    int nseen = 0, bad = 0;
    for (int i = 0; i < s->nruns && !bad; i++) {
        size_t len = 16;
        const dt_sweep_run *r = &s->runs[i];
        for (int j = 0; j < r->nflags; j++) len += strlen(r->flags[j].key) + (r->flags[j].value ? strlen(r->flags[j].value) : 0) + 4;
        char *key = malloc(len);
        if (!seen || !key) { fputs("dtrain: error: out of memory\n", stderr); exit(2); }
        size_t o = (size_t)sprintf(key, "%d", r->ranks);
        for (int j = 0; j < r->nflags; j++)
            if (strcmp(r->flags[j].key, "seed"))
                o += (size_t)sprintf(key + o, "\n%s\t%s", r->flags[j].key, r->flags[j].value ? r->flags[j].value : "");
        int dup = 0;
        for (int j = 0; j < nseen && !dup; j++) dup = !strcmp(seen[j], key);
        if (dup) { free(key); continue; }
        seen[nseen++] = key;
        bad = check_run(s, r);
    }
    for (int j = 0; j < nseen; j++) free(seen[j]);
    free(seen);
    return bad;
}

/* ------------------------------------------------------------------ folders and files */

static int mkdir_p(const char *path) {
    char buf[1100];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') { *p = 0; if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1; *p = '/'; }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(buf, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    return 0;
}

static int rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return -1;
        struct dirent *e;
        char sub[1600];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_rf(sub);
            }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

/* TEXT into PATH whole or not at all */
static int write_atomic(const char *path, const char *text) {
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    const int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) { unlink(tmp); return -1; }
    return 0;
}

static int write_sweep_json(const dt_sweep *s) {
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "name", s->name);
    dt_json_str(&j, "file", s->path);
    dt_json_str(&j, "out", s->out);
    dt_json_begin_array(&j, "runs");
    for (int i = 0; i < s->nruns; i++) {
        const dt_sweep_run *r = &s->runs[i];
        char dir[1300];
        snprintf(dir, sizeof dir, "%s/%s", s->out, r->name);
        dt_json_begin(&j, NULL);
        dt_json_str(&j, "name", r->name);
        dt_json_str(&j, "folder", dir);
        dt_json_int(&j, "ranks", r->ranks);
        dt_json_begin(&j, "flags");
        for (int k = 0; k < r->nflags; k++)
            if (r->flags[k].value) dt_json_str(&j, r->flags[k].key, r->flags[k].value);
            else dt_json_bool(&j, r->flags[k].key, 1);
        dt_json_end(&j);
        char **av = command(r, dir, 0);
        dt_json_begin_array(&j, "command");
        for (int k = 0; av[k]; k++) dt_json_str(&j, NULL, av[k]);
        dt_json_end_array(&j);
        free_command(av);
        dt_json_end(&j);
    }
    dt_json_end_array(&j);
    dt_json_end(&j);
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.json", s->out);
    const char *text = dt_json_text(&j);
    const int rc = text ? write_atomic(path, text) : -1;
    dt_json_free(&j);
    return rc;
}

/* status.json of a finished run: state DONE / FAILED (with exit and error), else PENDING */
static void read_status(slot *sl) {
    char path[1400], buf[2048];
    snprintf(path, sizeof path, "%s/status.json", sl->dir);
    FILE *f = fopen(path, "r");
    sl->state = PENDING;
    if (!f) return;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strstr(buf, "\"status\":\"done\"")) sl->state = DONE;
    else if (strstr(buf, "\"status\":\"failed\"")) sl->state = FAILED;
    const char *e = strstr(buf, "\"exit\":");
    sl->exit = e ? atoi(e + 7) : 0;
    sl->error[0] = 0;
    if ((e = strstr(buf, "\"error\":\""))) {
        size_t o = 0;
        for (e += 9; *e && *e != '"' && o + 1 < sizeof sl->error; e++) {
            if (*e == '\\' && e[1]) e++;
            sl->error[o++] = *e;
        }
        sl->error[o] = 0;
    }
}

static void write_status(slot *sl) {
    char path[1400];
    snprintf(path, sizeof path, "%s/status.json", sl->dir);
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "status", sl->state == DONE ? "done" : "failed");
    dt_json_int(&j, "exit", sl->exit);
    dt_json_str(&j, "error", sl->error[0] ? sl->error : NULL);
    dt_json_fixed(&j, "seconds", sl->seconds, 1);
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    if (!text || write_atomic(path, text) != 0) fprintf(stderr, "sweep: warning: cannot write %s: %s\n", path, strerror(errno));
    dt_json_free(&j);
}

/* the last "dtrain: error:" line of the run's console.txt */
static void last_error(slot *sl) {
    char path[1400];
    snprintf(path, sizeof path, "%s/console.txt", sl->dir);
    sl->error[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0)
        if (!strncmp(line, "dtrain: error:", 14)) {
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
            snprintf(sl->error, sizeof sl->error, "%s", line);
        }
    free(line);
    fclose(f);
}

/* A run kept (done or failed) whose command.txt is not what the file says now (edited since):
 * kept all the same, never deleted, but said. The program's path aside (a moved build). */
static void same_command(const dt_sweep_run *r, const slot *sl) {
    char path[1400], *old = NULL, *now = NULL;
    size_t olen = 0, nlen = 0;
    snprintf(path, sizeof path, "%s/command.txt", sl->dir);
    FILE *f = fopen(path, "r"), *m = open_memstream(&now, &nlen);
    if (!f || !m) { if (f) fclose(f); if (m) fclose(m); free(now); return; }
    char **av = command(r, sl->dir, 0);
    quoted(m, av);
    fclose(m);
    free_command(av);
    if (getline(&old, &olen, f) < 0) { free(old); old = NULL; }
    fclose(f);
    const char *a = old ? strchr(old, ' ') : NULL, *b = strchr(now, ' ');
    if (!a || !b || strcmp(a, b))
        fprintf(stderr, "sweep: warning: %s: kept as %s, but its command.txt differs from the file's command now; "
                "remove the folder to run it again\n", r->name, sl->state == DONE ? "done" : "failed");
    free(old);
    free(now);
}

/* ------------------------------------------------------------------ running */

static pid_t start(const dt_sweep_run *r, slot *sl) {
    if (rm_rf(sl->dir) != 0 || mkdir_p(sl->dir) != 0) {
        fprintf(stderr, "sweep: %s: cannot make the folder %s: %s\n", r->name, sl->dir, strerror(errno));
        return -1;
    }
    char path[1400];
    char **av = command(r, sl->dir, 0);
    snprintf(path, sizeof path, "%s/command.txt", sl->dir);
    FILE *f = fopen(path, "w");
    if (f) { quoted(f, av); fclose(f); }
    snprintf(path, sizeof path, "%s/console.txt", sl->dir);
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* its own group: stopped as one, and not by the terminal's Ctrl-C */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        unsetenv("DTRAIN_CHECK_ONLY"); /* from the user's environment: the run would only check */
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), nul = open("/dev/null", O_RDONLY);
        if (fd < 0) { fprintf(stderr, "sweep: %s: %s\n", path, strerror(errno)); _exit(127); }
        if (nul >= 0) dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(self_path, av);
        fprintf(stderr, "dtrain: error: sweep: cannot start %s: %s\n", self_path, strerror(errno));
        _exit(127);
    }
    if (pid > 0) setpgid(pid, pid);
    free_command(av);
    return pid;
}

static void fmt_secs(double s, char *out, size_t len) {
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, len, "%lds", t);
}

typedef struct tally {
    int done, failed, running, pending, finished_here;
    double secs_here;
} tally;

static void progress(const dt_sweep *s, const tally *t) {
    char eta[32] = "?";
    if (t->finished_here > 0) {
        const double mean = t->secs_here / t->finished_here;
        fmt_secs(mean * (t->pending + t->running) / (t->running > 0 ? t->running : 1), eta, sizeof eta);
    }
    fprintf(stderr, "sweep: %d/%d done, %d running, %d failed, ETA %s\n", t->done, s->nruns, t->running, t->failed, eta);
}

static void ended(const dt_sweep *s, slot *sl, const dt_sweep_run *r, int status, tally *t) {
    sl->seconds = dt_now() - sl->t0;
    sl->exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    t->running--;
    if (sl->killed) { sl->state = PENDING; return; } /* no status: the next start redoes it */
    sl->state = sl->exit == 0 ? DONE : FAILED;
    last_error(sl);
    write_status(sl);
    t->finished_here++;
    t->secs_here += sl->seconds;
    char secs[32];
    fmt_secs(sl->seconds, secs, sizeof secs);
    if (sl->state == DONE) { t->done++; fprintf(stderr, "sweep: done %s (%s)\n", r->name, secs); }
    else {
        t->failed++;
        fprintf(stderr, "sweep: FAILED %s (exit %d, %s): %s\n", r->name, sl->exit, secs, sl->error[0] ? sl->error : "no error line; see its console.txt");
    }
    progress(s, t);
}

static int run_all(const dt_sweep *s, slot *sl, tally *t) {
    long cores = s->parallel ? s->parallel : sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: the sleep below ends at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    double stop_at = 0;
    long used = 0;
    while (t->running > 0 || (t->pending > 0 && !stop_signal)) {
        /* start what fits: first fit in file order; a run bigger than the machine runs alone */
        for (int i = 0; i < s->nruns && !stop_signal; i++) {
            if (sl[i].state != PENDING) continue;
            const dt_sweep_run *r = &s->runs[i];
            const long cost = r->exclusive || r->ranks > cores ? cores : r->ranks;
            if (t->running > 0 && used + cost > cores) continue;
            sl[i].t0 = dt_now();
            sl[i].pid = start(r, &sl[i]);
            t->pending--;
            if (sl[i].pid < 0) { sl[i].state = FAILED; sl[i].exit = 127; t->failed++; continue; }
            sl[i].state = RUNNING;
            t->running++;
            used += cost;
            fprintf(stderr, "sweep: start %s\n", r->name);
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (int i = 0; i < s->nruns; i++)
                if (sl[i].state == RUNNING && sl[i].pid == pid) {
                    const dt_sweep_run *r = &s->runs[i];
                    used -= r->exclusive || r->ranks > cores ? cores : r->ranks;
                    ended(s, &sl[i], r, status, t);
                }
        if (stop_signal && !stop_at) {
            stop_at = dt_now();
            for (int i = 0; i < s->nruns; i++)
                if (sl[i].state == RUNNING) { sl[i].killed = 1; kill(-sl[i].pid, SIGTERM); }
        }
        if (stop_at && dt_now() - stop_at > STOP_GRACE_S)
            for (int i = 0; i < s->nruns; i++)
                if (sl[i].state == RUNNING) kill(-sl[i].pid, SIGKILL);
        if (t->running > 0 || t->pending > 0) nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    return (int)stop_signal;
}

int dt_cmd_sweep(int argc, char **argv) {
    int dry = 0, retry = 0, help = 0;
    dt_opt opts[] = {
        {"dry-run", OPT_FLAG, &dry, "list the runs (name: command) and start nothing", 0, 0, 0, 0, NULL},
        {"retry-failed", OPT_FLAG, &retry, "run again the runs that failed before (else they are kept as failed)", 0, 0, 0, 0, NULL},
    };
    const int nopts = (int)(sizeof opts / sizeof *opts);
    const char *file = NULL;
    char **flags = calloc((size_t)argc + 1, sizeof *flags);
    if (!flags) return 2;
    int nf = 0, extra = 0;
    for (int i = 2; i < argc; i++) {
        if (!strncmp(argv[i], "-", 1)) flags[nf++] = argv[i];
        else if (!file) file = argv[i];
        else extra = 1;
    }
    char **pv = calloc((size_t)nf + 3, sizeof *pv);
    if (!pv) { free(flags); return 2; }
    pv[0] = argv[0];
    pv[1] = argv[1];
    memcpy(pv + 2, flags, (size_t)nf * sizeof *flags);
    dt_status st = dt_parse_args("sweep", nf + 2, pv, 2, opts, nopts, &help);
    free(pv);
    free(flags);
    if (st == DT_OK && help) {
        dt_print_help("sweep", "FILE [--dry-run] [--retry-failed]\n\nRuns every run of an experiment file (docs/sweep.md), "
                      "each in its own folder, as many at once as the cores allow.\n"
                      "Exit status: 0 every run done, 1 some failed, 2 bad input, 130/143 interrupted.", opts, nopts);
        return 0;
    }
    if (st == DT_OK && (!file || extra)) st = dt_fail(DT_ERR_ARG, "dtrain sweep: expected one experiment file (dtrain sweep FILE)");
    if (st != DT_OK) { fprintf(stderr, "dtrain: error: %s\n", dt_last_error()); return 2; }
    const ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0) { fprintf(stderr, "dtrain: error: sweep: cannot find my own executable\n"); return 2; }
    self_path[len] = 0;
    dt_sweep s;
    if (dt_sweep_read(file, &s) != DT_OK) { fprintf(stderr, "dtrain: error: %s\n", dt_last_error()); return 2; }
    int rc = 2;
    slot *sl = calloc((size_t)s.nruns, sizeof *sl);
    if (!sl || check_all(&s)) goto out;
    tally t = {0};
    for (int i = 0; i < s.nruns; i++) {
        snprintf(sl[i].dir, sizeof sl[i].dir, "%s/%s", s.out, s.runs[i].name);
        read_status(&sl[i]);
        if (sl[i].state == FAILED && retry) sl[i].state = PENDING;
        if (sl[i].state != PENDING) same_command(&s.runs[i], &sl[i]);
        t.done += sl[i].state == DONE;
        t.failed += sl[i].state == FAILED;
        t.pending += sl[i].state == PENDING;
    }
    if (dry) {
        for (int i = 0; i < s.nruns; i++) {
            char **av = command(&s.runs[i], sl[i].dir, 0);
            printf("%s: ", s.runs[i].name);
            quoted(stdout, av);
            free_command(av);
        }
        fprintf(stderr, "sweep: %d runs (%d done, %d failed before); --dry-run: nothing started\n", s.nruns, t.done, t.failed);
        rc = 0;
        goto out;
    }
    if (mkdir_p(s.out) != 0 || write_sweep_json(&s) != 0) {
        fprintf(stderr, "dtrain: error: %s: out '%s': cannot make the folder or write sweep.json in it: %s\n", file, s.out, strerror(errno));
        goto out;
    }
    fprintf(stderr, "sweep: %s: %d runs, %d done and %d failed before, %d to run, into %s\n", s.name, s.nruns, t.done, t.failed, t.pending, s.out);
    const double t0 = dt_now();
    const int sig = run_all(&s, sl, &t);
    char secs[32];
    fmt_secs(dt_now() - t0, secs, sizeof secs);
    if (sig) {
        fprintf(stderr, "sweep: interrupted (%s) after %s: the runs it stopped have no status.json and run again on the next start; %d/%d done\n",
                strsignal(sig), secs, t.done, s.nruns);
        rc = 128 + sig;
        goto out;
    }
    for (int i = 0; i < s.nruns; i++)
        if (sl[i].state == FAILED)
            fprintf(stderr, "sweep: failed: %s (exit %d): %s\n", s.runs[i].name, sl[i].exit, sl[i].error[0] ? sl[i].error : "no error line; see its console.txt");
    fprintf(stderr, "sweep: %s: %d/%d done, %d failed, in %s%s\n", s.name, t.done, s.nruns, t.failed, secs,
            t.failed && !retry ? " (dtrain sweep --retry-failed runs the failed ones again)" : "");
    rc = t.failed ? 1 : 0;
out:
    free(sl);
    dt_sweep_free(&s);
    return rc;
}
