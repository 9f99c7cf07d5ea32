/* Paths the user names, checked before a run spends time on them (paths.c), and the one way
 * to open them (files.c). Outputs that dtrain replaces (weights, checkpoints: a new file
 * renamed into place) must be regular files or not exist yet, or the rename would replace a
 * device, a FIFO or a socket with a plain file; inputs must be regular files, or opening a
 * FIFO would wait for a writer forever. A file dtrain creates is created new, never through
 * a symbolic link found at its name. */
#ifndef DT_PATHS_H
#define DT_PATHS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "dtrain.h"

/* "a directory", "a FIFO", "a character device", ... for a mode that is not a regular file;
 * NULL for a regular file. */
const char *dt_node_kind(mode_t mode);

/* An output: refused in one line naming flag and path when it is a directory, a node that is
 * not a regular file (unless in_place: --log writes a character device or a FIFO as it is),
 * or its folder cannot take a new file. */
dt_status dt_check_output(const char *flag, const char *path, int in_place);

/* An output of `bytes` bytes written beside path: refused when the folder's file system has
 * less room than that (so a full disk stops the run before its training, not after). */
dt_status dt_check_room(const char *flag, const char *path, size_t bytes);

/* An input: refused when it exists and is not a regular file (a missing one is the reader's
 * to report, with the reason). */
dt_status dt_check_input(const char *flag, const char *path);

/* The folder of path ("." when it has none) into dir. */
void dt_path_folder(const char *path, char *dir, size_t len);

/* ---- files.c: every reader and writer of a file goes through these */

/* Opens path for reading without ever waiting on it (O_NONBLOCK until it is known to be a
 * regular file): anything else is refused in one line naming path. Its size in *size unless
 * size is NULL. */
dt_status dt_open_regular(const char *path, FILE **out, unsigned long long *size);
/* The same as a file descriptor (for gzdopen), closed by the caller. */
dt_status dt_open_regular_fd(const char *path, int *fd, unsigned long long *size);

/* Opens a file dtrain names itself for writing (a temporary, a run folder's console.txt):
 * how is O_EXCL (created new) or O_APPEND (created or added to). A symbolic link at that name
 * is refused, never followed, and so is a node that is not a regular file (a FIFO is not
 * waited on); one line naming path. The descriptor in *fd. */
dt_status dt_open_own(const char *path, int how, int *fd);

/* Creates path atomically from the bytes a callback writes to a FILE*: a temporary
 * PATH.tmp.PID.RANDOM beside it (12 random letters or digits: a name nobody can plant
 * anything at in advance), created new (O_EXCL, never through a link), synced, renamed into
 * place, and the folder synced. A path that exists and is not a regular file is refused,
 * never replaced. Its owner can always read and write it (0644 or 0600 with the group's and
 * others' bits as the umask says: umask 0777 gives 0600, not a file its owner cannot read). */
dt_status dt_write_atomic(const char *path, dt_status (*fill)(void *ctx, void *file), void *ctx);

/* 1 when pid_text (what follows ".tmp." in a temporary file's name: PID.RANDOM, or an older
 * build's PID) names a process that is gone and not this one: that writer was killed, its
 * file is stale. */
int dt_tmp_writer_gone(const char *pid_text);

/* Removes path's temporaries PATH.tmp.PID[.RANDOM] whose writer is gone (dt_tmp_writer_gone). */
void dt_remove_stale_tmp(const char *path);

#endif
