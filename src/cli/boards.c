/* The supervisor's reading of the ranks' boards (boards.h). */
#include "cli/boards.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void dt_boards_map(dt_boards *bs) {
    for (int r = 0; r < bs->n; r++) {
        if (bs->b[r]) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/rank.%d", bs->dir, r);
        /* the job's folder is this process's own, but a board is mapped only as the plain file
         * a rank made: never through a link, never a FIFO (not waited on either) */
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat s;
        if (fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && (size_t)s.st_size >= sizeof(dt_board)) {
            void *p = mmap(NULL, sizeof(dt_board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) bs->b[r] = p;
        }
        close(fd);
        if (bs->b[r] && bs->b[r]->magic != DT_BOARD_MAGIC) { munmap(bs->b[r], sizeof(dt_board)); bs->b[r] = NULL; }
    }
}

void dt_boards_clear(dt_boards *bs) {
    for (int r = 0; r < bs->n; r++) {
        if (bs->b[r]) munmap(bs->b[r], sizeof(dt_board));
        bs->b[r] = NULL;
        char path[4200];
        snprintf(path, sizeof path, "%s/rank.%d", bs->dir, r);
        unlink(path);
    }
}

/* A rank whose watchdog gave up on the very tick that ended a gap in its ticks was stopped
 * and continued (Open MPI's launcher continues the ranks it ends): its wait counted its own
 * stop, so it is not the one whose words tell what the job waited for. */
static int timed_out_after_own_stop(const dt_board *b) {
    const int64_t gap_to = atomic_load(&b->gap_to_ns);
    return atomic_load(&b->state) == DT_RANK_TIMED_OUT && gap_to > 0 && gap_to == atomic_load(&b->tick_ns);
}

/* Did a end before b, as far as the job's cause goes? A rank that aborted itself (SIGABRT:
 * MPI and UCX abort when a peer vanishes) is a consequence of a rank killed from outside, so
 * it comes after one, whatever order their guards happened to see them end in; a rank that
 * timed out once continued from a stop comes after one that timed out waiting for it. */
static int ended_before(const dt_board *a, const dt_board *b) {
    const int a_abort = atomic_load(&a->signal) == SIGABRT, b_abort = atomic_load(&b->signal) == SIGABRT;
    if (a_abort != b_abort) return b_abort;
    const int a_stop = timed_out_after_own_stop(a), b_stop = timed_out_after_own_stop(b);
    if (a_stop != b_stop) return b_stop;
    /* an end no guard saw (0: its guard was killed first) is not known to come first */
    const int64_t a_end = atomic_load(&a->ended_ns), b_end = atomic_load(&b->ended_ns);
    if (!a_end != !b_end) return b_end == 0;
    return a_end < b_end;
}

/* the rank the job lost first (killed by a signal it was not asked to take), or -1 */
int dt_boards_first(const dt_boards *bs, int state) {
    int who = -1;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b) continue;
        const int st = atomic_load(&b->state);
        /* a rank lost with its guard or its launcher's proxy is lost as well */
        if (st != state && !(state == DT_RANK_LOST && (st == DT_RANK_GUARD_LOST || st == DT_RANK_PROXY_LOST))) continue;
        if (who < 0 || ended_before(b, bs->b[who])) who = r;
    }
    return who;
}

long dt_boards_furthest_step(const dt_boards *bs) {
    long s = 0;
    for (int r = 0; r < bs->n; r++)
        if (bs->b[r] && atomic_load(&bs->b[r]->step) > s) s = (long)atomic_load(&bs->b[r]->step);
    return s;
}

/* A board's text field (host, note) as it is printed: its writer may have left no NUL in it
 * (%s would read on past the field, and past the board), and a control byte (a newline)
 * would break the one line the user is given. out holds size + 1 bytes. */
