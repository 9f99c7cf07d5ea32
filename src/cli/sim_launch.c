/* Starting dtrain-sim and watching it (sim_launch.h). */
#define _GNU_SOURCE /* strsignal */
#include "cli/sim_launch.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"

dt_status dt_sim_argv_add(dt_sim_argv *a, char *arg) {
    if (a->n + 2 > a->cap) {
        const int cap = a->cap ? 2 * a->cap : 64;
        char **v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) return dt_nomem("dtrain sim's argument list of %d words", cap);
        a->v = v, a->cap = cap;
    }
    a->v[a->n++] = arg;
    a->v[a->n] = NULL;
    return DT_OK;
}

void dt_sim_argv_free(dt_sim_argv *a) {
    free(a->v);
    *a = (dt_sim_argv){0};
}

dt_status dt_sim_unnamed_file(FILE **out, char *name, size_t len) {
    char path[] = "/tmp/dtrain-sim.XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return dt_fail(DT_ERR_IO, "dtrain sim: cannot make a file in /tmp: %s", strerror(errno));
    unlink(path); /* open, and on no disk: the launcher reads it through its inherited descriptor */
    *out = fdopen(fd, "w");
    if (!*out) {
        close(fd);
        return dt_fail(DT_ERR_IO, "dtrain sim: cannot write a file in /tmp: %s", strerror(errno));
    }
    snprintf(name, len, "/dev/fd/%d", fd);
    return DT_OK;
}

/* ------------------------------------------------------------------ the launcher's end */

static volatile sig_atomic_t child_pid = 0, stopped_by = 0;

/* The simulation is one process (every rank in it): ended at once, then said in one line. */
static void on_stop(int sig) {
    if (!stopped_by) stopped_by = sig;
    if (child_pid > 0) kill((pid_t)child_pid, SIGKILL);
}

static void catch_stops(int on) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_stop : SIG_DFL;
    sa.sa_flags = SA_RESTART; /* the reading of the launcher's stderr goes on to its end */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* What SimGrid said, read off its stderr: its first error, and a deadlock's ranks. */
typedef struct {
    char first[600];    /* the first error's text */
    char deadlock[40];  /* the simulated time of a deadlock ("" when none) */
    char waiting[400];  /* "rank 0 (communication), rank 3 (communication)" */
    int aborted;        /* a rank called MPI_Abort (after its own line: dtrain: error: rank N: ...) */
} simgrid_said;

/* SimGrid's own errors (a platform it cannot load, a host it cannot find) come as several
 * lines and an abort. */
static int simgrid_error(const char *line) {
    return strstr(line, "/ERROR]") != NULL || strstr(line, "/CRITICAL]") != NULL;
}

/* The deadlock's listing, a line an actor (SMPI names each actor by its rank): "Actor 4 (3@host3):
 * waiting for communication activity 0x... () in state WAITING to finish", or "Actor 1 (0@host0)
 * simcall actor::ActivityWaitanySimcall" (an MPI_Waitall or MPI_Waitany) */
static void deadlocked_actor(simgrid_said *s, const char *line) {
    const char *a = strstr(line, "Actor "), *open = a ? strchr(a, '(') : NULL;
    const char *w = strstr(line, "waiting for "), *sc = strstr(line, " simcall ");
    if (!open || (!w && !sc)) return;
    const size_t used = strlen(s->waiting);
    if (used + 60 >= sizeof s->waiting) return;
    const char *what = w ? w + 12 : strstr(sc, "Waitany") ? "messages" : sc + 9;
    snprintf(s->waiting + used, sizeof s->waiting - used, "%srank %.*s (%.*s)", used ? ", " : "",
             (int)strcspn(open + 1, "@)"), open + 1, (int)strcspn(what, " \n"), what);
}

/* SimGrid's list of its options, printed before it stops on one it does not know */
static int simgrid_option_list(const char *line) {
    return !strcmp(line, "Existing config keys:\n") || (!strncmp(line, "  ", 2) && strstr(line, ": (") != NULL);
}

