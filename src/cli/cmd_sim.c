/* dtrain sim: the ranks of dtrain train on a simulated cluster (docs/simulation.md). The same
 * program compiled with SimGrid's smpicc (dtrain-sim, built beside dtrain) runs under smpirun:
 * each rank is a simulated host of a platform made here (sim_platform.h) or given as a file,
 * every message crosses SimGrid's model of its links, and each rank's compute is either timed
 * on this CPU (measured) or charged as its FLOPs at the host's speed (modelled: the same log
 * on any machine). Time in the log is simulated time. Here: the flags, what is checked before
 * SimGrid starts, a calibration (calib_file.h) or cluster file (sim_cluster.h) read, and the
 * attempts: one simulation (sim_start.h), another after each host failure while
 * --max-restarts allows. `dtrain sim calibrate` is cmd_calibrate.c's. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/calib_file.h"
#include "cli/cli.h"
#include "cli/rundir.h"
#include "cli/sim_cluster.h"
#include "cli/sim_launch.h"
#include "cli/sim_platform.h"
#include "cli/sim_start.h"
#include "cli/supervise.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
#include "core/alloc.h"
#include "core/paths.h"
#include "dtrain.h"
#include "trainer/trainer.h"



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
    {"replay", DT_AT_TEXT(S, replay), .metavar = "LOG",
     .help = "time the run LOG logged (its flags, a scheme whose numbers do not depend on the network) on this cluster: "
             "nothing calculated, every evaluation LOG's (--compute modelled)"},
    {"calibration", DT_AT_TEXT(S, calibration), .metavar = "FILE",
     .help = "what dtrain sim calibrate measured on your hosts: the cluster's links (unless --link, --latency), "
             "SimGrid's corrections, and --speed for its model"},
    {"duplex-limit", DT_AT_SWITCH(S, duplex_limit),
     .help = "--calibration: each host's two directions share what the file measured both ways at once (SimGrid's "
             "limiter link; for large messages: right for 43 MB sums at 100 Mbit/s, 10-25% slow for 150 kB ones)"},
};
#undef S

/* dtrain sweep names them: a key of an experiment file that is one of these needs simulate = true */
const dt_flag *dt_sim_own_flags(int *n) {
    *n = NOPTS(sim_flags);
    return sim_flags;
}

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
    /* --duplex-limit: the two directions' share of a host, as measured (a what-if's links keep
     * its proportion). Not by default: on namespace hosts it made large sums right and small
     * messages slow (docs/simulation.md, "both ways at once") */
    if (o->duplex_limit) {
        cl->limiter_Bps = dt_calib_limiter_Bps(&o->cal) * cl->link_Bps / (o->cal.rate_bps / 8);
        if (cl->limiter_Bps <= 0)
            return dt_fail(DT_ERR_ARG, "--duplex-limit: --calibration %s has no both-ways rate below its one-way rate "
                           "(duplex_rate: files from 2026-11-30 measure it)", o->calibration);
    }
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
static dt_status check_inputs(sim_opts *o, dt_train_flags *f, dt_sim_cluster *cl, int named) {
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
    if (o->replay) {
        const dt_scheme_def *d = dt_scheme_find(f->c.scheme.name);
        if (!o->compute)
            return dt_fail(DT_ERR_ARG, "--replay %s: with --compute modelled (a replay calculates nothing to time)", o->replay);
        if (d && !d->replayable)
            return dt_fail(DT_ERR_ARG, "--replay %s: --algo %s computes what arrives when it arrives (or sends what it "
                           "computed): its numbers depend on the network, so it must be simulated whole", o->replay, d->name);
        if (o->max_restarts > 0 || f->c.resume)
            return dt_fail(DT_ERR_ARG, "--replay %s: not with %s (a replay takes its run whole from the log)", o->replay,
                           f->c.resume ? "--resume" : "--max-restarts");
        const int missing = stat(o->replay, &sb) != 0;
        if (missing || !S_ISREG(sb.st_mode))
            return dt_fail(DT_ERR_ARG, "--replay %s: expected the log of a finished dtrain run (%s)", o->replay,
                           missing ? strerror(errno) : "not a regular file");
        /* the ranks' path to it (they share this folder) and the log's: absolute */
        char cwd[PATH_MAX];
        if (o->replay[0] != '/' && !getcwd(cwd, sizeof cwd))
            return dt_fail(DT_ERR_IO, "--replay %s: this folder's path: %s", o->replay, strerror(errno));
        const int w = snprintf(o->replay_abs, sizeof o->replay_abs, "%s%s%s", o->replay[0] == '/' ? "" : cwd,
                               o->replay[0] == '/' ? "" : "/", o->replay);
        if (w < 0 || (size_t)w >= sizeof o->replay_abs)
            return dt_fail(DT_ERR_ARG, "--replay %s: a path of up to %zu characters expected", o->replay,
                           sizeof o->replay_abs - 1);
        struct stat lb;
        if (f->c.log_path && stat(f->c.log_path, &lb) == 0 && lb.st_dev == sb.st_dev && lb.st_ino == sb.st_ino)
            return dt_fail(DT_ERR_ARG, "--replay %s: also this run's --log (which it would append to): give the replay "
                           "a log of its own", o->replay);
    }
    /* modelled compute is a function of the run's flags alone: never a speed timed here unasked */
    if (o->compute && o->speed == 0 && !o->cluster)
        return dt_fail(DT_ERR_ARG, "--compute modelled: give each host's --speed FLOPS (29Gf: a Zen 3 core on cnn1), or "
                       "--speed cpu for this CPU's as dtrain bench measures it (then the run is not repeatable)");
    return DT_OK;
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
        const int rc = dt_sim_start(o, cl, named, bin, argv, args, argc, lists, nlists, f->c.quiet, &a);
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
        char help_text[2000];
        dt_usage_with_schemes(help_text, sizeof help_text, "-n N [--platform NAME|FILE] [--link RATE] [--latency TIME] [--compute measured|modelled]\n"
                              "       [--speed FLOPS|cpu] [--straggler RANK:FACTOR] [--calibration FILE] [--replay LOG] [train flags]\n"
                              "   or: dtrain sim --cluster FILE --compute modelled [--max-restarts N] [train flags]\n"
                              "   or: dtrain sim calibrate --out FILE [--hostfile FILE | --hosts A,B]\n\n"
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
    /* the simulation build runs dtrain's own kernels only (no oneDNN): nothing for a plan to choose */
    if (st == DT_OK && f.c.plan && strcmp(f.c.plan, "off") != 0)
        st = dt_fail(DT_ERR_ARG, "--plan %s: dtrain sim runs dtrain's own kernels only (its simulation build has no "
                     "oneDNN), so a plan has nothing to choose; a simulated host's speed is --speed or --compute measured",
                     f.c.plan);
    if (st == DT_OK && o.duplex_limit && !o.calibration)
        st = dt_fail(DT_ERR_ARG, "--duplex-limit: only with --calibration FILE (it takes what the file measured both ways at once)");
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
