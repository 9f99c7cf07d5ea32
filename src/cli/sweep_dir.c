/* dtrain sweep: a run's command and the files of its folder (its mark, command.txt,
 * status.json, the error line of console.txt) and of the sweep's (sweep.json, sweep.lock).
 * sweep.c checks and runs. A sweep removes only folders it made: each carries its mark. */
#include "cli/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "core/json.h"
#include "core/paths.h"

char dt_sweep_self[4096];

/* ------------------------------------------------------------------ commands */

static int has_flag(const dt_sweep_run *r, const char *key) {
    for (int i = 0; i < r->nflags; i++)
        if (!strcmp(r->flags[i].key, key)) return 1;
    return 0;
}

static char *xdup(const char *a, const char *b) {
    char *d = malloc(strlen(a) + strlen(b) + 1);
    if (!d) dt_nomem_exit("a copy of %s%s", a, b);
    return strcat(strcpy(d, a), b);
}

/* The run's command: dtrain train (n = 1) or dtrain run -n N, its flags, and (outputs set)
 * --log and --out into its folder unless the file sets them. A run that checkpoints gets
 * --resume auto unless the file sets --resume: started again in its folder (stopped, or cut
 * short), it continues from its own checkpoint. check: as `dtrain run` always (its flags
 * include train's), without the outputs and the seed, its own files (KEY = true) named in dir
 * (dt_sweep_check_folder). Every string its own. */
char **dt_sweep_command(const dt_sweep_run *r, const char *dir, int check) {
    char **av = calloc((size_t)(2 * r->nflags + 14), sizeof *av), own[1400];
    if (!av) dt_nomem_exit("the command of a run");
    int k = 0;
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", r->ranks);
    av[k++] = xdup(dt_sweep_self, "");
    if (r->sim) { av[k++] = xdup("sim", ""); av[k++] = xdup("-n", ""); av[k++] = xdup(nbuf, ""); }
    else if (check || r->use_run) { av[k++] = xdup("run", ""); av[k++] = xdup("-n", ""); av[k++] = xdup(nbuf, ""); }
    else av[k++] = xdup("train", "");
    for (int i = 0; i < r->nflags; i++) {
        if (check && !strcmp(r->flags[i].key, "seed")) continue;
        av[k++] = xdup("--", r->flags[i].key);
        if (r->flags[i].value) av[k++] = xdup(r->flags[i].value, "");
        else if (dt_sweep_own_file(r, r->flags[i].key, dir, check, own, sizeof own)) av[k++] = xdup(own, "");
    }
    if (has_flag(r, "checkpoint") && !has_flag(r, "resume") && dir) { av[k++] = xdup("--resume", ""); av[k++] = xdup("auto", ""); }
    if (!check && !has_flag(r, "log")) { av[k++] = xdup("--log", ""); av[k++] = xdup(dir, "/log.jsonl"); }
    if (!check && !has_flag(r, "out") && !has_flag(r, "no-save")) { av[k++] = xdup("--out", ""); av[k++] = xdup(dir, "/model.weights"); }
    av[k] = NULL;
    return av;
}

void dt_sweep_free_command(char **av) {
    for (int i = 0; av[i]; i++) free(av[i]);
    free(av);
}