static void read_line(simgrid_said *s, const char *line) {
    /* a rank's error ends the run with MPI_Abort (cli/cmd_train.c), whose status SMPI loses
     * (smpimain exits 0): the rank said why; the warning adds nothing */
    if (strstr(line, "MPI_Abort was called")) {
        s->aborted = 1;
        return;
    }
    if (strstr(line, "[ker_engine/INFO]")) { /* the deadlock's listing, asked for by cmd_sim */
        deadlocked_actor(s, line);
        return;
    }
    /* after an error, its backtrace ("  ->  0# ...") and blank lines go with it */
    if (s->first[0] && (!strncmp(line, "  -> ", 5) || line[strspn(line, " \n")] == 0)) return;
    if (!simgrid_error(line)) {
        if (!simgrid_option_list(line)) fputs(line, stderr);
        return;
    }
    if (strstr(line, "Deadlock detected") && line[0] == '[') {
        snprintf(s->deadlock, sizeof s->deadlock, "%.*s", (int)strcspn(line + 1, "]"), line + 1);
        return;
    }
    if (!s->first[0]) { /* its text after the "[where] [category/ERROR] " prefixes */
        const char *t = strstr(line, "ERROR] ") ? strstr(line, "ERROR] ") + 7 : strstr(line, "CRITICAL] ") + 10;
        snprintf(s->first, sizeof s->first, "%.*s", (int)strcspn(t, "\n"), t);
    }
}

int dt_sim_launch(char **argv, const char *platform) {
    int fd[2];
    if (pipe(fd) != 0) {
        fprintf(stderr, "dtrain: error: dtrain sim: pipe: %s\n", strerror(errno));
        return 2;
    }
    stopped_by = 0;
    catch_stops(1); /* before the fork: a stop from now on ends the child it makes */
    const pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "dtrain: error: dtrain sim: fork: %s\n", strerror(errno));
        catch_stops(0);
        return 2;
    }
    if (pid == 0) {
        catch_stops(0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* its own process group: a Ctrl-C reaches dtrain sim alone, which ends the simulation
         * (SimGrid's ranks would each take it for their own stop) */
        setpgid(0, 0);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        if (getppid() == 1) _exit(2); /* dtrain sim ended before PDEATHSIG was set */
        execvp(argv[0], argv);
        fprintf(stderr, "dtrain: error: dtrain sim: cannot start %s: %s (apt-get install libsimgrid-dev)\n", argv[0], strerror(errno));
        _exit(2);
    }
    child_pid = pid;
    if (stopped_by) kill(pid, SIGKILL); /* a stop between the fork and here */
    close(fd[1]);
    FILE *err = fdopen(fd[0], "r");
    simgrid_said said = {0};
    char line[2048];
    while (err && fgets(line, sizeof line, err)) read_line(&said, line);
    if (err) fclose(err);
    else close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    child_pid = 0;
    catch_stops(0);
    fflush(stdout);
    if (stopped_by) {
        fprintf(stderr, "dtrain: error: dtrain sim: interrupted by %s: the simulation was ended (no weights written)\n",
                strsignal(stopped_by));
        return 128 + stopped_by;
    }
    if (said.aborted) return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 2;
    if (said.deadlock[0]) {
        fprintf(stderr, "dtrain: error: dtrain sim: the ranks deadlocked at simulated time %s s: %s wait%s for what no "
                "rank will send or finish (SimGrid found nothing left to simulate)\n",
                said.deadlock, said.waiting[0] ? said.waiting : "they", strchr(said.waiting, ',') || !said.waiting[0] ? "" : "s");
        return 4;
    }
    const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (said.first[0] && !ok) {
        fprintf(stderr, "dtrain: error: dtrain sim: SimGrid stopped (platform %s): %s\n", platform, said.first);
        return 2;
    }
    if (said.first[0]) fprintf(stderr, "dtrain sim: warning: SimGrid: %s\n", said.first);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "dtrain: error: dtrain sim: the simulation was killed by %s\n", strsignal(WTERMSIG(status)));
        return 128 + WTERMSIG(status);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}