static const char *board_text(const char *field, size_t size, char *out) {
    const size_t n = strnlen(field, size);
    for (size_t i = 0; i < n; i++) out[i] = (unsigned char)field[i] < 0x20 || field[i] == 0x7f ? '?' : field[i];
    out[n] = 0;
    return out;
}
#define HOST_BYTES (sizeof ((const dt_board *)0)->host + 1)
#define NOTE_BYTES (sizeof ((const dt_board *)0)->note + 1)

/* the host a board names, or "?"; out holds HOST_BYTES */
static const char *host_of(const dt_board *b, char *out) { return b->host[0] ? board_text(b->host, HOST_BYTES - 1, out) : "?"; }

static void where(const dt_board *b, char *out, size_t len) {
    const int e = atomic_load(&b->epoch);
    if (e <= 0) snprintf(out, len, "before training started");
    else snprintf(out, len, "during epoch %d, step %lld", e, (long long)atomic_load(&b->step));
}

/* Did the scheme drop rank r for good (rank 0's board says so)? */
static int is_dropped(const dt_boards *bs, int r) {
    const dt_board *b0 = bs->b[0];
    if (!b0) return 0;
    for (int i = 0; i < 8; i++)
        if (atomic_load(&b0->dropped[i]) == r) return 1;
    return 0;
}

/* Ranks a scheme dropped for good (rank 0's board) while every other rank has finished its
 * work: they are stopped or hung, and the job would wait for them forever. */
void dt_boards_end_dropped(dt_boards *bs, FILE *noise) {
    const dt_board *b0 = bs->b[0];
    if (!b0 || atomic_load(&b0->dropped[0]) < 0) return;
    int dropped[8], nd = 0;
    for (int i = 0; i < 8; i++) {
        const int r = atomic_load(&b0->dropped[i]);
        if (r >= 0 && r < bs->n) dropped[nd++] = r;
    }
    for (int r = 0; r < bs->n; r++) {
        if (is_dropped(bs, r)) continue;
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
        if (b->pid > 0) (bs->kill ? bs->kill : kill)((pid_t)b->pid, SIGKILL);
    }
}

/* How each rank ended, into the noise file: what explain() read, for whoever has to check it. */
void dt_boards_record(const dt_boards *bs, FILE *noise) {
    static const char *names[DT_RANK_STATES] = {"starting", "running", "done",      "failed",     "lost",
                                                "timed out", "dropped", "finishing", "guard lost", "proxy lost"};
    if (!noise) return;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b) { fprintf(noise, "dtrain run: rank %d: no board\n", r); continue; }
        const int st = atomic_load(&b->state);
        /* (the watchdog's clock readings, CLOCK_MONOTONIC: what says "stopped" or "busy") */
        fprintf(noise, "dtrain run: rank %d (pid %d): %s, signal %d, exit code %d, ended at %.3f s; watch: tick %.3f, "
                "waiting since %.3f, gap %.3f..%.3f\n", r, (int)b->pid,
                st >= 0 && st < DT_RANK_STATES ? names[st] : "?", (int)atomic_load(&b->signal), (int)atomic_load(&b->exit_code),
                (double)(atomic_load(&b->ended_ns) % 1000000000000LL) / 1e9, (double)atomic_load(&b->tick_ns) / 1e9,
                (double)atomic_load(&b->wait_since_ns) / 1e9, (double)atomic_load(&b->gap_from_ns) / 1e9,
                (double)atomic_load(&b->gap_to_ns) / 1e9);
    }
    fflush(noise);
}

/* What ended an attempt that failed, said in one line (or two, for a stall); 1 when a rank
 * was lost or stalled (a restart may help), 0 when the ranks said why themselves. */
int dt_boards_say_failure(const dt_boards *bs, FILE *err) {
    char note[NOTE_BYTES];
    for (int r = 0; r < bs->n; r++)
        if (bs->b[r] && atomic_load(&bs->b[r]->state) == DT_RANK_FAILED && bs->b[r]->note[0]) {
            fprintf(err, "dtrain: error: %s\n", board_text(bs->b[r]->note, NOTE_BYTES - 1, note));
            return 1;
        }
    return 0;
}