/* shell-quoted, one line (command.txt, --dry-run) */
void dt_sweep_quoted(FILE *f, char **av) {
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

/* ------------------------------------------------------------------ folders and files */

int dt_sweep_mkdir_p(const char *path) {
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

int dt_sweep_rm_rf(const char *path) {
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
                dt_sweep_rm_rf(sub);
            }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

static dt_status fill_text(void *text, void *file) {
    return fputs(text, file) >= 0 && fputc('\n', file) != EOF ? DT_OK : dt_fail(DT_ERR_IO, "write failed: %s", strerror(errno));
}

/* TEXT and a newline into PATH, whole or not at all (dt_write_atomic: a new file, never one
 * reached through a symlink, renamed into place) */
static int write_text(const char *path, const char *text) {
    return dt_write_atomic(path, fill_text, (void *)text) == DT_OK ? 0 : -1;
}

/* a file of a run's folder (status.json, command.txt, console.txt) to read: a regular file,
 * not a symlink to one; NULL if none */
static FILE *open_run_file(const char *dir, const char *name) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = NULL;
    struct stat sb;
    if (lstat(path, &sb) != 0 || dt_open_regular(path, &f, NULL) != DT_OK) return NULL;
    return f;
}

int dt_sweep_folder_state(const char *dir) {
    struct stat sb;
    if (lstat(dir, &sb) != 0) return errno == ENOENT ? DT_SWEEP_FOLDER_NONE : DT_SWEEP_FOLDER_FOREIGN;
    if (!S_ISDIR(sb.st_mode)) return DT_SWEEP_FOLDER_FOREIGN;
    char mark[1400];
    snprintf(mark, sizeof mark, "%s/%s", dir, DT_SWEEP_MARK);
    return lstat(mark, &sb) == 0 && S_ISREG(sb.st_mode) ? DT_SWEEP_FOLDER_OURS : DT_SWEEP_FOLDER_FOREIGN;
}

int dt_sweep_make_folder(const char *dir, const char *sweep, const char *run) {
    if (mkdir(dir, 0755) != 0) return -1;
    char mark[1400], text[600];
    snprintf(mark, sizeof mark, "%s/%s", dir, DT_SWEEP_MARK);
    snprintf(text, sizeof text, "made by dtrain sweep %s for its run %s: the sweep may remove this folder to run it again", sweep, run);
    return write_text(mark, text);
}

/* sweep.json of another program, or no JSON at all, is not the sweep's to replace */
int dt_sweep_json_ours(const dt_sweep *s) {
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.json", s->out);
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT;
    FILE *f = NULL;
    if (!S_ISREG(sb.st_mode) || dt_open_regular(path, &f, NULL) != DT_OK) return 0;
    json_t *j = json_loadf(f, 0, NULL);
    fclose(f);
    const int ours = json_is_object(j) && json_is_array(json_object_get(j, "runs")) && json_is_string(json_object_get(j, "out"));
    json_decref(j);
    return ours;
}

static int alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

/* the pid the lock file names, 0 if none */
static long holder(const char *path) {
    FILE *f = NULL;
    char text[32] = "";
    if (dt_open_regular(path, &f, NULL) != DT_OK) return 0;
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return strtol(text, NULL, 10);
}

int dt_sweep_lock(const dt_sweep *s) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", s->out, DT_SWEEP_LOCK);
    /* not closed on exec: the runs inherit the lock and hold it until the last of them has ended,
     * so a sweep started after this one was killed waits for its runs instead of running them
     * a second time beside them */
    int fd = -1;
    if (dt_open_own(path, O_APPEND, &fd) != DT_OK || fcntl(fd, F_SETFD, 0) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    for (int tries = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; tries++) {
        const int why = errno;
        const long pid = holder(path);
        if (why != EWOULDBLOCK) dt_fail(DT_ERR_IO, "%s: out '%s': cannot lock %s: %s", s->path, s->out, path, strerror(why));
        else if (alive(pid))
            dt_fail(DT_ERR_ARG, "%s: out '%s' is in use by another dtrain sweep (pid %ld): wait for it to end, or stop it",
                    s->path, s->out, pid);
        else if (tries == 10 * DT_SWEEP_LOCK_WAIT_S)
            dt_fail(DT_ERR_ARG, "%s: out '%s' is in use by the runs of a dtrain sweep that ended (pid %ld): they did not "
                    "stop within %d s", s->path, s->out, pid, DT_SWEEP_LOCK_WAIT_S);
        else {
            /* its runs were sent SIGTERM when it died (PR_SET_PDEATHSIG): they end in seconds */
            if (!tries) fprintf(stderr, "sweep: waiting for the runs of a dtrain sweep that ended (pid %ld) to stop\n", pid);
            const struct timespec tenth = {0, 100 * 1000 * 1000};
            nanosleep(&tenth, NULL);
            continue;
        }
        close(fd);
        return -1;
    }
    char text[32];
    const int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, text, (size_t)n) != n) {
        dt_fail(DT_ERR_IO, "%s: out '%s': cannot write %s: %s", s->path, s->out, path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int dt_sweep_write_command(const char *dir, char **av) {
    char *text = NULL, path[1400];
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return -1;
    dt_sweep_quoted(m, av);
    if (fclose(m) != 0) { free(text); return -1; }
    if (len && text[len - 1] == '\n') text[len - 1] = 0; /* write_text ends the line */
    snprintf(path, sizeof path, "%s/command.txt", dir);
    const int rc = write_text(path, text);
    free(text);
    return rc;
}

int dt_sweep_write_json(const dt_sweep *s) {
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
        char **av = dt_sweep_command(r, dir, 0);
        dt_json_begin_array(&j, "command");
        for (int k = 0; av[k]; k++) dt_json_str(&j, NULL, av[k]);
        dt_json_end_array(&j);
        dt_sweep_free_command(av);
        dt_json_end(&j);
    }
    dt_json_end_array(&j);
    dt_json_end(&j);
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.json", s->out);
    const char *text = dt_json_text(&j);
    const int rc = text ? write_text(path, text) : -1; /* out of memory: dt_json_text recorded it */
    dt_json_free(&j);
    return rc;
}

/* status.json of a run that ended: state done / failed / stopped (with exit, error and
 * seconds), else pending. A sweep before stopped runs were told apart recorded them failed
 * with exit 5: they are stopped runs, resumable. */
void dt_sweep_read_status(dt_sweep_slot *sl) {
    char buf[2048];
    FILE *f = open_run_file(sl->dir, "status.json");
    sl->state = DT_SWEEP_PENDING;
    if (!f) return;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strstr(buf, "\"status\":\"done\"")) sl->state = DT_SWEEP_DONE;
    else if (strstr(buf, "\"status\":\"failed\"")) sl->state = DT_SWEEP_FAILED;
    else if (strstr(buf, "\"status\":\"stopped\"")) sl->state = DT_SWEEP_STOPPED;
    const char *e = strstr(buf, "\"exit\":");
    sl->exit = e ? atoi(e + 7) : 0;
    if (sl->state == DT_SWEEP_FAILED && sl->exit == DT_EXIT_STOPPED) sl->state = DT_SWEEP_STOPPED;
    sl->seconds = (e = strstr(buf, "\"seconds\":")) ? atof(e + 10) : 0;
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

void dt_sweep_write_status(const dt_sweep_slot *sl) {
    char path[1400];
    snprintf(path, sizeof path, "%s/status.json", sl->dir);
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "status", sl->state == DT_SWEEP_DONE ? "done" : sl->state == DT_SWEEP_STOPPED ? "stopped" : "failed");
    dt_json_int(&j, "exit", sl->exit);
    dt_json_str(&j, "error", sl->error[0] ? sl->error : NULL);
    dt_json_fixed(&j, "seconds", sl->seconds, 1);
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    if (!text || write_text(path, text) != 0) fprintf(stderr, "sweep: warning: cannot write %s: %s\n", path, strerror(errno));
    dt_json_free(&j);
}

