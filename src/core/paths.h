/* Paths the user names, checked before a run spends time on them. Outputs that dtrain
 * replaces (weights, checkpoints: a new file renamed into place) must be regular files or not
 * exist yet, or the rename would replace a device, a FIFO or a socket with a plain file;
 * inputs must be regular files, or opening a FIFO would wait for a writer forever. */
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

/* Opens path for reading without ever waiting on it (O_NONBLOCK until it is known to be a
 * regular file): anything else is refused in one line naming path. Its size in *size unless
 * size is NULL. */
dt_status dt_open_regular(const char *path, FILE **out, unsigned long long *size);

#endif
