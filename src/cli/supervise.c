/* The supervisor of `dtrain run` (supervise.h): one attempt of the job after another. */
#include "cli/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/boards.h"
#include "cli/cli.h"
#include "cli/relay.h"
#include "core/paths.h"
#include "trainer/ckset.h"
#include "trainer/trainer.h"

/* Why the supervisor ended an attempt itself (the launcher would have waited forever). */
enum { ENDED_NOT = 0, ENDED_CANNOT_LAUNCH, ENDED_NOT_STARTED, ENDED_HELD, ENDED_FROZEN };

typedef struct outcome {
    int status;         /* mpiexec's exit status (or 128+signal) */
    int launcher_signal; /* mpiexec itself was killed by this signal, not by us */
    int interrupted;    /* the user's SIGINT / SIGTERM, passed on to the job */
    time_t interrupted_at; /* ... when */
    int ended_by;       /* ENDED_*: the supervisor ended the job, why */
    int who;            /* ... the rank it concerns */
    char why[600];      /* ... in words */
    long step;          /* the furthest step any rank reached */
    int error_relayed;  /* a "dtrain: error:" line of the ranks came through the launcher */
    int stop_relayed;   /* ... rank 0's "dtrain: stopped by" line */
} outcome;

static volatile sig_atomic_t stop_signal = 0;
static void on_stop(int sig) { stop_signal = sig; }

/* The attempt's bounds (besides --start-timeout and --timeout): how long the launcher may
 * take to end once every rank left, or once a rank was lost, before we end the job; and how
 * long what SIGTERM did not end has before SIGKILL. */
#define HELD_GRACE_S 5.0
#define LOST_TERM_S 4.0
#define KILL_AFTER_TERM_S 3.0
#define STOP_SAVE_S 30.0 /* Slurm's KillWait: what a preempted job has */

static void end_job(pid_t child, outcome *o, int why, double *ending_at) {
    if (!o->ended_by) o->ended_by = why;
    if (!*ending_at) { kill(-child, SIGTERM); *ending_at = dt_now(); }
}

/* What run_attempt watches while the launcher runs, between polls */
typedef struct watch {
    double started_at, lost_at, left_at, ending_at, checked_at;
    int killed;
} watch;

/* One look at the job while the launcher runs: a signal of ours passed on, ranks that did not
 * start, a job held after its ranks left, every rank frozen, a lost rank; what ends the job
 * SIGTERM first, SIGKILL after a grace. */
