/* The supervisor of `dtrain run` and the guard of each rank (supervise.h). */
#include "cli/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/watch.h"
#include "trainer/ckset.h"
#include "trainer/trainer.h"

static int64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------------ the guard */

static void pause_a_second(void) {
    struct timespec ts = {1, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static volatile sig_atomic_t guard_child = 0, guard_forwarded = 0;

static void guard_forward(int sig) {
    guard_forwarded = 1;
    if (guard_child > 0) kill((pid_t)guard_child, sig);
}

/* the rank's number from the launcher's environment (MPICH/hydra, Open MPI, PMIx, Slurm) */
static int launcher_rank(void) {
    const char *names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(names[i]);
        char *end;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0 && r < 1000000) return (int)r;
    }
    return -1;
}

void dt_guard_rank(void) {
    const char *dir = getenv("DTRAIN_BOARD");
    const int rank = dir ? launcher_rank() : -1;
    if (rank < 0 || dt_watch_board_open(dir, rank) != 0) return; /* unsupervised: no guard */
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) return;
    dt_board *b = dt_watch_board();
    if (child == 0) {
        /* the rank: it must not outlive its guard (the launcher ends jobs by ending guards) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        b->pid = (int32_t)getpid();
        return;
    }
    guard_child = child;
    b->pid = (int32_t)child;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = guard_forward;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (int i = 0; i < (int)(sizeof sigs / sizeof sigs[0]); i++) sigaction(sigs[i], &sa, NULL);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    atomic_store(&b->ended_ns, realtime_ns());
    const int state = atomic_load(&b->state);
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        atomic_store(&b->signal, sig);
        /* a signal we passed on is the launcher ending the job, not this rank's loss */
        if (!guard_forwarded && state != DT_RANK_TIMED_OUT && state != DT_RANK_DROPPED) atomic_store(&b->state, DT_RANK_LOST);
        /* A rank that aborted itself (MPI and UCX abort when a peer vanishes) is most often the
         * consequence of another rank's loss. Its guard's exit makes the launcher kill every
         * other guard at once, and on a loaded machine the lost rank's guard may not yet have
         * run to record its loss: wait a moment so the cause is on its board first. */
        if (sig == SIGABRT && !guard_forwarded) pause_a_second();
        _exit(128 + sig);
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    atomic_store(&b->exit_code, code);
    if (state != DT_RANK_TIMED_OUT && state != DT_RANK_DROPPED) atomic_store(&b->state, code == 0 ? DT_RANK_DONE : DT_RANK_FAILED);
    if (code != 0 && !guard_forwarded) pause_a_second(); /* as for an abort, above */
    _exit(code);
}

/* ------------------------------------------------------------------ the boards */

typedef struct boards {
    int n;
    dt_board **b; /* NULL until the rank made its file */
    char dir[4096];
} boards;

static void boards_map(boards *bs) {
    for (int r = 0; r < bs->n; r++) {
        if (bs->b[r]) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/rank.%d", bs->dir, r);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat s;
        if (fstat(fd, &s) == 0 && (size_t)s.st_size >= sizeof(dt_board)) {
            void *p = mmap(NULL, sizeof(dt_board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) bs->b[r] = p;
        }
        close(fd);
        if (bs->b[r] && bs->b[r]->magic != DT_BOARD_MAGIC) { munmap(bs->b[r], sizeof(dt_board)); bs->b[r] = NULL; }
    }
}

static void boards_clear(boards *bs) {
    for (int r = 0; r < bs->n; r++) {
        if (bs->b[r]) munmap(bs->b[r], sizeof(dt_board));
        bs->b[r] = NULL;
        char path[4200];
        snprintf(path, sizeof path, "%s/rank.%d", bs->dir, r);
        unlink(path);
    }
}

/* Did a end before b, as far as the job's cause goes? A rank that aborted itself (SIGABRT:
 * MPI and UCX abort when a peer vanishes) is a consequence of a rank killed from outside, so
 * it comes after one, whatever order their guards happened to see them end in. */
static int ended_before(const dt_board *a, const dt_board *b) {
    const int a_abort = atomic_load(&a->signal) == SIGABRT, b_abort = atomic_load(&b->signal) == SIGABRT;
    if (a_abort != b_abort) return b_abort;
    return atomic_load(&a->ended_ns) < atomic_load(&b->ended_ns);
}

/* the rank the job lost first (killed by a signal it was not asked to take), or -1 */
static int first_with_state(const boards *bs, int state) {
    int who = -1;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b || atomic_load(&b->state) != state) continue;
        if (who < 0 || ended_before(b, bs->b[who])) who = r;
    }
    return who;
}

