/* dtrain sweep --slurm: each run one Slurm job. The sweep submits it with `sbatch --wait`,
 * which returns when the job ends with the job's exit status, so the sweep watches its jobs as
 * it watches its own runs (sweep.c: as many at once as --parallel, status.json when a run
 * ends, resumable as before) while Slurm places them. The job runs the run's own command (a
 * run of several ranks: `dtrain run -n N`, whose mpiexec takes the job's nodes from Slurm),
 * its output is the run's console.txt, and sbatch's own line (the job id) is slurm.txt. A job
 * cancelled (scancel, or a node lost) leaves no status.json: the next start runs it again,
 * alone. Before any of this, sbatch and the controller are asked once (dt_sweep_slurm_ready):
 * without them every run failed the same way, each naming a console.txt never made. */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* ------------------------------------------------------------------ before any run */

#define ASK_WAIT_S 30 /* a Slurm command that has not answered by then is not going to */

/* NAME as execvp would find it on PATH, into buf: 1, or 0 when no such program is there */
static int on_path(const char *name, char *buf, size_t len) {
    const char *path = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin";
    struct stat sb;
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        const int n = colon ? (int)(colon - p) : (int)strlen(p);
        snprintf(buf, len, "%.*s/%s", n, n ? p : ".", name);
        if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && access(buf, X_OK) == 0) return 1;
        if (!colon) return 0;
        p = colon + 1;
    }
}

/* Runs av (av[0] a path found by on_path) with its output, stdout and stderr, into out (its
 * first len - 1 bytes: a few lines), for at most ASK_WAIT_S: its exit status, -1 when it could
 * not start, -2 when it did not end in time (it is killed) */
static int ask(char *const av[], char *out, size_t len) {
    int fd[2];
    out[0] = 0;
    if (pipe(fd) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        const int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        execv(av[0], av);
        _exit(127);
    }
    close(fd[1]);
    if (pid < 0) { close(fd[0]); return -1; }
    size_t got = 0;
    const double end = dt_now() + ASK_WAIT_S;
    int late = 0;
    for (;;) {
        const double left = end - dt_now();
        struct pollfd pf = {.fd = fd[0], .events = POLLIN};
        const int r = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) { late = 1; break; }
        char chunk[512];
        const ssize_t n = r > 0 ? read(fd[0], chunk, sizeof chunk) : -1;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        const size_t take = got + (size_t)n < len ? (size_t)n : len - 1 - got; /* the rest is read and dropped */
        memcpy(out + got, chunk, take);
        out[got += take] = 0;
    }
    close(fd[0]);
    if (late) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (late) return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* the first line of text holding word, else its last line that is not empty, into line */
static void line_of(const char *text, const char *word, char *line, size_t len) {
    line[0] = 0;
    int held = 0;
    for (const char *at = text; *at && !held;) {
        const size_t n = strcspn(at, "\n");
        if (n) {
            snprintf(line, len, "%.*s", (int)n, at);
            held = word && strstr(line, word);
        }
        at += n + (at[n] == '\n');
    }
}

int dt_sweep_slurm_ready(void) {
    char path[4200], out[2048], line[300];
    /* Slurm's commands retry a SLURM_CONF that is not there for a minute before they fail */
    const char *conf = getenv("SLURM_CONF");
    struct stat sb;
    const int found = conf && *conf && stat(conf, &sb) == 0;
    if (conf && *conf && (!found || !S_ISREG(sb.st_mode))) {
        dt_fail(DT_ERR_ARG, "dtrain sweep --slurm: SLURM_CONF=%s: %s, expected the cluster's slurm.conf", conf,
                found ? "not a regular file" : strerror(errno));
        return -1;
    }
    static const char *const tools[][3] = {{"sbatch", "--version", NULL}, {"scontrol", "ping", NULL}};
    for (int i = 0; i < 2; i++) {
        if (!on_path(tools[i][0], path, sizeof path)) {
            dt_fail(DT_ERR_ARG, "dtrain sweep --slurm: %s not found on PATH: install Slurm's commands (Debian: slurm-client), "
                    "or run the sweep without --slurm", tools[i][0]);
            return -1;
        }
        char *av[] = {path, (char *)tools[i][1], NULL};
        const int rc = ask(av, out, sizeof out);
        line_of(out, i ? "DOWN" : NULL, line, sizeof line);
        /* scontrol ping: "Slurmctld(primary) at HOST is UP" when a controller answers */
        if (rc == 0 && (!i || strstr(out, " is UP"))) continue;
        if (rc == -2) snprintf(line, sizeof line, "no answer within %d s", ASK_WAIT_S);
        else if (!line[0]) snprintf(line, sizeof line, "%s", rc == -1 ? strerror(errno) : "exit status, no words");
        dt_fail(DT_ERR_ARG, "dtrain sweep --slurm: %s (%s %s: %s)%s", i ? "no Slurm controller answers" : "sbatch does not run",
                tools[i][0], tools[i][1], line, i ? ": start slurmctld, or point SLURM_CONF at the cluster's slurm.conf" : "");
        return -1;
    }
    return 0;
}
