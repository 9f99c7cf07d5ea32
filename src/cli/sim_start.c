/* One simulation of a run (sim_start.h). */
#include "cli/sim_start.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rundir.h"
#include "cli/sim_launch.h"
#include "core/alloc.h"
#include "core/json.h"

/* Debian's libsimgrid-dev: smpirun's launcher, which loads the program as SMPI ranks */
#define SMPIMAIN "/usr/lib/x86_64-linux-gnu/simgrid/smpimain"

/* The platform SimGrid reads, made here for a named one (files on no disk: sim_launch.h), the
 * user's own otherwise. */
static dt_status platform_files(const sim_opts *o, const dt_sim_cluster *cl, int named, double offset_s, FILE *made[2],
                                char *xml, char *hosts, size_t len, char *describe, size_t dlen) {
    if (o->cluster) {
        dt_status st = dt_sim_unnamed_file(&made[0], xml, len);
        if (st == DT_OK) st = dt_sim_unnamed_file(&made[1], hosts, len);
        if (st == DT_OK) st = dt_cluster_write(&o->cf, offset_s, made[0], made[1], describe, dlen);
        for (int i = 0; i < 2 && st == DT_OK; i++)
            if (fflush(made[i]) != 0) st = dt_fail(DT_ERR_IO, "dtrain sim: cannot write the platform in /tmp: %s", strerror(errno));
        return st;
    }
    if (!named) {
        snprintf(xml, len, "%s", o->platform);
        snprintf(hosts, len, "%s", o->hostfile);
        snprintf(describe, dlen, "platform file %s, %d hosts", o->platform, cl->hosts);
        return DT_OK;
    }
    dt_status st = dt_sim_unnamed_file(&made[0], xml, len);
    if (st == DT_OK) st = dt_sim_unnamed_file(&made[1], hosts, len);
    if (st == DT_OK) st = dt_sim_platform_write(cl, made[0], made[1], describe, dlen);
    for (int i = 0; i < 2 && st == DT_OK; i++)
        if (fflush(made[i]) != 0) st = dt_fail(DT_ERR_IO, "dtrain sim: cannot write the platform in /tmp: %s", strerror(errno));
    return st;
}

/* The simulated cluster in figures, for the logs' config line ("sim": what a table or a
 * what-if reads without parsing the description): the platform, hosts, the host links' rate in
 * bits/s and latency (the platform cluster's; null for others), the compute model and speed. */
static dt_status setup_env(const sim_opts *o, const dt_sim_cluster *cl, int named) {
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "platform", o->cluster ? "cluster file" : named ? cl->platform : o->platform);
    if (o->cluster) dt_json_str(&j, "cluster_file", o->cluster);
    dt_json_int(&j, "hosts", cl->hosts);
    const int uniform = named && !o->cluster && !strcmp(cl->platform, "cluster");
    if (uniform) {
        dt_json_num(&j, "link_bps", 8 * cl->link_Bps);
        dt_json_num(&j, "latency_s", cl->latency_s);
    } else {
        dt_json_null(&j, "link_bps");
        dt_json_null(&j, "latency_s");
    }
    dt_json_str(&j, "calibration", o->calibration);
    /* bytes one MPI call moves of a non-blocking sum; null: in the background */
    if (o->calibration && o->cal.progress_bytes > 0) dt_json_num(&j, "progress_bytes_per_call", o->cal.progress_bytes);
    else dt_json_null(&j, "progress_bytes_per_call");
    /* computing seconds a byte arriving while the rank computes takes from it; null: nothing */
    if (o->calibration && o->cal.progress_cpu_per_byte > 0) dt_json_num(&j, "cpu_s_per_byte", o->cal.progress_cpu_per_byte);
    else dt_json_null(&j, "cpu_s_per_byte");
    dt_json_str(&j, "replay", o->replay ? o->replay_abs : NULL);
    dt_json_str(&j, "compute", o->compute ? "modelled" : "measured");
    if (o->compute && !o->cluster) dt_json_num(&j, "speed_flops", o->speed);
    else dt_json_null(&j, "speed_flops");
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    dt_status st = dt_allocated(text);
    if (text) setenv("DTRAIN_SIM_SETUP", text, 1);
    dt_json_free(&j);
    return st;
}

/* What the launcher's list is made of beside its fixed options. */
typedef struct launch_words {
    char *bin, *np, *hostfile, *speed, *xml;
    int modelled;
    char *extra; /* DTRAIN_SIM_CFG's copy, cut into words here */
} launch_words;