int dt_boards_explain(const dt_boards *bs, const char *noise_path, FILE *err) {
    char at[96], host[HOST_BYTES], note[NOTE_BYTES];
    int who = dt_boards_first(bs, DT_RANK_LOST);
    if (who >= 0) {
        const dt_board *b = bs->b[who];
        where(b, at, sizeof at);
        const int sig = atomic_load(&b->signal), st = atomic_load(&b->state);
        const char *h = host_of(b, host);
        if (st == DT_RANK_GUARD_LOST)
            fprintf(err, "dtrain: error: the guard of rank %d on %s (pid %d) was killed %s, and rank %d (pid %d) ended "
                    "with it; the job was ended (the launcher's and MPI's messages: %s)\n", who, h, (int)b->guard_pid,
                    at, who, (int)b->pid, noise_path);
        else if (st == DT_RANK_PROXY_LOST) {
            /* one launcher's process serves every rank of its host: name them all */
            char ranks[160];
            size_t o = 0;
            int many = 0;
            for (int r = 0; r < bs->n && o < sizeof ranks; r++)
                if (bs->b[r] && bs->b[r]->proxy_pid == b->proxy_pid) {
                    o += (size_t)snprintf(ranks + o, sizeof ranks - o, "%s%d", o ? ", " : "", r);
                    many += o > 0;
                }
            fprintf(err, "dtrain: error: the launcher's process above rank%s %s on %s (pid %d, hydra_pmi_proxy under "
                    "MPICH) was lost %s, and its ranks were ended with it; the job was ended (the launcher's and MPI's "
                    "messages: %s)\n", many > 1 ? "s" : "", ranks, h, (int)b->proxy_pid, at, noise_path);
        }
        else
            fprintf(err, "dtrain: error: rank %d on %s (pid %d) was killed by signal %d (%s) %s; the job was ended "
                    "(the launcher's and MPI's messages: %s)\n", who, h, (int)b->pid, sig, strsignal(sig), at,
                    noise_path);
        return 1;
    }
    who = dt_boards_first(bs, DT_RANK_TIMED_OUT);
    if (who >= 0) {
        fprintf(err, "dtrain: error: %s\n", board_text(bs->b[who]->note, NOTE_BYTES - 1, note));
        /* who the others waited for: a process that stopped altogether (its watchdog stopped
         * ticking well before the first one gave up), or one busy with its own work */
        const int64_t gave_up = atomic_load(&bs->b[who]->tick_ns);
        for (int r = 0; r < bs->n; r++) {
            const dt_board *b = bs->b[r];
            if (!b || r == who) continue;
            /* not ticking when the first gave up: a running rank still stopped, or any rank
             * stopped then and continued since (by its launcher, ending the job: that one may
             * have timed out itself since, its wait counting the stop) */
            const int running = atomic_load(&b->state) == DT_RANK_RUNNING;
            int64_t since = running ? atomic_load(&b->tick_ns) : 0;
            const int64_t gap_from = atomic_load(&b->gap_from_ns), gap_to = atomic_load(&b->gap_to_ns);
            if (gap_from > 0 && gap_from < gave_up && gap_to >= gave_up) since = gap_from;
            /* (gave_up > since first: clocks read from a board may be anything, and the
             * difference of two must not overflow) */
            const int frozen = since > 0 && gave_up > since && gave_up - since > DT_WATCH_GAP_NS;
            if (!frozen && (!running || atomic_load(&b->wait_since_ns) != 0)) continue;
            where(b, at, sizeof at);
            if (frozen)
                fprintf(err, "dtrain: error: rank %d on %s (pid %d) stopped responding %s (for %.0f s before the others "
                        "gave up: the process was stopped or frozen; the launcher's and MPI's messages: %s)\n", r,
                        host_of(b, host), (int)b->pid, at, (double)(gave_up - since) / 1e9, noise_path);
            else
                fprintf(err, "dtrain: error: rank %d on %s (pid %d) was not waiting for anyone %s: stuck in its own "
                        "work (the launcher's and MPI's messages: %s)\n", r, host_of(b, host), (int)b->pid,
                        at, noise_path);
        }
        return 1;
    }
    for (int r = 0; r < bs->n; r++)
        if (bs->b[r] && atomic_load(&bs->b[r]->state) == DT_RANK_FAILED) return 0; /* it said why */
    int seen = 0;
    for (int r = 0; r < bs->n; r++) seen += bs->b[r] != NULL;
    if (seen < bs->n)
        fprintf(err, "dtrain: error: the launcher ended before %d of %d ranks started (its messages: %s)\n",
                bs->n - seen, bs->n, noise_path);
    else
        fprintf(err, "dtrain: error: the job ended without a word from its ranks (the launcher's and MPI's "
                "messages: %s)\n", noise_path);
    return 0;
}