/* the last line of a file of the run's folder, from byte `from` on (what this start wrote),
 * that starts with one of the prefixes, into sl->error; 1 when one was found */
static int last_line(dt_sweep_slot *sl, const char *name, long long from, const char *const *prefixes) {
    FILE *f = open_run_file(sl->dir, name);
    if (!f) return 0;
    int found = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    if (from > 0 && fseeko(f, (off_t)from, SEEK_SET) != 0) rewind(f); /* then the whole file */
    while ((n = getline(&line, &cap, f)) > 0)
        for (int i = 0; prefixes[i]; i++)
            if (!strncmp(line, prefixes[i], strlen(prefixes[i]))) {
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
                snprintf(sl->error, sizeof sl->error, "%s", line);
                found = 1;
                break;
            }
    free(line);
    fclose(f);
    return found;
}

/* the last "dtrain: error:" line of the run's console.txt; without one, sbatch's own error in
 * slurm.txt (--slurm: a job that never ran leaves no console.txt) */
void dt_sweep_last_error(dt_sweep_slot *sl) {
    static const char *const ours[] = {"dtrain: error:", NULL}, *const sbatch[] = {"sbatch: error:", "sbatch: fatal:", NULL};
    sl->error[0] = 0;
    if (!last_line(sl, "console.txt", sl->console_at, ours)) last_line(sl, "slurm.txt", sl->slurm_at, sbatch);
}

const char *dt_sweep_why(const dt_sweep_slot *sl, char *buf, size_t len) {
    if (!strncmp(sl->error, "dtrain: error:", 14)) return sl->error;
    if (sl->error[0]) snprintf(buf, len, "%s (in %s/slurm.txt)", sl->error, sl->dir);
    else {
        char path[1400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/console.txt", sl->dir);
        const int console = lstat(path, &sb) == 0;
        snprintf(path, sizeof path, "%s/slurm.txt", sl->dir);
        const int sbatch = lstat(path, &sb) == 0;
        snprintf(buf, len, "no error line; see %s/%s", sl->dir, !console && sbatch ? "slurm.txt" : "console.txt");
    }
    return buf;
}
