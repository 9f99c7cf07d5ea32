/* One way to open an input and one way to create an output (paths.h). Every reader of a file
 * a user can name goes through dt_open_regular(_fd); every writer through dt_write_atomic (a
 * whole file renamed into place) or dt_open_own (a file dtrain names itself, appended to). */
#include "core/alloc.h"
#include "core/paths.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

dt_status dt_open_regular_fd(const char *path, int *out, unsigned long long *size) {
    *out = -1;
    /* O_NONBLOCK: opening a FIFO would wait for a writer; O_NOCTTY: a terminal named as a
     * file must not become ours */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    const int flags = fcntl(fd, F_GETFL);
    dt_status st = DT_OK;
    if (fstat(fd, &sb) != 0) st = dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = dt_fail(DT_ERR_IO, "%s: is %s, expected a regular file", path, dt_node_kind(sb.st_mode));
    else if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (st != DT_OK) { close(fd); return st; }
    if (size) *size = (unsigned long long)sb.st_size;
    *out = fd;
    return DT_OK;
}

dt_status dt_open_regular(const char *path, FILE **out, unsigned long long *size) {
    *out = NULL;
    int fd;
    dt_status st = dt_open_regular_fd(path, &fd, size);
    if (st != DT_OK) return st;
    if (!(*out = fdopen(fd, "rb"))) {
        st = dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return st;
}

dt_status dt_open_own(const char *path, int how, int *out) {
    *out = -1;
    /* O_NONBLOCK while opening: a FIFO at that name is refused below, not waited on */
    const int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | how, 0644);
    if (fd < 0) {
        const int e = errno;
        struct stat lb;
        const int found = (e == ELOOP || e == EEXIST) && lstat(path, &lb) == 0;
        if (found && S_ISLNK(lb.st_mode))
            return dt_fail(DT_ERR_IO, "%s: is a symbolic link (dtrain writes its own files only as files, never through "
                           "a link)", path);
        if (e == EEXIST)
            return dt_fail(DT_ERR_IO, "%s: exists (%s), expected no file of that name (dtrain creates it new)", path,
                           !found ? "?" : S_ISREG(lb.st_mode) ? "a regular file" : dt_node_kind(lb.st_mode));
        return dt_fail(DT_ERR_IO, "%s: cannot create: %s", path, strerror(e));
    }
    struct stat sb;
    const int flags = fcntl(fd, F_GETFL);
    dt_status st = DT_OK;
    if (fstat(fd, &sb) != 0 || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = dt_fail(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = dt_fail(DT_ERR_IO, "%s: is %s, expected a regular file", path, dt_node_kind(sb.st_mode));
    if (st != DT_OK) { close(fd); return st; }
    *out = fd;
    return DT_OK;
}

/* A temporary's name is PATH.tmp.PID.RANDOM: the pid says whether its writer still runs (a
 * killed writer's file is removed later), the random part makes the name unguessable, so
 * nothing can be planted at it in advance. Older builds named it PATH.tmp.PID. */
#define TMP_RANDOM 12

int dt_tmp_writer_gone(const char *pid_text) {
    char *end = NULL;
    const long pid = strtol(pid_text, &end, 10);
    if (end == pid_text || pid <= 0 || pid == (long)getpid()) return 0;
    if (*end == '.') { /* this build's: the random part, whole */
        size_t k = 1;
        while (isalnum((unsigned char)end[k])) k++;
        if (k != TMP_RANDOM + 1 || end[k]) return 0;
    } else if (*end) {
        return 0;
    }
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Temporary files PATH.tmp.PID[.RANDOM] left by a writer that was killed (its process is
 * gone) are removed before the next write of PATH; one whose process still runs is left alone. */
void dt_remove_stale_tmp(const char *path) {
    char dir[4096];
    dt_path_folder(path, dir, sizeof dir);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp.", 5) != 0) continue;
        if (!dt_tmp_writer_gone(e->d_name + blen + 5)) continue;
        char stale[4096 + 256];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        unlink(stale);
    }
    closedir(d);
}

/* TMP_RANDOM letters and digits from the kernel's random source; from the clock, the pid and
 * a counter where it has none (still not a name anyone can plant in advance at a useful time). */
static void random_part(char *out) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static unsigned long long counter;
    unsigned char bytes[TMP_RANDOM];
    if (getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != (ssize_t)sizeof bytes) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x = (unsigned long long)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (unsigned long long)ts.tv_sec ^
                               ((unsigned long long)getpid() << 32) ^ ++counter;
        for (size_t i = 0; i < sizeof bytes; i++) {
            x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32;
            bytes[i] = (unsigned char)x;
        }
    }
    for (size_t i = 0; i < sizeof bytes; i++) out[i] = abc[bytes[i] % (sizeof abc - 1)];
    out[TMP_RANDOM] = 0;
}