/* Every rank ended well, except those the scheme dropped and we ended: the job completed. */
int dt_boards_completed_with_drops(const dt_boards *bs) {
    const dt_board *b0 = bs->b[0];
    if (!b0 || atomic_load(&b0->dropped[0]) < 0) return 0;
    for (int r = 0; r < bs->n; r++) {
        const int st = bs->b[r] ? atomic_load(&bs->b[r]->state) : -1;
        if (!is_dropped(bs, r) && st != DT_RANK_DONE && st != DT_RANK_FINISHING) return 0;
    }
    return 1;
}

int dt_boards_started(const dt_boards *bs) {
    int n = 0;
    for (int r = 0; r < bs->n; r++)
        n += bs->b[r] && (atomic_load(&bs->b[r]->state) != DT_RANK_STARTING || atomic_load(&bs->b[r]->left_ns) != 0);
    return n;
}

int dt_boards_work_done(const dt_boards *bs) {
    for (int r = 0; r < bs->n; r++)
        if (!is_dropped(bs, r) && !(bs->b[r] && atomic_load(&bs->b[r]->work_done) == 1)) return 0;
    return 1;
}

int dt_boards_signal_ranks(const dt_boards *bs, int sig) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    int sent = 0;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b || b->pid <= 0 || atomic_load(&b->ended_ns) != 0 || strncmp(b->host, host, sizeof b->host) != 0) continue;
        sent += kill((pid_t)b->pid, sig) == 0;
    }
    return sent;
}

int dt_boards_all_exited(const dt_boards *bs, int code) {
    for (int r = 0; r < bs->n; r++)
        if (!bs->b[r] || atomic_load(&bs->b[r]->ended_ns) == 0 || atomic_load(&bs->b[r]->exit_code) != code) return 0;
    return 1;
}

int dt_boards_passed_signal(const dt_boards *bs) {
    int sig = 0;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b || atomic_load(&b->ended_ns) == 0) continue;
        const int st = atomic_load(&b->state), s = atomic_load(&b->signal);
        /* a guard that passed a signal on leaves its rank's state as it was (guard.c) */
        if (st != DT_RANK_STARTING && st != DT_RANK_RUNNING) { if (st != DT_RANK_DONE) return 0; continue; }
        if (s != SIGTERM && s != SIGINT) return 0;
        sig = s;
    }
    return sig;
}

int dt_boards_all_left(const dt_boards *bs) {
    for (int r = 0; r < bs->n; r++)
        if (!is_dropped(bs, r) && !(bs->b[r] && atomic_load(&bs->b[r]->left_ns) != 0)) return 0;
    return 1;
}

char dt_proc_state(int pid) {
    if (pid <= 0) return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close_paren = strrchr(buf, ')'); /* the command name may hold anything */
    return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}