static void look(pid_t child, dt_boards *bs, FILE *noise, const dt_job *job, const dt_relay *relay, outcome *o, watch *w) {
    const double now = dt_now();
    /* the user's (or a dying sweep's) signal, passed on; a launcher still starting may miss
     * it (seen: mpiexec and its ranks went on after SIGTERM), so it is killed as below */
    if (stop_signal) {
        o->interrupted = (int)stop_signal;
        o->interrupted_at = time(NULL);
        /* with --checkpoint the ranks stop after a step and save it (trainer/stop.c): the
         * signal goes to them, not to the launcher (Open MPI's mpirun kills its ranks soon
         * after a SIGTERM of its own: odls_base_sigkill_timeout); ranks this host cannot
         * see get it from the launcher */
        dt_boards_map(bs);
        const int all_here = job->checkpoint && dt_boards_started(bs) == bs->n &&
                             dt_boards_signal_ranks(bs, (int)stop_signal) == bs->n;
        if (!all_here) kill(-child, (int)stop_signal);
        stop_signal = 0;
        if (!w->ending_at) w->ending_at = now;
    }
    dt_boards_map(bs);
    dt_boards_end_dropped(bs, noise);
    const int started = dt_boards_started(bs);
    /* a host the launcher could not reach: MPICH's hydra would wait for it forever */
    if (started < bs->n && relay->cannot_launch[0] && !o->ended_by) {
        snprintf(o->why, sizeof o->why, "%s", relay->cannot_launch);
        end_job(child, o, ENDED_CANNOT_LAUNCH, &w->ending_at);
    }
    if (started < bs->n && !o->ended_by && now - w->started_at > job->start_timeout) {
        o->who = started;
        snprintf(o->why, sizeof o->why, "%s", relay->launcher_said);
        end_job(child, o, ENDED_NOT_STARTED, &w->ending_at);
    }
    /* every rank left (or one gave up waiting), but the launcher still waits: for a guard,
     * or its own process above one, that is stopped; they are ended (a stopped process
     * ignores SIGTERM), and the work is done or not as the boards say */
    if (!w->left_at && started == bs->n && dt_boards_all_left(bs)) w->left_at = now;
    if ((w->left_at || w->lost_at) && !o->ended_by && now - w->checked_at >= 1) {
        w->checked_at = now;
        int pid = 0;
        const int who = dt_boards_held(bs, o->why, sizeof o->why, &pid);
        const char state = who >= 0 ? dt_proc_state(pid) : 0;
        const int stopped = state == 'T' || state == 't';
        if (who >= 0 && (stopped || (w->left_at && now - w->left_at > HELD_GRACE_S))) {
            o->who = who;
            if (noise) fprintf(noise, "dtrain run: ending what holds the job: %s\n", o->why);
            kill((pid_t)pid, SIGKILL);
            end_job(child, o, ENDED_HELD, &w->ending_at);
        }
    }
    /* every rank frozen (stopped): no watchdog can act, so we do */
    if (job->timeout > 0 && !o->ended_by) {
        const int who = dt_boards_frozen(bs, job->timeout + 5);
        if (who >= 0) { o->who = who; end_job(child, o, ENDED_FROZEN, &w->ending_at); }
    }
    /* a lost rank: the launcher should end the job; if it does not, we do */
    if (!w->lost_at && (dt_boards_first(bs, DT_RANK_LOST) >= 0 || dt_boards_first(bs, DT_RANK_TIMED_OUT) >= 0))
        w->lost_at = now;
    if (w->lost_at && !w->ending_at && now - w->lost_at > LOST_TERM_S) { kill(-child, SIGTERM); w->ending_at = now; }
    /* whatever ends the job, SIGTERM first; what does not end, or is stopped, is killed */
    /* asked to stop with --checkpoint: the ranks finish a step and save it first */
    const double grace = o->interrupted && job->checkpoint ? STOP_SAVE_S : KILL_AFTER_TERM_S;
    if (w->ending_at && !w->killed && now - w->ending_at > grace) { kill(-child, SIGKILL); w->killed = 1; }
}

/* In the forked child: the launcher started in the job's own group, its output into the
 * pipes, the boards' folder and whether rank 0 may draw a live line in its environment */
_Noreturn static void exec_launcher(char **av, const dt_boards *bs, int live, pid_t parent, const int out[2], const int err[2]) {
    setpgid(0, 0); /* the job's own group: ended as one */
    /* dtrain run killed (kill -9, or with the sweep that started it) ends the job too:
     * mpiexec takes SIGTERM as the end of its ranks */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]); close(out[1]); close(err[0]); close(err[1]);
    setenv("DTRAIN_BOARD", bs->dir, 1);
    if (live) setenv("DTRAIN_LIVE", "1", 1);
    else unsetenv("DTRAIN_LIVE");
    execvp(av[0], av);
    fprintf(stderr, "dtrain: error: dtrain run: cannot start %s: %s (install mpich, or set DTRAIN_MPIEXEC)\n", av[0],
            strerror(errno));
    _exit(127);
}