/* Creates path's temporary under a new unguessable name (O_CREAT | O_EXCL: never through a
 * symbolic link or into anything found there; a name taken, which only a planted file can
 * do, is passed over for another). The owner may always read and write it: it is read back,
 * and a checkpoint or weights file its owner cannot read is lost work (umask 0777 would
 * give mode 000); the group's and others' bits follow the umask. */
static dt_status create_temp(const char *path, char *tmp, size_t len, int *fd) {
    for (int attempt = 0; attempt < 100; attempt++) {
        char part[TMP_RANDOM + 1];
        random_part(part);
        if ((size_t)snprintf(tmp, len, "%s.tmp.%ld.%s", path, (long)getpid(), part) >= len)
            return dt_fail(DT_ERR_IO, "%s: the path is too long", path);
        *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (*fd < 0 && errno == EEXIST) continue;
        if (*fd < 0) return dt_fail(DT_ERR_IO, "%s: cannot create file beside it: %s", path, strerror(errno));
        struct stat sb;
        if (fstat(*fd, &sb) == 0 && (sb.st_mode & 0600) != 0600) (void)fchmod(*fd, (sb.st_mode & 07777) | 0600);
        return DT_OK;
    }
    return dt_fail(DT_ERR_IO, "%s: cannot create a temporary file beside it: 100 names were taken", path);
}

/* The temporary is written, synced and renamed into place: a reader finds the old file or the
 * whole new one. Its name cannot be known in advance (create_temp), so nothing planted there
 * makes the write fail after a run's work, or redirects it. */
dt_status dt_write_atomic(const char *path, dt_status (*fill)(void *ctx, void *file), void *ctx) {
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return dt_fail(DT_ERR_IO, "%s: is %s, expected a regular file (it would be replaced)", path, dt_node_kind(sb.st_mode));
    dt_remove_stale_tmp(path);
    const size_t tlen = strlen(path) + 64;
    char *tmp = malloc(tlen);
    if (!tmp) return dt_nomem("the temporary name of %s", path);
    int fd = -1;
    dt_status st = create_temp(path, tmp, tlen, &fd);
    FILE *f = st == DT_OK ? fdopen(fd, "wb") : NULL;
    if (st == DT_OK && !f) {
        st = dt_fail(DT_ERR_IO, "%s: cannot open its temporary file: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
    }
    if (!f) {
        free(tmp);
        return st;
    }
    st = fill(ctx, f);
    if (st == DT_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        st = dt_fail(DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (fclose(f) != 0 && st == DT_OK)
        st = dt_fail(DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (st == DT_OK && rename(tmp, path) != 0)
        st = dt_fail(DT_ERR_IO, "%s: cannot rename temporary file into place: %s", path, strerror(errno));
    if (st != DT_OK) unlink(tmp);
    free(tmp);
    if (st == DT_OK) {
        /* the rename itself is durable only once the folder is synced */
        char dir[4096];
        dt_path_folder(path, dir, sizeof dir);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fsync(dfd) != 0) st = dt_fail(DT_ERR_IO, "%s: cannot sync its folder %s: %s", path, dir, strerror(errno));
        if (dfd >= 0) close(dfd);
    }
    return st;
}