static long furthest_step(const boards *bs) {
    long s = 0;
    for (int r = 0; r < bs->n; r++)
        if (bs->b[r] && atomic_load(&bs->b[r]->step) > s) s = (long)atomic_load(&bs->b[r]->step);
    return s;
}

static void where(const dt_board *b, char *out, size_t len) {
    const int e = atomic_load(&b->epoch);
    if (e <= 0) snprintf(out, len, "before training started");
    else snprintf(out, len, "during epoch %d, step %lld", e, (long long)atomic_load(&b->step));
}

/* ------------------------------------------------------------------ one attempt */

typedef struct outcome {
    int status;       /* mpiexec's exit status (or 128+signal) */
    int lost;         /* a rank was killed or stalled: worth a restart */
    long step;        /* the furthest step any rank reached */
} outcome;

static volatile sig_atomic_t stop_signal = 0;
static void on_stop(int sig) { stop_signal = sig; }

/* Lines on their way: dtrain's own to the user (each at most once), the launcher's and
 * MPI's into the noise file. */
typedef struct stream {
    int fd;
    int banner;      /* the launcher's banner began: the rest of it is noise */
    int blanks;      /* empty lines held back: they may open the banner */
    char buf[8192];
    size_t len;
    int is_err;
} stream;

typedef struct said {
    char **lines;
    int n, cap;
} said;

static int launcher_line(const char *l) {
    /* hydra's banner after a bad termination, and Open MPI's */
    return l[0] == '=' || !strncmp(l, "YOUR APPLICATION TERMINATED", 27) || !strncmp(l, "   This typically", 17) ||
           !strncmp(l, "----------", 10) || !strncmp(l, "Primary job", 11) || !strncmp(l, "mpiexec", 7) ||
           !strncmp(l, "mpirun", 6) || !strncmp(l, "[proxy:", 7) || !strncmp(l, "[mpiexec@", 9);
}

static void route_line(stream *s, const char *line, size_t n, FILE *noise, said *sd) {
    char l[8200];
    if (n >= sizeof l) n = sizeof l - 1;
    memcpy(l, line, n);
    l[n] = 0;
    if (!s->is_err && launcher_line(l)) s->banner = 1;
    if (!s->is_err && !s->banner && n == 0) { s->blanks++; return; }
    if (!s->is_err && !s->banner) {
        for (; s->blanks > 0; s->blanks--) fputc('\n', stdout);
        fwrite(l, 1, n, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        return;
    }
    if (s->is_err && !strncmp(l, "dtrain: ", 8)) {
        for (int i = 0; i < sd->n; i++)
            if (!strcmp(sd->lines[i], l)) return;
        if (sd->n == sd->cap) {
            int cap = sd->cap ? 2 * sd->cap : 16;
            char **nl = realloc(sd->lines, (size_t)cap * sizeof *nl);
            if (!nl) return;
            sd->lines = nl;
            sd->cap = cap;
        }
        sd->lines[sd->n] = strdup(l);
        if (sd->lines[sd->n]) sd->n++;
        fprintf(stderr, "%s\n", l);
        fflush(stderr);
        return;
    }
    if (noise) { fprintf(noise, "%s\n", l); fflush(noise); }
}

/* reads what is there; returns 0 at end of file */
static int pump(stream *s, FILE *noise, said *sd) {
    ssize_t got = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    if (got < 0 && errno == EINTR) return 1;
    if (got <= 0) {
        if (s->len) route_line(s, s->buf, s->len, noise, sd);
        s->len = 0;
        return 0;
    }
    s->len += (size_t)got;
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->buf[i] == '\n') { route_line(s, s->buf + start, i - start, noise, sd); start = i + 1; }
    if (start == 0 && s->len == sizeof s->buf) { route_line(s, s->buf, s->len, noise, sd); start = s->len; }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    return 1;
}

/* Ranks a scheme dropped for good (rank 0's board) while every other rank has finished its
 * work: they are stopped or hung, and the job would wait for them forever. */
static void end_dropped(boards *bs, FILE *noise) {
    const dt_board *b0 = bs->b[0];
    if (!b0 || atomic_load(&b0->dropped[0]) < 0) return;
    int dropped[8], nd = 0;
    for (int i = 0; i < 8; i++) {
        const int r = atomic_load(&b0->dropped[i]);
        if (r >= 0 && r < bs->n) dropped[nd++] = r;
    }
    for (int r = 0; r < bs->n; r++) {
        int is_dropped = 0;
        for (int i = 0; i < nd; i++) is_dropped |= dropped[i] == r;
        if (is_dropped) continue;
        const int st = bs->b[r] ? atomic_load(&bs->b[r]->state) : -1;
        if (st != DT_RANK_FINISHING && st != DT_RANK_DONE) return;
    }
    for (int i = 0; i < nd; i++) {
        dt_board *b = bs->b[dropped[i]];
        if (!b || atomic_load(&b->state) == DT_RANK_DROPPED) continue;
        const int st = atomic_load(&b->state);
        if (st == DT_RANK_DONE || st == DT_RANK_FAILED || st == DT_RANK_LOST) continue;
        atomic_store(&b->state, DT_RANK_DROPPED);
        if (noise) fprintf(noise, "dtrain run: ending rank %d (pid %d), dropped by the scheme\n", dropped[i], (int)b->pid);
        if (b->pid > 0) kill((pid_t)b->pid, SIGKILL);
    }
}

