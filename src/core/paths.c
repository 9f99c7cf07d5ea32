/* Paths the user names, checked before a run spends time on them (paths.h). */
#include "core/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

void dt_path_folder(const char *path, char *dir, size_t len) {
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, len, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
}

const char *dt_node_kind(mode_t mode) {
    if (S_ISREG(mode)) return NULL;
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

dt_status dt_check_output(const char *flag, const char *path, int in_place) {
    struct stat sb;
    const int exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        return dt_fail(DT_ERR_ARG, "%s %s: is a directory, expected a file name", flag, path);
    if (exists && !S_ISREG(sb.st_mode)) {
        if (in_place && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))) return DT_OK; /* written as it is */
        return dt_fail(DT_ERR_ARG, "%s %s: is %s, expected a regular file (dtrain writes a new file and renames it "
                       "into place, which would replace it)", flag, path, dt_node_kind(sb.st_mode));
    }
    char dir[4096];
    dt_path_folder(path, dir, sizeof dir);
    if (access(dir, W_OK | X_OK) != 0)
        return dt_fail(DT_ERR_IO, "%s %s: cannot create a file in %s: %s", flag, path, dir, strerror(errno));
    if (exists && access(path, W_OK) != 0) return dt_fail(DT_ERR_IO, "%s %s: cannot write: %s", flag, path, strerror(errno));
    return DT_OK;
}

dt_status dt_check_room(const char *flag, const char *path, size_t bytes) {
    char dir[4096];
    dt_path_folder(path, dir, sizeof dir);
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0) return DT_OK; /* unknown: the write itself will tell */
    /* the new file is written beside the old one before the rename: the old one's room does not count */
    const unsigned long long room = (unsigned long long)vs.f_bavail * vs.f_frsize;
    if (room < bytes)
        return dt_fail(DT_ERR_IO, "%s %s: needs %zu bytes, %s has %llu free (No space left on device)", flag, path,
                       bytes, dir, room);
    return DT_OK;
}

dt_status dt_check_input(const char *flag, const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return dt_fail(DT_ERR_ARG, "%s %s: is %s, expected a regular file", flag, path, dt_node_kind(sb.st_mode));
    return DT_OK;
}
