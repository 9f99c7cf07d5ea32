/* dtrain sim: the ranks of dtrain train on a simulated cluster (docs/simulation.md). The same
 * program compiled with SimGrid's smpicc (dtrain-sim, built beside dtrain) runs under smpirun:
 * each rank is a simulated host of a platform made here (sim_platform.h) or given as a file,
 * every message crosses SimGrid's model of its links, and each rank's compute is either timed
 * on this CPU (measured) or charged as its FLOPs at the host's speed (modelled: the same log
 * on any machine). Time in the log is simulated time. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/calib_file.h"
#include "cli/sim_cluster.h"
#include "cli/supervise.h"
#include "cli/cli.h"
#include "cli/rundir.h"
#include "cli/sim_launch.h"
#include "cli/sim_platform.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
#include "core/alloc.h"
#include "core/paths.h"
#include "dtrain.h"
#include "trainer/trainer.h"

/* Debian's libsimgrid-dev: smpirun's launcher, which loads the program as SMPI ranks */
#define SMPIMAIN "/usr/lib/x86_64-linux-gnu/simgrid/smpimain"

typedef struct sim_opts {
    int ranks;
    double link, latency, speed;
    int compute; /* 0 measured, 1 modelled */
    int link_given, latency_given;
    const char *platform, *hostfile, *straggler, *calibration, *cluster;
    int n_given, platform_given, max_restarts;
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

static const char *const compute_words[] = {"measured", "modelled", NULL};

static const char *parse_rate(const char *text, void *v) { return dt_sim_parse_rate(text, v); }
static const char *parse_time(const char *text, void *v) { return dt_sim_parse_time(text, v); }
/* --speed cpu: measured here by dtrain bench (SPEED_OF_CPU until then) */
#define SPEED_OF_CPU (-1.0)
static const char *parse_speed(const char *text, void *v) {
    if (!strcmp(text, "cpu")) {
        *(double *)v = SPEED_OF_CPU;
        return NULL;
    }
    const char *why = dt_sim_parse_speed(text, v);
    return why ? "cpu (this CPU's, as dtrain bench measures it), or a speed from 1Mf in flop/s such as 30Gf, 2.5Tf or 3e10" : NULL;
}
static void format_rate(const void *v, char *out, size_t len) { snprintf(out, len, "%gMbps", *(const double *)v * 8 / 1e6); }
static void format_time(const void *v, char *out, size_t len) { snprintf(out, len, "%gus", *(const double *)v * 1e6); }
static void format_speed(const void *v, char *out, size_t len) {
    const double x = *(const double *)v;
    if (x == SPEED_OF_CPU) snprintf(out, len, "cpu");
    else snprintf(out, len, "%gGf", x / 1e9);
}

#define S sim_opts
static const dt_flag sim_flags[] = {
    {"n", DT_AT_INT(S, ranks), DT_GIVEN(S, n_given), .min = 1, .max = 65536, .def = "4",
     .help = "number of ranks, each a simulated host (--cluster: the file's)"},
    {"link", DT_AT_CUSTOM(S, link, double, parse_rate, format_rate), DT_GIVEN(S, link_given), .def = "1Gbps", .metavar = "RATE",
     .help = "--platform cluster: each host's link (100Mbps, 1Gbps, 10Gbps; bits bps or bytes Bps)"},
    {"latency", DT_AT_CUSTOM(S, latency, double, parse_time, format_time), DT_GIVEN(S, latency_given), .def = "50us", .metavar = "TIME",
     .help = "--platform cluster: each host link's latency (50us, 1ms)"},
    {"platform", DT_AT_TEXT(S, platform), DT_GIVEN(S, platform_given), .def = "cluster", .metavar = "NAME|FILE",
     .help = "cluster, datacenter, campus-1g, campus-100m, wan, or a SimGrid platform file (with --hostfile)"},
    {"hostfile", DT_AT_TEXT(S, hostfile), .metavar = "FILE",
     .help = "with a platform file: its hosts, rank r on line r"},
    {"compute", DT_AT_CHOICE(S, compute, compute_words), .def = "measured",
     .help = "measured: each burst timed on this CPU; modelled: its FLOPs at --speed (deterministic)"},
    {"speed", DT_AT_CUSTOM(S, speed, double, parse_speed, format_speed), .metavar = "FLOPS|cpu", .zero = "none: give it",
     .help = "--compute modelled: each host's flop/s (30Gf, 2Tf), or cpu: this CPU's, as dtrain bench measures it (not repeatable)"},
    {"straggler", DT_AT_TEXT(S, straggler), .metavar = "RANK:FACTOR",
     .help = "RANK's host FACTOR times slower (a list: 3:4,5:2)"},
    {"cluster", DT_AT_TEXT(S, cluster), .metavar = "FILE",
     .help = "a cluster file: groups of hosts, links, regions, stragglers over time, host failures (docs/simulation.md)"},
    {"max-restarts", DT_AT_INT(S, max_restarts), .min = 0, .max = 1000,
     .help = "--cluster: after a host failure, simulate again from the newest checkpoint, up to N times"},
    {"calibration", DT_AT_TEXT(S, calibration), .metavar = "FILE",
     .help = "what dtrain sim calibrate measured on your hosts: the cluster's links (unless --link, --latency), "
             "SimGrid's corrections, and --speed for its model"},
};
#undef S

/* dtrain-sim: $DTRAIN_SIM_BIN, beside this program (installed), or in sim/ beside it (a build) */
static dt_status find_sim_binary(char *out, size_t len) {
    const char *env = getenv("DTRAIN_SIM_BIN");
    if (env) {
        snprintf(out, len, "%s", env);
        return access(out, X_OK) == 0 ? DT_OK : dt_fail(DT_ERR_ARG, "DTRAIN_SIM_BIN=%s: not an executable", env);
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return dt_fail(DT_ERR_IO, "dtrain sim: cannot find my own executable");
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(out, len, "%s/dtrain-sim", self);
    if (access(out, X_OK) == 0) return DT_OK;
    snprintf(out, len, "%s/sim/dtrain-sim", self);
    if (access(out, X_OK) == 0) return DT_OK;
    return dt_fail(DT_ERR_ARG, "dtrain sim: dtrain-sim not found beside %s (it is built with SimGrid's smpicc: "
                   "apt-get install libsimgrid-dev, then build again)", self);
}

/* --speed cpu: this CPU's, as dtrain bench measures a training step of the model */
static dt_status bench_speed(const char *model, int batch, double *flops) {
    int fd[2];
    if (pipe(fd) != 0) return dt_fail(DT_ERR_IO, "dtrain sim: pipe: %s", strerror(errno));
    char b[16];
    snprintf(b, sizeof b, "%d", batch);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl("/proc/self/exe", "dtrain", "bench", "--model", model, "--batch", b, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char text[2048] = "";
    size_t got = 0;
    ssize_t r;
    while (pid > 0 && got < sizeof text - 1 && (r = read(fd[0], text + got, sizeof text - 1 - got)) > 0) got += (size_t)r;
    text[got] = 0;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    const char *ips = strstr(text, "images_per_s="), *ff = strstr(text, "fwd_flops=");
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !ips || !ff)
        return dt_fail(DT_ERR_ARG, "dtrain sim: --compute modelled: dtrain bench --model %s did not give this CPU's "
                       "speed: give --speed FLOPS", model);
    /* a training step: forward, then backward at twice its FLOPs (core/sim.h charges the same) */
    *flops = atof(ips + 13) * 3 * atof(ff + 10);
    return *flops > 0 ? DT_OK : dt_fail(DT_ERR_ARG, "dtrain sim: dtrain bench measured no speed: give --speed FLOPS");
}


/* Every training rank needs a shard of at least --batch examples: found here, before SimGrid
 * starts thousands of ranks only for each of them to find it out (the trainer's own check,
 * made early on the first examples alone). Schemes with serving ranks are left to the
 * trainer: how many ranks serve is the scheme's to say. */
static dt_status check_shards(const dt_train_config *c, int ranks) {
    const dt_scheme_def *def = dt_scheme_find(c->scheme.name);
    if (ranks < 2 || !def || def->server) return DT_OK;
    const long long want = (long long)ranks * c->batch + c->val;
    long long have = want;
    if (c->train_limit > 0 && c->train_limit < want) have = c->train_limit;
    if (have == want && want <= INT_MAX) {
        char dir[4096];
        dt_data_dir(c->data, c->data_dir, dir, sizeof dir);
        dt_dataset d;
        dt_status st = dt_dataset_load_first(c->data, dir, 1, (int)want, &d);
        dt_model *m = NULL;
        /* a text's examples are windows of the model's context: counted as the trainer cuts them */
        if (st == DT_OK && d.text && (st = dt_model_open(c->model, &m)) == DT_OK)
            st = dt_trainer_fit_data(m, c->model, c->data, &d, NULL);
        have = d.n;
        dt_model_free(m);
        dt_dataset_free(&d);
        if (st != DT_OK) return st;
    }
    if (have >= want) return DT_OK;
    return dt_fail(DT_ERR_ARG, "-n %d: %lld training examples%s leave each rank fewer than --batch %d (a shard of at least "
                   "--batch examples a rank: %lld examples)", ranks, have - c->val, c->val ? " (after --val)" : "", c->batch, want);
}

/* --calibration FILE: the platform cluster's links as measured (unless --link or --latency
 * say otherwise: a what-if keeps the measured corrections), and with modelled compute and no
 * --speed the hosts' speed, when it was measured on the run's model. */
static dt_status apply_calibration(sim_opts *o, const dt_train_flags *f, dt_sim_cluster *cl) {
    dt_status st = dt_calib_read(o->calibration, &o->cal);
    if (st != DT_OK) return st;
    if (strcmp(o->platform, "cluster") != 0)
        return dt_fail(DT_ERR_ARG, "--calibration %s: with --platform cluster (the links it measured are the hosts'; "
                       "--platform %s sets its own)", o->calibration, o->platform);
    if (!o->link_given) cl->link_Bps = o->link = o->cal.rate_bps / 8;
    if (!o->latency_given) cl->latency_s = o->latency = o->cal.latency_s;
    if (o->compute && o->speed == 0) {
        if (o->cal.speed <= 0 || strcmp(o->cal.model, f->c.model) != 0)
            return dt_fail(DT_ERR_ARG, "--calibration %s: its hosts' speed is %s's, not --model %s's: give --speed FLOPS",
                           o->calibration, o->cal.speed > 0 ? o->cal.model : "no model", f->c.model);
        o->speed = o->cal.speed;
    }
    return DT_OK;
}

/* What dtrain checks before SimGrid starts: one line, exit 2, nothing made. */
static dt_status check_inputs(const sim_opts *o, dt_train_flags *f, dt_sim_cluster *cl, int named) {
    struct stat sb;
    if (!named && stat(o->platform, &sb) != 0)
        return dt_fail(DT_ERR_ARG, "--platform %s: expected one of %s, or a SimGrid platform file (none there)", o->platform,
                       dt_sim_platform_names());
    /* the files SimGrid will read: regular (a FIFO would hang it), and values it can simulate */
    dt_status st = named ? DT_OK : dt_sim_check_platform_file(o->platform);
    if (st != DT_OK) return st;
    if (!named && !o->hostfile)
        return dt_fail(DT_ERR_ARG, "--platform %s: a platform file needs --hostfile FILE (its hosts, rank r on line r)", o->platform);
    if (named && o->hostfile)
        return dt_fail(DT_ERR_ARG, "--hostfile %s: only with a platform file (--platform %s names its own hosts)", o->hostfile,
                       o->platform);
    if (o->hostfile && (st = dt_sim_check_hostfile(o->hostfile, f->ranks)) != DT_OK) return st;
    if ((o->link_given || o->latency_given) && strcmp(o->platform, "cluster") != 0)
        return dt_fail(DT_ERR_ARG, "--%s: only with --platform cluster (--platform %s sets its own links)",
                       o->link_given ? "link" : "latency", o->platform);
    if (o->straggler) {
        const char *why = dt_sim_parse_stragglers(o->straggler, cl);
        if (why) return dt_fail(DT_ERR_ARG, "--straggler %s: expected %s", o->straggler, why);
        if (!named) return dt_fail(DT_ERR_ARG, "--straggler: with a platform file, give the slow host its speed there");
    }
    /* a cluster file gives each group its speed: its hosts compute their FLOPs at it */
    if (o->cluster && !o->compute)
        return dt_fail(DT_ERR_ARG, "--cluster %s: with --compute modelled (each group computes at the file's speed)",
                       o->cluster);
    if (o->cluster && o->speed != 0)
        return dt_fail(DT_ERR_ARG, "--speed: --cluster %s gives each group's speed", o->cluster);
    if (o->speed != 0 && !o->compute)
        return dt_fail(DT_ERR_ARG, "--speed: only with --compute modelled (measured compute runs at this CPU's speed)");
    /* modelled compute is a function of the run's flags alone: never a speed timed here unasked */
    if (o->compute && o->speed == 0 && !o->cluster)
        return dt_fail(DT_ERR_ARG, "--compute modelled: give each host's --speed FLOPS (29Gf: a Zen 3 core on cnn1), or "
                       "--speed cpu for this CPU's as dtrain bench measures it (then the run is not repeatable)");
    return DT_OK;
}

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
    dt_json_str(&j, "compute", o->compute ? "modelled" : "measured");
    if (o->compute && !o->cluster) dt_json_num(&j, "speed_flops", o->speed);
    else dt_json_null(&j, "speed_flops");
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    dt_status st = text ? DT_OK : dt_nomem("the simulated cluster's figures");
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

/* The simulation itself: the platform's files, the environment the ranks read (core/sim.h),
 * the launcher's list, and its run. Its exit status. */
static int simulate(const sim_opts *o, const dt_sim_cluster *cl, int named, char *bin, char **argv, char **args, int argc,
                    const dt_flag_list *lists, int nlists, int quiet, const attempt *a) {
    char xml[4200] = "", hosts[4200] = "", describe[600] = "";
    FILE *made[2] = {NULL, NULL};
    dt_status st = platform_files(o, cl, named, a->offset_s, made, xml, hosts, sizeof xml, describe, sizeof describe);
    char compute[120], full[5200];
    if (o->cluster) snprintf(compute, sizeof compute, "compute modelled at each group's speed");
    else if (o->compute) snprintf(compute, sizeof compute, "compute modelled at %.4g Gflop/s", o->speed / 1e9);
    else snprintf(compute, sizeof compute, "compute measured on this CPU");
    snprintf(full, sizeof full, "%s; %s%s%s", describe, compute, o->calibration ? "; calibrated by " : "",
             o->calibration ? o->calibration : "");
    setenv("DTRAIN_SIM_DESCRIBE", full, 1);
    setenv("DTRAIN_SIM_COMPUTE", o->compute ? "modelled" : "measured", 1);
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

/* --cluster FILE: the file says the platform, the hosts' speeds and how many ranks */
static dt_status read_cluster(sim_opts *o, dt_train_flags *f) {
    if (!o->cluster) return o->max_restarts > 0 ? dt_fail(DT_ERR_ARG, "--max-restarts: in simulation, after a host "
                                                          "failure of a cluster file (--cluster FILE)") : DT_OK;
    const char *other = o->platform_given ? "--platform" : o->link_given ? "--link" : o->latency_given ? "--latency"
                        : o->straggler ? "--straggler" : o->hostfile ? "--hostfile" : o->calibration ? "--calibration" : NULL;
    if (other) return dt_fail(DT_ERR_ARG, "--cluster %s: the file describes the cluster: not with %s", o->cluster, other);
    dt_status st = dt_cluster_read(o->cluster, &o->cf);
    if (st != DT_OK) return st;
    if (o->n_given && o->ranks != o->cf.ranks)
        return dt_fail(DT_ERR_ARG, "-n %d: --cluster %s has %d ranks (leave -n out, or give %d)", o->ranks, o->cluster,
                       o->cf.ranks, o->cf.ranks);
    o->ranks = f->ranks = o->cf.ranks;
    return DT_OK;
}

/* Where a failed host's rank says which it was (an unlinked temporary it inherits: nothing to
 * remove however the run ends), read back here */
static dt_status failure_note(FILE **out) {
    char path[] = "/tmp/dtrain-sim-failure.XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return dt_fail(DT_ERR_IO, "dtrain sim: cannot make a file in /tmp: %s", strerror(errno));
    unlink(path);
    if (!(*out = fdopen(fd, "w+"))) {
        close(fd);
        return dt_fail(DT_ERR_IO, "dtrain sim: cannot open a file in /tmp: %s", strerror(errno));
    }
    return DT_OK;
}

/* The run, simulated again after each host failure while --max-restarts allows: from the
 * newest checkpoint every rank has (or the start), the simulated clock going on from the
 * failure, the failed host back (replaced), the log appended to as dtrain run's restarts do. */
static int run_attempts(const sim_opts *o, const dt_sim_cluster *cl, int named, char *bin, char **argv, char **args,
                        int argc, const dt_flag_list *lists, int nlists, const dt_train_flags *f) {
    attempt a = {0};
    long redone = 0;
    for (int restarts = 0;; restarts++) {
        char failures[8192] = "", fdtext[16];
        FILE *note = NULL;
        if (o->cluster) dt_cluster_failures(&o->cf, a.offset_s, failures, sizeof failures);
        if (*failures && failure_note(&note) != DT_OK) return dt_cli_fail();
        if (note) {
            snprintf(fdtext, sizeof fdtext, "%d", fileno(note));
            setenv("DTRAIN_SIM_FAILURES", failures, 1);
            setenv("DTRAIN_SIM_FAILURE_FD", fdtext, 1);
        }
        char offset[40];
        snprintf(offset, sizeof offset, "%.17g", a.offset_s);
        setenv("DTRAIN_SIM_CLOCK_OFFSET", offset, 1);
        const int rc = simulate(o, cl, named, bin, argv, args, argc, lists, nlists, f->c.quiet, &a);
        int rank = -1;
        double at = 0;
        long long step = 0;
        char host[128] = "";
        const int lost = note && rc == 4 && fseek(note, 0, SEEK_SET) == 0 &&
                         fscanf(note, "%d %lf %127s %lld", &rank, &at, host, &step) == 4;
        if (note) fclose(note);
        unsetenv("DTRAIN_SIM_FAILURES");
        unsetenv("DTRAIN_SIM_FAILURE_FD");
        if (!lost || restarts >= o->max_restarts) return rc;
        int epoch = 0;
        long from = 0;
        const char *ck = f->c.checkpoint;
        if (ck && dt_checkpoint_point(ck, o->ranks, &epoch, &from) == 0) a.resume = ck;
        else a.resume = NULL, from = 0;
        redone += step > from ? step - from : 0;
        if (a.resume)
            fprintf(stderr, "dtrain sim: restart %d of %d: from checkpoint %s (after epoch %d, step %ld); %lld steps to train "
                    "again; the simulated clock goes on from %g s\n", restarts + 1, o->max_restarts, ck, epoch, from,
                    step > from ? step - from : 0, at);
        else
            fprintf(stderr, "dtrain sim: restart %d of %d: from the start (no checkpoint yet); the simulated clock goes on "
                    "from %g s\n", restarts + 1, o->max_restarts, at);
        fflush(stderr);
        a.offset_s = at;
        a.restart = 1;
        snprintf(a.restarts, sizeof a.restarts, "--restarts=%d", restarts + 1);
        snprintf(a.redone, sizeof a.redone, "--redone-steps=%ld", redone);
    }
}

int dt_cmd_sim(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[2], "calibrate")) return dt_cmd_sim_calibrate(argc, argv);
    static dt_train_flags f;
    static sim_opts o;
    dt_flag_list lists[DT_TRAIN_LISTS + 1];
    int nlists = dt_train_flag_lists(&f, lists), help = 0;
    lists[nlists++] = (dt_flag_list){.flags = sim_flags, .n = NOPTS(sim_flags), .base = &o};
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) {
        dt_nomem("dtrain sim's %d arguments", argc);
        return dt_cli_fail();
    }
    for (int i = 0; i < argc; i++) args[i] = (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-np")) ? "--n" : argv[i];
    args[argc] = NULL;
    dt_status st = dt_flags_defaults(sim_flags, NOPTS(sim_flags), &o);
    if (st == DT_OK) st = dt_flags_parse_argv("sim", argc, args, 2, lists, nlists, &help);
    if (st == DT_OK && !help) st = read_cluster(&o, &f);
    f.ranks = o.ranks;
    if (help) {
        char help_text[1600];
        dt_usage_with_schemes(help_text, sizeof help_text, "-n N [--platform NAME|FILE] [--link RATE] [--latency TIME] [--compute measured|modelled]\n"
                              "       [--speed FLOPS|cpu] [--straggler RANK:FACTOR] [train flags]\n\n"
                              "Runs N ranks of dtrain train on a simulated cluster (SimGrid SMPI), a host per rank: the log's times\n"
                              "are simulated seconds (docs/simulation.md).");
        dt_flags_help("sim", help_text, lists, nlists);
        free(args);
        return 0;
    }
    if (st == DT_OK) st = dt_scheme_values(&f, NULL);
    if (st == DT_OK) st = dt_run_length(&f);
    if (st == DT_OK) st = dt_local_ranks(&f, "sim", argc, args);
    dt_sim_cluster cl = {.platform = o.platform, .hosts = f.ranks, .link_Bps = o.link, .latency_s = o.latency};
    const int named = dt_sim_platform_known(o.platform);
    if (st == DT_OK && o.calibration) st = apply_calibration(&o, &f, &cl);
    if (st == DT_OK) st = check_inputs(&o, &f, &cl, named);
    char bin[4200];
    if (st == DT_OK) st = find_sim_binary(bin, sizeof bin);
    /* dtrain sweep checks every run's flags before it starts any (src/cli/sweep.c): nothing made */
    const int check_only = getenv("DTRAIN_CHECK_ONLY") != NULL;
    if (st == DT_OK) st = dt_resolve_outputs(&f, 0);
    if (st == DT_OK && !check_only) st = check_shards(&f.c, f.ranks);
    if (st == DT_OK && f.run_dir && !check_only) st = dt_start_run_dir(&f, argv, argc);
    if (st == DT_OK) st = dt_train_check_paths(&f.c, 0);
    if (st == DT_OK && check_only) {
        free(args);
        return 0;
    }
    if (st == DT_OK && o.speed == SPEED_OF_CPU) {
        st = bench_speed(f.c.model, f.c.batch, &o.speed);
        if (st == DT_OK)
            fprintf(stderr, "dtrain sim: --speed %.3gGf: this CPU's, measured by dtrain bench (give it to repeat this run)\n",
                    o.speed / 1e9);
    }
    cl.speed = o.compute && !o.cluster ? o.speed : 1e9; /* measured: a second of this CPU is 1e9 flop, SMPI's unit */
    const int rc = st == DT_OK ? run_attempts(&o, &cl, named, bin, argv, args, argc, lists, nlists, &f) : dt_cli_fail();
    free(args);
    dt_console_close();
    return rc;
}
