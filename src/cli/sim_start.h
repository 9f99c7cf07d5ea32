/* dtrain sim's options, and starting one simulation of a run (sim_start.c): the platform's
 * files, the environment the ranks read (core/sim.h), SMPI's launcher with its options and
 * train's flags, and its run (sim_launch.h). cmd_sim.c reads and checks the options and runs
 * the attempts (a restart after a cluster file's host failure is another simulation). */
#ifndef DT_CLI_SIM_START_H
#define DT_CLI_SIM_START_H

#include "cli/calib_file.h"
#include "cli/sim_cluster.h"
#include "cli/sim_platform.h"
#include "core/flag_table.h"
#include "dtrain.h"

typedef struct sim_opts {
    int ranks;
    double link, latency, speed;
    int compute; /* 0 measured, 1 modelled */
    int link_given, latency_given;
    const char *platform, *hostfile, *straggler, *calibration, *cluster;
    const char *replay;  /* --replay LOG */
    char replay_abs[4096]; /* ... its absolute path, for the ranks */
    int n_given, platform_given, max_restarts;
    int duplex_limit;    /* --duplex-limit: the calibration's both-ways rate as each host's limiter link */
    dt_calibration cal;  /* --calibration's, read */
    dt_cluster_file cf;  /* --cluster's, read */
} sim_opts;

/* One simulation of a run: from which simulated time (a restart after a host failure goes on
 * from it), and what the restart adds to train's flags. */
typedef struct attempt {
    double offset_s;
    int restart;        /* 0: the first simulation, the user's flags as they are */
    const char *resume; /* a restart's checkpoint (NULL: from the start, the user's own --resume) */
    char restarts[32], redone[48];
} attempt;

/* Runs one simulation of the run (bin: dtrain-sim; argv/args: dtrain sim's own, args with -n
 * spelled --n; lists: the flag tables, the last sim's own) and returns its exit status. */
int dt_sim_start(const sim_opts *o, const dt_sim_cluster *cl, int named, char *bin, char **argv, char **args, int argc,
                 const dt_flag_list *lists, int nlists, int quiet, const attempt *a);

#endif