static int run_attempt(char **av, boards *bs, FILE *noise, outcome *o) {
    memset(o, 0, sizeof *o);
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) {
        fprintf(stderr, "dtrain: error: dtrain run: cannot make pipes: %s\n", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "dtrain: error: dtrain run: cannot fork: %s\n", strerror(errno));
        return -1;
    }
    if (child == 0) {
        setpgid(0, 0); /* the job's own group: ended as one */
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        setenv("DTRAIN_BOARD", bs->dir, 1);
        execvp(av[0], av);
        fprintf(stderr, "dtrain: error: dtrain run: cannot start %s: %s (install mpich, or set DTRAIN_MPIEXEC)\n", av[0],
                strerror(errno));
        _exit(127);
    }
    setpgid(child, child);
    close(out[1]);
    close(err[1]);
    stream s[2] = {{.fd = out[0]}, {.fd = err[0], .is_err = 1}};
    said sd = {0};
    int open_fds = 2, exited = 0, status = 0;
    double lost_at = 0, exited_at = 0;
    int killed_stage = 0;
    for (;;) {
        struct pollfd p[2];
        int np = 0, idx[2];
        for (int i = 0; i < 2; i++)
            if (s[i].fd >= 0) { p[np] = (struct pollfd){.fd = s[i].fd, .events = POLLIN}; idx[np++] = i; }
        int rc = np ? poll(p, (nfds_t)np, 200) : poll(NULL, 0, 200);
        for (int k = 0; rc > 0 && k < np; k++)
            if (p[k].revents && !pump(&s[idx[k]], noise, &sd)) { close(s[idx[k]].fd); s[idx[k]].fd = -1; open_fds--; }
        if (!exited && waitpid(child, &status, WNOHANG) == child) { exited = 1; exited_at = dt_now(); }
        if (exited && (open_fds == 0 || dt_now() - exited_at > 3)) break;
        if (exited) continue;
        if (stop_signal) { kill(-child, (int)stop_signal); stop_signal = 0; }
        boards_map(bs);
        end_dropped(bs, noise);
        /* a lost rank: the launcher should end the job; if it does not, we do */
        if (!lost_at && (first_with_state(bs, DT_RANK_LOST) >= 0 || first_with_state(bs, DT_RANK_TIMED_OUT) >= 0))
            lost_at = dt_now();
        if (lost_at && killed_stage == 0 && dt_now() - lost_at > 10) { kill(-child, SIGTERM); killed_stage = 1; }
        if (lost_at && killed_stage == 1 && dt_now() - lost_at > 15) { kill(-child, SIGKILL); killed_stage = 2; }
    }
    for (int i = 0; i < 2; i++)
        if (s[i].fd >= 0) close(s[i].fd);
    for (int i = 0; i < sd.n; i++) free(sd.lines[i]);
    free(sd.lines);
    boards_map(bs);
    o->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    o->step = furthest_step(bs);
    return 0;
}

/* How each rank ended, into the noise file: what explain() read, for whoever has to check it. */
static void record_boards(const boards *bs, FILE *noise) {
    static const char *names[] = {"starting", "running", "done", "failed", "lost", "timed out", "dropped", "finishing"};
    if (!noise) return;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b) { fprintf(noise, "dtrain run: rank %d: no board\n", r); continue; }
        const int st = atomic_load(&b->state);
        fprintf(noise, "dtrain run: rank %d (pid %d): %s, signal %d, exit code %d, ended at %.3f s\n", r, (int)b->pid,
                st >= 0 && st < 8 ? names[st] : "?", (int)atomic_load(&b->signal), (int)atomic_load(&b->exit_code),
                (double)(atomic_load(&b->ended_ns) % 1000000000000LL) / 1e9);
    }
    fflush(noise);
}

/* What ended an attempt that failed, said in one line (or two, for a stall); 1 when a rank
 * was lost or stalled (a restart may help), 0 when the ranks said why themselves. */
