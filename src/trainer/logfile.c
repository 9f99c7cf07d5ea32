/* The --log file: opened to append (a resumed run continues its log), refused when it is not
 * a dtrain log, and written a whole, synced line at a time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/paths.h"
#include "trainer/trainer.h"

/* Whether an existing regular file may be appended to as a run's log: empty, or a dtrain log
 * (its first line a JSON object whose "type" is "config", as dt_trainer_log_config writes it
 * first). Anything else (a typo'd --log README.md) is refused, never appended to. */
dt_status dt_check_log(const char *path) {
    struct stat sb;
    /* a device or a FIFO is written in place, never opened here (a FIFO's writer, a tty) */
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return DT_OK;
    int fd;
    if (dt_open_regular_fd(path, &fd, NULL) != DT_OK) return DT_OK; /* not readable: opening it to write will say */
    char head[4096];
    const ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    if (n <= 0) return DT_OK; /* empty */
    head[n] = 0;
    char *nl = strchr(head, '\n');
    if (nl) *nl = 0;
    const char *p = head + strspn(head, " \t");
    if (*p == '{' && strstr(p, "\"type\":\"config\"")) return DT_OK;
    return dt_fail(DT_ERR_ARG, "--log %s: exists and is not a dtrain log (its first line is not a \"config\" line); "
                   "a log is appended to, so name a new file or a log of an earlier run", path);
}

/* The run folder's own log (--run-dir without --log): dtrain named it, so a symbolic link
 * planted there is refused, never followed, as for its console.txt; a --log the user names is
 * opened as named (--log /dev/stdout is a link). */
static int own_log(const dt_train_config *c) {
    char own[4200];
    const int n = c->run_dir ? snprintf(own, sizeof own, "%s/log.jsonl", c->run_dir) : -1;
    return n > 0 && (size_t)n < sizeof own && !strcmp(own, c->log_path);
}

/* Opens --log to append: a resumed or restarted run (dtrain run --max-restarts) adds its own
 * config line and its epochs after the earlier ones (a reader takes, per epoch, the last line);
 * a character device (/dev/null) or a FIFO is written as it is, in place. O_NONBLOCK while
 * opening: a FIFO nobody reads is refused, not waited on. */
static dt_status open_log(dt_trainer *t) {
    const char *path = t->cfg->log_path;
    dt_status st = dt_check_log(path);
    if (st != DT_OK) return st;
    const int own = own_log(t->cfg);
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC | (own ? O_NOFOLLOW : 0), 0644);
    if (fd < 0 && own && errno == ELOOP)
        return dt_fail(DT_ERR_IO, "--run-dir %s: its log %s is a symbolic link (dtrain writes its own files only as "
                       "files, never through a link)", t->cfg->run_dir, path);
    if (fd < 0 && errno == ENXIO)
        return dt_fail(DT_ERR_IO, "--log %s: a FIFO that no process reads (start its reader first)", path);
    if (fd < 0) return dt_fail(DT_ERR_IO, "--log %s: cannot create: %s", path, strerror(errno));
    struct stat sb;
    const int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &sb) != 0 || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = dt_fail(DT_ERR_IO, "--log %s: cannot open: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode) && !S_ISCHR(sb.st_mode) && !S_ISFIFO(sb.st_mode))
        st = dt_fail(DT_ERR_IO, "--log %s: is %s, expected a regular file, a character device or a FIFO", path,
                     dt_node_kind(sb.st_mode));
    if (st != DT_OK) { close(fd); return st; }
    /* a FIFO whose reader left must fail the write (EPIPE, one line), not kill the process */
    if (S_ISFIFO(sb.st_mode)) signal(SIGPIPE, SIG_IGN);
    t->log_fd = fd;
    t->log_in_place = !S_ISREG(sb.st_mode);
    return DT_OK;
}

/* The log grows a line at a time: each line goes out whole (written again from where a
 * partial write stopped) to a file opened for appending and is synced, so the file is always
 * whole lines, whatever happens to the run; a line that cannot be written whole (a full disk)
 * is cut back off the file, and the error names the cause. */
dt_status dt_trainer_log(dt_trainer *t, const char *line) {
    if (!t->cfg->log_path || t->comm.rank != 0) return DT_OK;
    dt_status st = t->log_fd < 0 ? open_log(t) : DT_OK;
    if (st != DT_OK) return st;
    const size_t n = strlen(line) + 1;
    char *buf = malloc(n);
    if (!buf) return dt_nomem("a %zu-byte log line", n);
    memcpy(buf, line, n - 1);
    buf[n - 1] = '\n';
    struct stat sb;
    const off_t before = !t->log_in_place && fstat(t->log_fd, &sb) == 0 ? sb.st_size : -1;
    size_t done = 0;
    int err = 0;
    while (done < n && !err) {
        const ssize_t w = write(t->log_fd, buf + done, n - done);
        if (w > 0) done += (size_t)w;
        else if (w == 0) err = EIO; /* no progress and no reason: do not spin */
        else if (errno != EINTR) err = errno;
    }
    free(buf);
    if (!err && !t->log_in_place && fsync(t->log_fd) != 0) err = errno;
    if (!err) return DT_OK;
    if (before >= 0 && ftruncate(t->log_fd, before) != 0)
        return dt_fail(DT_ERR_IO, "--log %s: write failed: %s, and the partial line could not be cut off: %s",
                       t->cfg->log_path, strerror(err), strerror(errno));
    return dt_fail(DT_ERR_IO, "--log %s: write failed: %s", t->cfg->log_path, strerror(err));
}
