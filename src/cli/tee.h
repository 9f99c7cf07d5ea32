/* DIR/console.txt of a run folder: everything this process prints to stdout and stderr also
 * goes to a file, while still reaching the terminal. */
#ifndef DT_TEE_H
#define DT_TEE_H
#include "dtrain.h"

/* From now on stdout and stderr are copied (appended) to path too: both become pipes that a
 * thread empties into the original outputs and the file, each stream kept apart. */
dt_status dt_console_tee(const char *path);
/* Flushes, puts stdout and stderr back and copies what is left: everything printed before
 * is in the file when it returns. Safe to call when no tee runs, and again. */
void dt_console_close(void);

#endif