static int run_attempt(char **av, dt_boards *bs, FILE *noise, const dt_job *job, outcome *o) {
    memset(o, 0, sizeof *o);
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) {
        fprintf(stderr, "dtrain: error: dtrain run: cannot make pipes: %s\n", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    /* on a terminal, rank 0 may draw its live progress line (its own stdout is a pipe here) */
    const int live = isatty(STDOUT_FILENO);
    const pid_t parent = getpid(), child = fork();
    if (child < 0) {
        fprintf(stderr, "dtrain: error: dtrain run: cannot fork: %s\n", strerror(errno));
        return -1;
    }
    if (child == 0) exec_launcher(av, bs, live, parent, out, err);
    setpgid(child, child);
    close(out[1]);
    close(err[1]);
    dt_relay_stream s[2] = {{.fd = out[0]}, {.fd = err[0], .is_err = 1}};
    dt_relay relay = {.out = stdout, .err = stderr, .noise = noise, .live = live ? stdout : NULL};
    int open_fds = 2, exited = 0, status = 0;
    double exited_at = 0;
    watch w = {.started_at = dt_now()};
    for (;;) {
        struct pollfd p[2];
        int np = 0, idx[2];
        for (int i = 0; i < 2; i++)
            if (s[i].fd >= 0) { p[np] = (struct pollfd){.fd = s[i].fd, .events = POLLIN}; idx[np++] = i; }
        int rc = np ? poll(p, (nfds_t)np, 200) : poll(NULL, 0, 200);
        for (int k = 0; rc > 0 && k < np; k++)
            if (p[k].revents && !dt_relay_pump(&relay, &s[idx[k]])) { close(s[idx[k]].fd); s[idx[k]].fd = -1; open_fds--; }
        if (!exited && waitpid(child, &status, WNOHANG) == child) { exited = 1; exited_at = dt_now(); }
        if (exited && (open_fds == 0 || dt_now() - exited_at > 3)) break;
        if (exited) continue;
        look(child, bs, noise, job, &relay, o, &w);
    }
    for (int i = 0; i < 2; i++)
        if (s[i].fd >= 0) close(s[i].fd);
    for (int i = 0; i < relay.nsaid; i++) {
        o->error_relayed |= !strncmp(relay.said[i], "dtrain: error:", 14);
        o->stop_relayed |= !strncmp(relay.said[i], "dtrain: stopped by ", 19);
    }
    dt_relay_free(&relay);
    kill(-child, SIGKILL); /* nothing of the job outlives it (a launcher killed from outside leaves its ranks) */
    dt_boards_map(bs);
    o->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (WIFSIGNALED(status) && !w.ending_at && !o->interrupted) o->launcher_signal = WTERMSIG(status);
    o->step = dt_boards_furthest_step(bs);
    return 0;
}

/* The newest checkpoint every rank has (the committed set its manifest names, or one
 * process's file): its epoch and step, the restart's starting point. */
int dt_checkpoint_point(const char *path, int ranks, int *epoch, long *step) {
    if (ranks > 1) {
        char *text;
        size_t len;
        dt_ckset set;
        int ok = dt_ckset_slurp(path, &text, &len) == DT_OK && dt_ckset_parse(text, len, path, -1, &set) == DT_OK;
        free(text);
        if (ok) { *epoch = set.epoch; *step = set.step; }
        return ok ? 0 : -1;
    }
    dt_tfile f;
    if (dt_tfile_read(path, &f) != DT_OK) return -1;
    const dt_record *prog = dt_tfile_find(&f, "train:progress");
    int ok = prog && prog->numel == 2 && prog->data[0] >= 0 && prog->data[0] <= 1e6f && prog->data[1] >= 0 &&
             prog->data[1] <= 1e15f;
    if (ok) { *epoch = (int)prog->data[0]; *step = (long)prog->data[1]; }
    dt_tfile_free(&f);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------ the job */

static int remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

/* The checkpoint (a set's manifest, or one process's file) was committed at or after t: the
 * ranks saved the step they stopped at, whatever their launcher's exit said. */
static int saved_since(const char *path, time_t t) {
    struct stat s;
    return stat(path, &s) == 0 && s.st_mtime >= t;
}

/* judge's first look: the ranks stopped with a checkpoint (status 5), or this process was
 * asked to stop (o->interrupted): the exit status, said; -1 when neither */
static int judge_stop(const dt_job *job, const dt_boards *bs, const outcome *o, const char *at, int done) {
    /* The ranks stopped after a step and committed its checkpoint (only then does a rank exit
     * with status 5): whoever got the signal, this process, mpiexec, one rank or all of them
     * (Slurm signals every process of a job step). The launcher's own status says nothing
     * here: MPICH's mpiexec ends with 0 after a SIGTERM of its own, with 5 after one to a rank.
     * A signal of ours the ranks answered by saving, though the launcher lost their status
     * (the manifest is newer than the signal), is a stop too. */
    if (job->checkpoint && !done &&
        (dt_boards_all_exited(bs, DT_EXIT_STOPPED) ||
         (o->interrupted && (o->status == DT_EXIT_STOPPED || saved_since(job->checkpoint, o->interrupted_at))))) {
        /* rank 0 said how to resume; if its line was lost on the way, the set says where */
        int epoch = 0;
        long step = 0;
        char after[48] = "";
        if (o->stop_relayed) return DT_EXIT_STOPPED;
        if (dt_checkpoint_point(job->checkpoint, job->ranks, &epoch, &step) == 0) snprintf(after, sizeof after, " after step %ld", step);
        fprintf(stderr, "dtrain: stopped%s%s%s: checkpoint %s committed; resume with the same command and --resume %s (or "
                "--resume auto)\n", o->interrupted ? " by " : "", o->interrupted ? strsignal(o->interrupted) : "", after,
                job->checkpoint, job->checkpoint);
        return DT_EXIT_STOPPED;
    }
    /* asked to stop once the ranks had trained their last step: the run is complete, and
     * there is nothing to resume (a job script would requeue on status 5, and the next start
     * find a finished run) */
    if (o->interrupted && done) {
        fprintf(stderr, "dtrain: %s came after the last step: the run is complete, nothing to resume\n",
                strsignal(o->interrupted));
        return 0;
    }
    if (o->interrupted) {
        fprintf(stderr, "dtrain: error: interrupted (%s) %s: the job was ended%s\n", strsignal(o->interrupted), at,
                job->checkpoint ? " before its ranks saved a checkpoint of their step" : "");
        return 128 + o->interrupted;
    }
    return -1;
}

/* judge's last look, the ranks' work not done: the launcher killed, every rank frozen, a
 * signal passed on to the ranks, or ranks that failed (what they said, or the launcher's
 * messages); the exit status, said, *lost set when a rank was lost (4) */
static int judge_failed(const dt_job *job, const dt_boards *bs, const outcome *o, const char *launcher, const char *noise_path,
                        const char *at, int started, int *lost) {
    if (o->launcher_signal) {
        fprintf(stderr, "dtrain: error: the launcher (%s) was killed by signal %d (%s) %s; "
                "the job was ended (its messages: %s)\n", launcher, o->launcher_signal, strsignal(o->launcher_signal), at,
                noise_path);
        return 2;
    }
    if (o->ended_by == ENDED_FROZEN) {
        char name[160];
        dt_boards_name(bs, o->who, name, sizeof name);
        fprintf(stderr, "dtrain: error: every rank stopped responding (%s first) %s: no sign of life for --timeout %.0f s "
                "+ 5 s; the job was ended (the launcher's messages: %s)\n", name, at, job->timeout, noise_path);
        *lost = 1;
        return 4;
    }
    /* SIGTERM or SIGINT to the launcher from outside (the user's, or Slurm's to a job step),
     * passed on to ranks that do not stop on it (no --checkpoint): interrupted, as by ours */
    const int passed = o->ended_by ? 0 : dt_boards_passed_signal(bs);
    if (passed) {
        fprintf(stderr, "dtrain: error: interrupted (%s, passed on to the ranks by the launcher) %s: the job was ended\n",
                strsignal(passed), at);
        return 128 + passed;
    }
    /* a rank that failed on its own said why, but MPI_Abort may have ended the launcher's proxy
     * before it passed the line on (seen once with both cores busy: status 2, nothing said) */
    const int said = !o->error_relayed && dt_boards_say_failure(bs, stderr);
    char *explained = NULL;
    size_t elen = 0;
    FILE *m = open_memstream(&explained, &elen);
    *lost = dt_boards_explain(bs, noise_path, m ? m : stderr);
    if (m) { fclose(m); fputs(explained, stderr); }
    free(explained);
    /* nothing said at all: ranks that failed before they could (Open MPI refusing its
     * transports in MPI_Init); the launcher's messages hold its words */
    if (!o->error_relayed && !said && m && elen == 0)
        fprintf(stderr, "dtrain: error: the launcher (%s) ended with status %d, %d of %d ranks started, none said why (its "
                "messages: %s)\n", launcher, o->status, started, bs->n, noise_path);
    return *lost ? 4 : (o->status == 3 ? 3 : 2);
}

/* What the attempt came to, said in one line: the exit status for `dtrain run`, and in *lost
 * whether a restart may help. */
static int judge(const dt_job *job, const dt_boards *bs, const outcome *o, const char *launcher, const char *noise_path,
                 FILE *noise, int *lost) {
    char at[96];
    *lost = 0;
    dt_boards_where(bs, at, sizeof at);
    const int started = dt_boards_started(bs);
    /* every rank trained, saved and evaluated: the weights and the log's summary are written */
    const int done = dt_boards_work_done(bs);
    const int stopped = judge_stop(job, bs, o, at, done);
    if (stopped >= 0) return stopped;
    if (o->ended_by == ENDED_CANNOT_LAUNCH || o->ended_by == ENDED_NOT_STARTED) {
        if (o->ended_by == ENDED_CANNOT_LAUNCH)
            fprintf(stderr, "dtrain: error: the launcher could not start the ranks: %s (its messages: %s)\n", o->why,
                    noise_path);
        else
            fprintf(stderr, "dtrain: error: %d of %d ranks had not started after %.0f s%s%s (the launcher's messages: %s)\n",
                    bs->n - started, bs->n, job->start_timeout, o->why[0] ? "; the launcher's last word: " : "", o->why,
                    noise_path);
        return 2;
    }
    /* a launcher's status 0 is a success only with the ranks' work done: MPICH's mpiexec
     * ends with 0 after a SIGTERM of its own whatever became of its ranks */
    if (o->status == 0 && started == bs->n && o->ended_by != ENDED_HELD && done) return 0;
    if (dt_boards_completed_with_drops(bs) && o->ended_by != ENDED_HELD) return 0;
    if (started < bs->n && o->status == 0) {
        fprintf(stderr, "dtrain: error: the launcher (%s) ended with status 0 but started %d of %d ranks: nothing was "
                "trained (its messages: %s)\n", launcher, started, bs->n, noise_path);
        return 2;
    }
    dt_boards_record(bs, noise);
    /* the work is done, and only the end was held or cut: said as a warning, status 0 */
    if (done && o->ended_by != ENDED_FROZEN && !o->launcher_signal) {
        char why[600];
        int pid = 0;
        if (o->ended_by == ENDED_HELD && o->who >= 0) snprintf(why, sizeof why, "%s", o->why);
        else if (dt_boards_held(bs, why, sizeof why, &pid) < 0) snprintf(why, sizeof why, "the launcher ended with status %d", o->status);
        fprintf(stderr, "dtrain: warning: %s after the ranks finished their work; the job was ended (the run is "
                "complete: weights and log written; the launcher's messages: %s)\n", why, noise_path);
        return 0;
    }
    return judge_failed(job, bs, o, launcher, noise_path, at, started, lost);
}

int dt_supervise(const dt_job *job) {
    dt_boards bs = {.n = job->ranks, .kill = kill};
    bs.b = calloc((size_t)job->ranks, sizeof *bs.b);
    const char *tmp = getenv("DTRAIN_RUN_DIR") ? getenv("DTRAIN_RUN_DIR") : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(bs.dir, sizeof bs.dir, "%s/dtrain-run.XXXXXX", tmp);
    if (!bs.b || !mkdtemp(bs.dir)) {
        fprintf(stderr, "dtrain: error: dtrain run: cannot make a folder for the job in %s: %s\n", tmp, strerror(errno));
        free(bs.b);
        return 2;
    }
    char noise_path[4200];
    snprintf(noise_path, sizeof noise_path, "%s/launcher.log", bs.dir);
    /* created new in the job's own folder (mkdtemp: this process's, mode 0700), as every file
     * dtrain names itself: never through a link; an append log, so no temporary and rename.
     * Without it the run goes on, only the launcher's messages are not kept */
    int noise_fd;
    FILE *noise = dt_open_own(noise_path, O_EXCL, &noise_fd) == DT_OK ? fdopen(noise_fd, "w") : NULL;
    if (!noise && noise_fd >= 0) close(noise_fd);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    int n = 0;
    while (job->argv[n]) n++;
    char **av = calloc((size_t)n + 8, sizeof *av);
    char resume_flag[16] = "--resume", restarts[48], redone[48];
    int rc = 2, restarts_done = 0;
    long redone_steps = 0;
    const char *resume = job->resume_auto ? "auto" : job->resume;
    for (;;) {
        memcpy(av, job->argv, (size_t)n * sizeof *av);
        int k = n;
        if (resume) { av[k++] = resume_flag; av[k++] = (char *)resume; }
        if (restarts_done) {
            snprintf(restarts, sizeof restarts, "--restarts=%d", restarts_done);
            snprintf(redone, sizeof redone, "--redone-steps=%ld", redone_steps);
            av[k++] = restarts;
            av[k++] = redone;
        }
        av[k] = NULL;
        if (noise) fprintf(noise, "=== attempt %d\n", restarts_done + 1);
        outcome o;
        if (run_attempt(av, &bs, noise, job, &o) != 0) { rc = 2; break; }
        int lost = 0;
        rc = judge(job, &bs, &o, av[0], noise_path, noise, &lost);
        /* nothing of the job outlives it: a launcher killed (from outside, or by us when it did
         * not end) leaves its proxies and ranks, in process groups of their own. Once judged:
         * a guard still ending (it waits a moment after an abort) is no loss of the job's */
        const int leftovers = dt_boards_end_leftovers(&bs);
        if (leftovers && noise) fprintf(noise, "dtrain run: ended %d processes the launcher left\n", leftovers);
        if (rc == 0 || !lost || restarts_done >= job->max_restarts) break;
        /* again, from the newest checkpoint every rank has, or from the start */
        int epoch = 0;
        long step = 0;
        if (job->checkpoint && dt_checkpoint_point(job->checkpoint, job->ranks, &epoch, &step) == 0) {
            resume = job->checkpoint;
        } else if (job->resume && dt_checkpoint_point(job->resume, job->ranks, &epoch, &step) == 0) {
            resume = job->resume;
        } else {
            resume = job->resume; /* no checkpoint yet: from where this run began */
            step = 0;
        }
        redone_steps += o.step > step ? o.step - step : 0;
        restarts_done++;
        if (resume && step > 0)
            fprintf(stderr, "dtrain: restart %d of %d: from checkpoint %s (after epoch %d, step %ld); %ld steps to train again\n",
                    restarts_done, job->max_restarts, resume, epoch, step, o.step > step ? o.step - step : 0);
        else
            fprintf(stderr, "dtrain: restart %d of %d: from the start (no checkpoint yet)\n", restarts_done, job->max_restarts);
        fflush(stderr);
        dt_boards_clear(&bs);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (noise) fclose(noise);
    dt_boards_clear(&bs);
    /* a stop is no failure either: nothing in the launcher's messages to read */
    if (rc == 0 || rc == DT_EXIT_STOPPED) remove_tree(bs.dir);
    free(av);
    free(bs.b);
    return rc;
}
