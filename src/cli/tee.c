/* The console copy (tee.h). A thread, not a child process: the tee may start after MPI is
 * initialised, where fork() is not safe with every transport. */
#define _GNU_SOURCE /* pipe2 */
#include "cli/tee.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/paths.h"

static struct {
    int on;
    int orig[2];      /* the process's own stdout and stderr, kept */
    int pipe_rd[2];   /* what it prints now, read here */
    int stop[2];      /* a byte here: the writers are gone, drain and end */
    int file;
    pthread_t thread;
} con = {.file = -1};

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a terminal that is gone or a full disk: the run goes on */
        p += w;
        n -= (size_t)w;
    }
}

/* Copies what one pipe holds; 0 at its end (or error). */
static int copy_once(int k) {
    char buf[8192];
    const ssize_t n = read(con.pipe_rd[k], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
    if (n <= 0) return 0;
    write_all(con.orig[k], buf, (size_t)n);
    write_all(con.file, buf, (size_t)n);
    return 1;
}

static void *pump(void *arg) {
    (void)arg;
    int open_pipes[2] = {1, 1};
    for (;;) {
        struct pollfd p[3] = {{con.pipe_rd[0], POLLIN, 0}, {con.pipe_rd[1], POLLIN, 0}, {con.stop[0], POLLIN, 0}};
        for (int k = 0; k < 2; k++) if (!open_pipes[k]) p[k].fd = -1;
        if (poll(p, 3, -1) < 0) { if (errno == EINTR) continue; break; }
        for (int k = 0; k < 2; k++)
            if (p[k].revents && !copy_once(k)) open_pipes[k] = 0;
        if (p[2].revents) break;
    }
    /* stopped: what is still in the pipes was printed before dt_console_close; children may
     * still hold the pipes open, so read without waiting */
    for (int k = 0; k < 2; k++) {
        fcntl(con.pipe_rd[k], F_SETFL, fcntl(con.pipe_rd[k], F_GETFL) | O_NONBLOCK);
        char buf[8192];
        for (ssize_t n; (n = read(con.pipe_rd[k], buf, sizeof buf)) > 0;) {
            write_all(con.orig[k], buf, (size_t)n);
            write_all(con.file, buf, (size_t)n);
        }
    }
    return NULL;
}

dt_status dt_console_tee(const char *path) {
    if (con.on) return DT_OK;
    /* appended (a resumed run adds to it), and never through a symbolic link planted at its
     * name: the run folder's files are dtrain's own */
    dt_status st = dt_open_own(path, O_APPEND, &con.file);
    if (st != DT_OK) return st;
    int p[2][2];
    fflush(stdout);
    fflush(stderr);
    int ok = pipe2(p[0], O_CLOEXEC) == 0;
    if (ok && pipe2(p[1], O_CLOEXEC) != 0) { close(p[0][0]); close(p[0][1]); ok = 0; }
    if (ok && pipe2(con.stop, O_CLOEXEC) != 0) { for (int k = 0; k < 2; k++) { close(p[k][0]); close(p[k][1]); } ok = 0; }
    if (!ok) { close(con.file); con.file = -1; return dt_fail(DT_ERR_IO, "%s: cannot make a pipe: %s", path, strerror(errno)); }
    for (int k = 0; k < 2; k++) {
        con.orig[k] = fcntl(k + 1, F_DUPFD_CLOEXEC, 3);
        con.pipe_rd[k] = p[k][0];
        dup2(p[k][1], k + 1);
        close(p[k][1]);
    }
    /* the thread takes no signal: a supervisor's Ctrl-C must interrupt its own waits */
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    const int failed = pthread_create(&con.thread, NULL, pump, NULL) != 0;
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (failed) {
        for (int k = 0; k < 2; k++) { dup2(con.orig[k], k + 1); close(con.orig[k]); close(con.pipe_rd[k]); }
        close(con.stop[0]); close(con.stop[1]); close(con.file); con.file = -1;
        return dt_fail(DT_ERR_IO, "%s: cannot start the console copy", path);
    }
    con.on = 1;
    atexit(dt_console_close);
    return DT_OK;
}

void dt_console_close(void) {
    if (!con.on) return;
    con.on = 0;
    fflush(stdout);
    fflush(stderr);
    for (int k = 0; k < 2; k++) dup2(con.orig[k], k + 1); /* the pipes' write ends go */
    const char b = 1;
    write_all(con.stop[1], &b, 1);
    pthread_join(con.thread, NULL);
    for (int k = 0; k < 2; k++) { close(con.orig[k]); close(con.pipe_rd[k]); }
    close(con.stop[0]); close(con.stop[1]);
    fsync(con.file);
    close(con.file);
    con.file = -1;
}