/* SMPI's launcher with its options (as smpirun gives them), then train and train's own flags
 * (sim's own, and -n, left out). */
static dt_status launcher_args(dt_sim_argv *av, const launch_words *w, char **argv, char **args, int argc,
                               const dt_flag_list *lists, int nlists, const attempt *a) {
    /* SMPI's own launcher, as smpirun starts it: smpirun would add a line of its own
     * ("Execution failed ...") to a run's one-line error */
    char *fixed[] = {
        getenv("DTRAIN_SMPIMAIN") ? getenv("DTRAIN_SMPIMAIN") : SMPIMAIN, w->bin, "--cfg=smpi/privatization:1", w->np,
        w->hostfile, "--cfg=surf/precision:1e-9", "--cfg=network/model:SMPI", "--cfg=smpi/tmpdir:/tmp", w->speed,
        /* each MPI_Test / MPI_Iprobe would cost 0.1 ms of simulated time: the polling schemes
         * (eventgrad's windows, downpour's server) spent 1,863 s an epoch on it. A poll that
         * finds nothing costs dtrain-sim's own fixed time instead (comm/sim_poll.h), and reading
         * the clock nothing (SMPI's 10 ns a reading made the time depend on how often it was read) */
        "--cfg=smpi/test:0", "--cfg=smpi/iprobe:0", "--cfg=smpi/wtime:0",
        /* collectives chosen as MPICH chooses them (the real runs' MPI): SMPI's default reduced
         * then broadcast a 2-host allreduce, twice the time of MPICH's exchange */
        "--cfg=smpi/coll-selector:mpich",
        /* the network model's corrections (SMPI's defaults were fitted to MPI over TCP on one
         * Grid'5000 cluster: 11.6x the latency of a 64 kB message): a TCP stream carries 1448
         * bytes of every 1538 an Ethernet link sends (0.94), the latency is the links'.
         * scripts/sim-validate measures both on netcluster hosts (docs/simulation.md);
         * DTRAIN_SIM_CFG adds or overrides SimGrid options. */
        "--cfg=smpi/bw-factor:0:0.94", "--cfg=smpi/lat-factor:0:1",
        /* a send returns once its bytes are handed over, as MPICH with UCX sends eagerly up to
         * 1 MB across hosts (dtrain run sets UCX_RNDV_THRESH=1mb): SMPI's default made every
         * send above 64 kB wait for its receiver */
        "--cfg=smpi/send-is-detached-thresh:1048576",
    };
    dt_status st = DT_OK;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && st == DT_OK; i++) st = dt_sim_argv_add(av, fixed[i]);
    for (char *tok = w->extra ? strtok(w->extra, " \t") : NULL; tok && st == DT_OK; tok = strtok(NULL, " \t"))
        st = dt_sim_argv_add(av, tok);
    /* modelled: nothing timed on this CPU */
    if (w->modelled && st == DT_OK) st = dt_sim_argv_add(av, "--cfg=smpi/simulate-computation:no");
    /* SimGrid's set-up chatter off, its warnings on, but not one per rank that exits 2 after the
     * run's own error line; a deadlock's listing of the ranks, for its line (sim_launch.c) */
    char *after[] = {"--log=root.thr:warning", "--log=smpi_kernel.thr:error", "--log=ker_engine.thr:info", w->xml, "train"};
    for (size_t i = 0; i < sizeof after / sizeof after[0] && st == DT_OK; i++) st = dt_sim_argv_add(av, after[i]);
    for (int i = 2; i < argc && st == DT_OK; i++) {
        const dt_flag_list *in = NULL;
        const dt_flag *fl = !strncmp(args[i], "--", 2) ? dt_flags_lookup(lists, nlists, args[i], &in) : NULL;
        /* sim's own (and -n): not train's; a restart's --resume is the restart's */
        if (fl && (in == &lists[nlists - 1] || (a->resume && !strcmp(fl->name, "resume")))) {
            if (!strchr(args[i], '=') && fl->kind != DT_FLAG_SWITCH) i++;
            continue;
        }
        st = dt_sim_argv_add(av, argv[i]);
    }
    char *more[] = {(char *)a->restarts, (char *)a->redone, "--resume", (char *)a->resume};
    const size_t nmore = a->resume ? 4 : 2;
    for (size_t i = 0; a->restart && i < nmore && st == DT_OK; i++) st = dt_sim_argv_add(av, more[i]);
    return st;
}

/* name=v (in fmt) for the ranks when v > 0; otherwise not set */
static void env_positive(const char *name, const char *fmt, double v) {
    char text[32];
    snprintf(text, sizeof text, fmt, v);
    if (v > 0) setenv(name, text, 1);
    else unsetenv(name);
}

