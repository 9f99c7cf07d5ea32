/* How dtrain starts ranks on real hosts (dtrain run, dtrain sim calibrate): the launcher
 * ($DTRAIN_MPIEXEC, a command with its own words such as `scripts/netcluster mpiexec`, or
 * mpiexec), told what its kind needs (Open MPI: oversubscription, root), the hosts (--hostfile
 * or --hosts), -n N, then this executable and its subcommand. */
#ifndef DT_CLI_LAUNCH_H
#define DT_CLI_LAUNCH_H

#include "dtrain.h"

#define DT_LAUNCH_WORDS 40

typedef struct dt_launch {
    char *av[DT_LAUNCH_WORDS]; /* the words so far, NULL after the last */
    int n;
    char words[1024], nbuf[16], self[4096], sub[32];
} dt_launch;

/* The words up to and including "SELF SUBCOMMAND"; the caller appends the subcommand's flags
 * (at most DT_LAUNCH_WORDS - n - 1 here, or copies av into a larger list). One line and
 * DT_ERR_ARG when the launcher is missing or broken. */
dt_status dt_launch_begin(dt_launch *l, const char *hostfile, const char *hosts, int ranks, const char *subcommand);

/* A launcher's hostfile (NAME or NAME:SLOTS a line) is a readable regular file (a FIFO is
 * refused, not waited on) naming a host: one that names none would let mpiexec run every rank
 * here, silently. */
dt_status dt_launch_check_hostfile(const char *path);

#endif
