/* dtrain sweep's runs started and waited for (sweep.c decides which): as many at once as the
 * cores hold, each its own process group writing into its folder, a line as each starts and
 * ends with the progress and the ETA, and on SIGINT or SIGTERM every run stopped, killed
 * after a grace. */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/paths.h"

#define STOP_GRACE_S 20 /* after SIGTERM, what has not ended is killed */

static volatile sig_atomic_t stop_signal = 0;
static void on_stop(int sig) { stop_signal = sig; }

/* On a terminal the summary line is rewritten in place ('\r'), and cleared before any other
 * line; into a file or a pipe it is a line of its own each time. */
static int status_shown;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (status_shown) { fputs("\r\033[K", stderr); status_shown = 0; }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* --slurm: every run a Slurm job (sweep_slurm.c), with --sbatch's options; set for the
 * sweep's run by dt_sweep_run_all */
static int slurm;
static const char *sbatch_extra;

static long long size_of(const char *dir, const char *name) {
    char path[1400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

static pid_t start(const dt_sweep *s, const dt_sweep_run *r, dt_sweep_slot *sl) {
    int state = dt_sweep_folder_state(sl->dir);
    /* --rerun-changed: the old run's folder, whoever made it, kept whole beside the sweep's */
    if (sl->changed && state != DT_SWEEP_FOLDER_NONE) {
        char moved[1400];
        if (dt_sweep_move_aside(s->out, sl->dir, r->name, moved, sizeof moved) != 0) {
            say("sweep: %s: its command changed, but its old folder cannot be moved aside: %s; the run not started\n", r->name,
                dt_last_error());
            return -1;
        }
        say("sweep: %s: its command changed: its old folder moved to %s\n", r->name, moved);
        state = DT_SWEEP_FOLDER_NONE;
    }
    if (state == DT_SWEEP_FOLDER_FOREIGN) { /* made since the check: still not ours to remove */
        say("sweep: %s: %s is not a folder a sweep made: left as it is, the run not started\n", r->name, sl->dir);
        return -1;
    }
    if (state != DT_SWEEP_FOLDER_OURS) sl->in_place = 0; /* removed since the survey: made anew */
    char path[1400];
    snprintf(path, sizeof path, "%s/status.json", sl->dir);
    errno = 0;
    /* resumed in place, the folder stays (its log, console.txt, checkpoint go on); a running
     * run has no status.json, so that one cut short is told apart */
    if (sl->in_place ? unlink(path) != 0 && errno != ENOENT
                     : (state == DT_SWEEP_FOLDER_OURS && dt_sweep_rm_rf(sl->dir) != 0) || dt_sweep_make_folder(sl->dir, s->name, r->name) != 0) {
        say("sweep: %s: cannot %s %s: %s\n", r->name, sl->in_place ? "remove the status of" : "make the folder", sl->dir,
            errno ? strerror(errno) : dt_last_error());
        return -1;
    }
    sl->console_at = size_of(sl->dir, "console.txt");
    sl->slurm_at = size_of(sl->dir, "slurm.txt");
    char **av = dt_sweep_command(r, sl->dir, 0);
    if (dt_sweep_write_command(sl->dir, av) != 0) say("sweep: warning: %s: cannot write its command.txt: %s\n", r->name, dt_last_error());
    /* under Slurm the job writes console.txt, and sbatch its job id into slurm.txt */
    snprintf(path, sizeof path, "%s/%s", sl->dir, slurm ? "slurm.txt" : "console.txt");
    if (slurm) {
        char **job = dt_sweep_slurm_command(s, r, sl->dir, av, sbatch_extra, sl->in_place);
        dt_sweep_free_command(av);
        if (!(av = job)) { say("sweep: %s: out of memory for its sbatch command\n", r->name); return -1; }
    }
    fflush(NULL);
    const pid_t sweep = getpid(), pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* its own group: stopped as one, and not by the terminal's Ctrl-C */
        /* a sweep that dies (kill -9) takes its runs with it: a restart finds no orphan still
         * writing into the folder it redoes */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != sweep) _exit(127);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        unsetenv("DTRAIN_CHECK_ONLY"); /* from the user's environment: the run would only check */
        setenv("DTRAIN_RUN_DIR", sl->dir, 1); /* dtrain run's launcher.log stays with the run */
        int fd = -1, nul = open("/dev/null", O_RDONLY);
        if (dt_open_own(path, sl->in_place ? O_APPEND : O_EXCL, &fd) != DT_OK) { fprintf(stderr, "sweep: %s\n", dt_last_error()); _exit(127); }
        if (nul >= 0) dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (slurm) execvp(av[0], av);
        else execv(dt_sweep_self, av);
        fprintf(stderr, "dtrain: error: sweep: cannot start %s: %s\n", slurm ? av[0] : dt_sweep_self, strerror(errno));
        _exit(127);
    }
    if (pid > 0) setpgid(pid, pid);
    dt_sweep_free_command(av);
    return pid;
}

void dt_sweep_fmt_secs(double s, char *out, size_t len) {
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, len, "%lds", t);
}