/* 1 when process pid's environment holds exactly `entry` (NAME=VALUE) */
static int has_env(const char *pid_dir, const char *entry) {
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/environ", pid_dir);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    static char env[1 << 16]; /* entries past it are not looked at: DTRAIN_BOARD is set early */
    const ssize_t n = read(fd, env, sizeof env - 1);
    close(fd);
    if (n <= 0) return 0;
    env[n] = 0;
    const size_t len = strlen(entry);
    for (const char *e = env; e < env + n; e += strlen(e) + 1)
        if (!strncmp(e, entry, len) && e[len] == 0) return 1;
    return 0;
}

int dt_boards_end_leftovers(const dt_boards *bs) {
    char entry[4200];
    snprintf(entry, sizeof entry, "DTRAIN_BOARD=%s", bs->dir);
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int ended = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        const long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == (long)getpid() || !has_env(e->d_name, entry)) continue;
        ended += (bs->kill ? bs->kill : kill)((pid_t)pid, SIGKILL) == 0;
    }
    closedir(d);
    return ended;
}

int dt_boards_held(const dt_boards *bs, char *why, size_t len, int *pid) {
    /* first a guard or launcher's process that is stopped, signed or not (a rank that timed
     * out in MPI_Finalize under a stopped proxy signed its board); then an unsigned guard */
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < bs->n; r++) {
            const dt_board *b = bs->b[r];
            if (!b || is_dropped(bs, r)) continue;
            const char g = dt_proc_state(b->guard_pid), p = dt_proc_state(b->proxy_pid);
            char hb[HOST_BYTES];
            const char *host = host_of(b, hb);
            if (g == 'T' || g == 't') {
                snprintf(why, len, "the guard of rank %d on %s (pid %d) was stopped (SIGSTOP)", r, host, (int)b->guard_pid);
                *pid = b->guard_pid;
            } else if (p == 'T' || p == 't') {
                snprintf(why, len, "the launcher's process above rank %d on %s (pid %d, hydra_pmi_proxy under MPICH) was "
                         "stopped (SIGSTOP)", r, host, (int)b->proxy_pid);
                *pid = b->proxy_pid;
            } else if (pass == 1 && atomic_load(&b->ended_ns) == 0 && g) {
                snprintf(why, len, "the guard of rank %d on %s (pid %d) did not end after its rank", r, host, (int)b->guard_pid);
                *pid = b->guard_pid;
            } else {
                continue;
            }
            return r;
        }
    return -1;
}

int dt_boards_frozen(const dt_boards *bs, double limit_s) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, limit = (int64_t)(limit_s * 1e9);
    int who = -1, running = 0;
    int64_t oldest = now;
    for (int r = 0; r < bs->n; r++) {
        const dt_board *b = bs->b[r];
        if (!b || atomic_load(&b->state) != DT_RANK_RUNNING || is_dropped(bs, r)) continue;
        running++;
        const int64_t tick = atomic_load(&b->tick_ns);
        if (tick <= 0 || now - tick <= limit) return -1; /* this one is alive (or has no watchdog) */
        if (tick < oldest) { oldest = tick; who = r; }
    }
    return running ? who : -1;
}

void dt_boards_where(const dt_boards *bs, char *out, size_t len) {
    int best = -1;
    for (int r = 0; r < bs->n; r++)
        if (bs->b[r] && (best < 0 || atomic_load(&bs->b[r]->step) > atomic_load(&bs->b[best]->step))) best = r;
    if (best < 0) snprintf(out, len, "before training started");
    else where(bs->b[best], out, len);
}

void dt_boards_name(const dt_boards *bs, int r, char *out, size_t len) {
    char host[HOST_BYTES];
    const dt_board *b = r >= 0 && r < bs->n ? bs->b[r] : NULL;
    if (!b) snprintf(out, len, "rank %d", r);
    else snprintf(out, len, "rank %d on %s (pid %d)", r, host_of(b, host), (int)b->pid);
}