static int explain(const boards *bs, const char *noise_path) {
    char at[96];
    int who = first_with_state(bs, DT_RANK_LOST);
    if (who >= 0) {
        const dt_board *b = bs->b[who];
        where(b, at, sizeof at);
        const int sig = atomic_load(&b->signal);
        fprintf(stderr, "dtrain: error: rank %d on %s (pid %d) was killed by signal %d (%s) %s; the job was ended "
                "(the launcher's and MPI's messages: %s)\n", who, b->host[0] ? b->host : "?", (int)b->pid, sig,
                strsignal(sig), at, noise_path);
        return 1;
    }
    who = first_with_state(bs, DT_RANK_TIMED_OUT);
    if (who >= 0) {
        fprintf(stderr, "dtrain: error: %s\n", bs->b[who]->note);
        /* who the others waited for: a process that stopped altogether (its watchdog stopped
         * ticking well before the first one gave up), or one busy with its own work */
        const int64_t gave_up = atomic_load(&bs->b[who]->tick_ns);
        for (int r = 0; r < bs->n; r++) {
            const dt_board *b = bs->b[r];
            if (!b || atomic_load(&b->state) != DT_RANK_RUNNING) continue;
            const int64_t tick = atomic_load(&b->tick_ns);
            const int frozen = tick > 0 && gave_up - tick > 2500000000LL;
            if (!frozen && atomic_load(&b->wait_since_ns) != 0) continue;
            where(b, at, sizeof at);
            if (frozen)
                fprintf(stderr, "dtrain: error: rank %d on %s (pid %d) stopped responding %s (for %.0f s before the others "
                        "gave up: the process was stopped or frozen; the launcher's and MPI's messages: %s)\n", r,
                        b->host[0] ? b->host : "?", (int)b->pid, at, (double)(gave_up - tick) / 1e9, noise_path);
            else
                fprintf(stderr, "dtrain: error: rank %d on %s (pid %d) was not waiting for anyone %s: stuck in its own "
                        "work (the launcher's and MPI's messages: %s)\n", r, b->host[0] ? b->host : "?", (int)b->pid,
                        at, noise_path);
        }
        return 1;
    }
    for (int r = 0; r < bs->n; r++)
        if (bs->b[r] && atomic_load(&bs->b[r]->state) == DT_RANK_FAILED) return 0; /* it said why */
    int seen = 0;
    for (int r = 0; r < bs->n; r++) seen += bs->b[r] != NULL;
    if (seen < bs->n)
        fprintf(stderr, "dtrain: error: the launcher ended before %d of %d ranks started (its messages: %s)\n",
                bs->n - seen, bs->n, noise_path);
    else
        fprintf(stderr, "dtrain: error: the job ended without a word from its ranks (the launcher's and MPI's "
                "messages: %s)\n", noise_path);
    return 0;
}

/* Every rank ended well, except those the scheme dropped and we ended: the job completed. */
static int completed_with_drops(const boards *bs) {
    const dt_board *b0 = bs->b[0];
    if (!b0 || atomic_load(&b0->dropped[0]) < 0) return 0;
    for (int r = 0; r < bs->n; r++) {
        int dropped = 0;
        for (int i = 0; i < 8; i++) dropped |= atomic_load(&b0->dropped[i]) == r;
        const int st = bs->b[r] ? atomic_load(&bs->b[r]->state) : -1;
        if (!dropped && st != DT_RANK_DONE && st != DT_RANK_FINISHING) return 0;
    }
    return 1;
}

/* The newest checkpoint every rank has (the committed set its manifest names, or one
 * process's file): its epoch and step, the restart's starting point. */
static int checkpoint_point(const char *path, int ranks, int *epoch, long *step) {
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
    int ok = prog && prog->numel == 2 && prog->data[0] >= 1 && prog->data[0] <= 1e6f && prog->data[1] >= 0 &&
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

int dt_supervise(const dt_job *job) {
    boards bs = {.n = job->ranks};
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
    FILE *noise = fopen(noise_path, "w");
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
    const char *resume = job->resume;
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
        if (run_attempt(av, &bs, noise, &o) != 0) { rc = 2; break; }
        if (o.status == 0) { rc = 0; break; }
        if (completed_with_drops(&bs)) { rc = 0; break; }
        record_boards(&bs, noise);
        const int lost = explain(&bs, noise_path);
        rc = lost ? 4 : (o.status == 3 ? 3 : 2);
        if (!lost || restarts_done >= job->max_restarts) break;
        /* again, from the newest checkpoint every rank has, or from the start */
        int epoch = 0;
        long step = 0;
        if (job->checkpoint && checkpoint_point(job->checkpoint, job->ranks, &epoch, &step) == 0) {
            resume = job->checkpoint;
        } else if (job->resume && checkpoint_point(job->resume, job->ranks, &epoch, &step) == 0) {
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
        boards_clear(&bs);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (noise) fclose(noise);
    boards_clear(&bs);
    if (rc == 0) remove_tree(bs.dir);
    free(av);
    free(bs.b);
    return rc;
}
