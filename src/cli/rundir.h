/* Run folders (--run-dir DIR) and the command line a run records: DIR/command.txt, and the
 * user's own argv passed from `dtrain run` to its ranks (whose argv is mpiexec's). */
#ifndef DT_RUNDIR_H
#define DT_RUNDIR_H
#include <stddef.h>
#include "dtrain.h"

/* The environment variable `dtrain run` sets for its ranks: its own command, shell-quoted. */
#define DT_COMMAND_ENV "DTRAIN_COMMAND"

/* argv[0..n) as one line a POSIX shell reads back as the same words ('...' where needed);
 * NULL when out of memory. Caller frees. */
char *dt_shell_quote(char *const *argv, int n);
/* The words of a line dt_shell_quote wrote (NULL-terminated, one allocation: free the array);
 * NULL when it is not such a line. */
char **dt_shell_split(const char *line, int *n);
/* Creates DIR and its parents. A folder whose log.jsonl ends a finished run (a "summary" line)
 * is refused unless resuming (the run would add a second run to it). */
dt_status dt_run_dir_make(const char *dir, int resuming);
/* DIR/command.txt: the command line, shell-quoted, one line (replaced atomically). */
dt_status dt_run_dir_command(const char *dir, char *const *argv, int n);
/* DIR/NAME into out (an error naming --run-dir when it does not fit). */
dt_status dt_run_dir_path(const char *dir, const char *name, char *out, size_t len);

#endif