/* The simulation itself: the platform's files, the environment the ranks read (core/sim.h),
 * the launcher's list, and its run. Its exit status. */
int dt_sim_start(const sim_opts *o, const dt_sim_cluster *cl, int named, char *bin, char **argv, char **args, int argc,
                    const dt_flag_list *lists, int nlists, int quiet, const attempt *a) {
    char xml[4200] = "", hosts[4200] = "", describe[600] = "";
    FILE *made[2] = {NULL, NULL};
    dt_status st = platform_files(o, cl, named, a->offset_s, made, xml, hosts, sizeof xml, describe, sizeof describe);
    char compute[120], full[5200];
    if (o->cluster) snprintf(compute, sizeof compute, "compute modelled at each group's speed");
    else if (o->compute) snprintf(compute, sizeof compute, "compute modelled at %.4g Gflop/s", o->speed / 1e9);
    else snprintf(compute, sizeof compute, "compute measured on this CPU");
    /* a replay's log is in the sim object: the seeds of one configuration replay each its own */
    snprintf(full, sizeof full, "%s; %s%s%s%s", describe, compute, o->calibration ? "; calibrated by " : "",
             o->calibration ? o->calibration : "", o->replay ? "; a replay (nothing calculated)" : "");
    setenv("DTRAIN_SIM_DESCRIBE", full, 1);
    setenv("DTRAIN_SIM_COMPUTE", o->compute ? "modelled" : "measured", 1);
    /* the bytes an MPI call moves and what a byte crossing while the rank computes costs its
     * core (comm/sim_coll.c), only from a calibration that measured them */
    env_positive("DTRAIN_SIM_PROGRESS_BYTES", "%.0f", o->calibration ? o->cal.progress_bytes : 0);
    env_positive("DTRAIN_SIM_CPU_PER_BYTE", "%.6g", o->calibration ? o->cal.progress_cpu_per_byte : 0);
    if (o->replay) setenv("DTRAIN_SIM_REPLAY", o->replay_abs, 1);
    else unsetenv("DTRAIN_SIM_REPLAY");
    if (st == DT_OK) st = setup_env(o, cl, named);
    char *typed = dt_shell_quote(argv, argc);
    if (typed) setenv(DT_COMMAND_ENV, typed, 1);
    free(typed);
    if (st == DT_OK && !quiet && !a->restart)
        printf("dtrain sim: %s; %s. Times are simulated; --timeout bounds a wait in simulated seconds. Off in simulation: "
               "rank guards, and restarts but for a cluster file's host failures\n", describe, compute);
    /* measured: SMPI times each burst at smpi/host-speed and the hosts run at that speed (1 s
     * of this CPU is 1 simulated s on a host, a straggler's host slower); modelled: the hosts'
     * speed is --speed and nothing is timed */
    char np[64], speed[64], hf[4300], size[16];
    snprintf(np, sizeof np, "--cfg=smpi/np:%d", cl->hosts);
    snprintf(hf, sizeof hf, "--cfg=smpi/hostfile:%s", hosts);
    snprintf(speed, sizeof speed, "--cfg=smpi/host-speed:%.17gf", cl->speed);
    snprintf(size, sizeof size, "%d", cl->hosts);
    setenv("SMPI_GLOBAL_SIZE", size, 1); /* as smpirun sets it */
    launch_words w = {.bin = bin, .np = np, .hostfile = hf, .speed = speed, .xml = xml, .modelled = o->compute};
    /* the calibration's corrections replace the defaults above; DTRAIN_SIM_CFG's come last */
    static char extra[16384];
    if (o->calibration) dt_calib_cfg(&o->cal, extra, sizeof extra);
    if (getenv("DTRAIN_SIM_CFG"))
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s", getenv("DTRAIN_SIM_CFG"));
    if (*extra && !(w.extra = strdup(extra)) && st == DT_OK) st = dt_nomem("SimGrid's extra options");
    dt_sim_argv av = {0};
    if (st == DT_OK) st = launcher_args(&av, &w, argv, args, argc, lists, nlists, a);
    fflush(stdout);
    const int rc = st == DT_OK ? dt_sim_launch(av.v, o->cluster ? o->cluster : named ? o->platform : xml) : dt_cli_fail();
    dt_sim_argv_free(&av);
    free(w.extra);
    for (int i = 0; i < 2; i++)
        if (made[i]) fclose(made[i]);
    return rc;
}