static void progress(const dt_sweep *s, const dt_sweep_tally *t) {
    char eta[32] = "?";
    if (t->finished_here > 0) {
        const double mean = t->secs_here / t->finished_here;
        dt_sweep_fmt_secs(mean * (t->pending + t->running) / (t->running > 0 ? t->running : 1), eta, sizeof eta);
    }
    const int tty = isatty(2);
    char stopped[32] = "";
    if (t->stopped) snprintf(stopped, sizeof stopped, ", %d stopped", t->stopped);
    say("sweep: %d/%d done, %d running, %d failed%s, ETA %s%s", t->done, s->nruns, t->running, t->failed, stopped, eta,
        tty ? "" : "\n");
    status_shown = tty;
}

static void ended(const dt_sweep *s, dt_sweep_slot *sl, const dt_sweep_run *r, int status, dt_sweep_tally *t) {
    const double leg = dt_now() - sl->t0;
    char secs[32], why[600];
    sl->seconds = sl->before + leg;
    sl->exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    t->running--;
    /* status 5: stopped after a step with its checkpoint committed, whoever asked (this sweep's
     * interruption, preemption, a user's SIGTERM): kept, not failed, and on the next start
     * resumed in its folder (issue 44: recorded failed, its folder and log were deleted) */
    const int stopped = sl->exit == DT_EXIT_STOPPED;
    if (sl->killed && !stopped) { sl->state = DT_SWEEP_PENDING; return; } /* no status: the next start redoes it */
    char job[64];
    if (slurm && sl->exit != 0 && !stopped && dt_sweep_slurm_cancelled(sl->dir, sl->slurm_at, job, sizeof job)) {
        sl->state = DT_SWEEP_PENDING;
        sl->killed = 1; /* not started again by this sweep: a job cancelled by hand stays so */
        t->cancelled++;
        say("sweep: %s: its job %s was cancelled (or preempted, or lost with its node): it runs again on the next start\n",
            r->name, job);
        return;
    }
    sl->state = stopped ? DT_SWEEP_STOPPED : sl->exit == 0 ? DT_SWEEP_DONE : DT_SWEEP_FAILED;
    dt_sweep_last_error(sl);
    dt_sweep_write_status(sl);
    dt_sweep_fmt_secs(sl->seconds, secs, sizeof secs);
    if (stopped) {
        t->stopped++;
        say("sweep: stopped %s (exit %d, %s): its checkpoint committed, it resumes in its folder on the next start\n", r->name,
            sl->exit, secs);
        if (!sl->killed) progress(s, t);
        return;
    }
    t->finished_here++;
    t->secs_here += leg;
    if (sl->state == DT_SWEEP_DONE) { t->done++; say("sweep: done %s (%s)\n", r->name, secs); }
    else {
        t->failed++;
        say("sweep: FAILED %s (exit %d, %s): %s\n", r->name, sl->exit, secs, dt_sweep_why(sl, why, sizeof why));
    }
    progress(s, t);
}

/* The cores the runs may use at once: parallel, else this machine's; under Slurm the cluster
 * places the jobs, so every run is queued at once unless parallel says. */
long dt_sweep_cores(const dt_sweep *s, int under_slurm) {
    const long cores = s->parallel ? s->parallel : under_slurm ? s->nruns : sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores;
}

long dt_sweep_cores_of(const dt_sweep_run *r, long cores, int under_slurm) {
    return under_slurm || r->sim ? 1 : r->exclusive || r->ranks > cores ? cores : r->ranks;
}

int dt_sweep_run_all(const dt_sweep *s, dt_sweep_slot *sl, dt_sweep_tally *t, int under_slurm, const char *sbatch) {
    slurm = under_slurm;
    sbatch_extra = sbatch;
    const long cores = dt_sweep_cores(s, slurm);
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
            if (sl[i].state != DT_SWEEP_PENDING || sl[i].killed) continue;
            const dt_sweep_run *r = &s->runs[i];
            const long cost = dt_sweep_cores_of(r, cores, slurm);
            if (t->running > 0 && used + cost > cores) continue;
            sl[i].t0 = dt_now();
            sl[i].pid = start(s, r, &sl[i]);
            t->pending--;
            if (sl[i].pid < 0) { sl[i].state = DT_SWEEP_FAILED; sl[i].exit = 127; t->failed++; continue; }
            sl[i].state = DT_SWEEP_RUNNING;
            t->running++;
            used += cost;
            say("sweep: start %s\n", r->name);
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (int i = 0; i < s->nruns; i++)
                if (sl[i].state == DT_SWEEP_RUNNING && sl[i].pid == pid) {
                    const dt_sweep_run *r = &s->runs[i];
                    used -= dt_sweep_cores_of(r, cores, slurm);
                    ended(s, &sl[i], r, status, t);
                }
        if (stop_signal && !stop_at) {
            stop_at = dt_now();
            for (int i = 0; i < s->nruns; i++)
                if (sl[i].state == DT_SWEEP_RUNNING) { sl[i].killed = 1; kill(-sl[i].pid, SIGTERM); }
        }
        if (stop_at && dt_now() - stop_at > STOP_GRACE_S)
            for (int i = 0; i < s->nruns; i++)
                if (sl[i].state == DT_SWEEP_RUNNING) kill(-sl[i].pid, SIGKILL);
        /* a named timespec: SMPI's nanosleep macro would split a compound literal's comma */
        const struct timespec tick = {0, 50 * 1000 * 1000};
        if (t->running > 0 || t->pending > 0) nanosleep(&tick, NULL);
    }
    if (status_shown) fputc('\n', stderr);
    status_shown = 0;
    return (int)stop_signal;
}
