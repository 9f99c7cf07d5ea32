/* dtrain sim: the ranks of dtrain train on a simulated cluster (docs/simulation.md). The same
 * program compiled with SimGrid's smpicc (dtrain-sim, built beside dtrain) runs under smpirun:
 * each rank is a simulated host of a platform made here (sim_platform.h) or given as a file,
 * every message crosses SimGrid's model of its links, and each rank's compute is either timed
 * on this CPU (measured) or charged as its FLOPs at the host's speed (modelled: the same log
 * on any machine). Time in the log is simulated time. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/rundir.h"
#include "cli/sim_platform.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
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
    const char *platform, *hostfile, *straggler;
} sim_opts;

static const char *const compute_words[] = {"measured", "modelled", NULL};

static const char *parse_rate(const char *text, void *v) { return dt_sim_parse_rate(text, v); }
static const char *parse_time(const char *text, void *v) { return dt_sim_parse_time(text, v); }
static const char *parse_speed(const char *text, void *v) { return dt_sim_parse_speed(text, v); }
static void format_rate(const void *v, char *out, size_t len) { snprintf(out, len, "%gMbps", *(const double *)v * 8 / 1e6); }
static void format_time(const void *v, char *out, size_t len) { snprintf(out, len, "%gus", *(const double *)v * 1e6); }
static void format_speed(const void *v, char *out, size_t len) { snprintf(out, len, "%gGf", *(const double *)v / 1e9); }

#define S sim_opts
static const dt_flag sim_flags[] = {
    {"n", DT_AT_INT(S, ranks), .min = 1, .max = 65536, .def = "4", .help = "number of ranks, each a simulated host"},
    {"link", DT_AT_CUSTOM(S, link, double, parse_rate, format_rate), DT_GIVEN(S, link_given), .def = "1Gbps", .metavar = "RATE",
     .help = "--platform cluster: each host's link (100Mbps, 1Gbps, 10Gbps; bits bps or bytes Bps)"},
    {"latency", DT_AT_CUSTOM(S, latency, double, parse_time, format_time), DT_GIVEN(S, latency_given), .def = "50us", .metavar = "TIME",
     .help = "--platform cluster: each host link's latency (50us, 1ms)"},
    {"platform", DT_AT_TEXT(S, platform), .def = "cluster", .metavar = "NAME|FILE",
     .help = "cluster, datacenter, campus-1g, campus-100m, wan, or a SimGrid platform file (with --hostfile)"},
    {"hostfile", DT_AT_TEXT(S, hostfile), .metavar = "FILE",
     .help = "with a platform file: its hosts, rank r on line r"},
    {"compute", DT_AT_CHOICE(S, compute, compute_words), .def = "measured",
     .help = "measured: each burst timed on this CPU; modelled: its FLOPs at --speed (deterministic)"},
    {"speed", DT_AT_CUSTOM(S, speed, double, parse_speed, format_speed), .metavar = "FLOPS", .zero = "measured by dtrain bench",
     .help = "--compute modelled: each host's flop/s (30Gf, 2Tf)"},
    {"straggler", DT_AT_TEXT(S, straggler), .metavar = "RANK:FACTOR",
     .help = "RANK's host FACTOR times slower (a list: 3:4,5:2)"},
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

/* --speed not given: this CPU's, as dtrain bench measures a training step of the model */
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

static dt_status write_platform(const dt_sim_cluster *c, const char *dir, char *xml, char *hosts, size_t len,
                                char *describe, size_t dlen) {
    snprintf(xml, len, "%s/platform.xml", dir);
    snprintf(hosts, len, "%s/hosts", dir);
    FILE *fx = fopen(xml, "wx"), *fh = fopen(hosts, "wx"); /* in our own new folder */
    dt_status st = fx && fh ? dt_sim_platform_write(c, fx, fh, describe, dlen)
                            : dt_fail(DT_ERR_IO, "dtrain sim: cannot write in %s: %s", dir, strerror(errno));
    if (fx && fclose(fx) != 0 && st == DT_OK) st = dt_fail(DT_ERR_IO, "dtrain sim: cannot write %s", xml);
    if (fh && fclose(fh) != 0 && st == DT_OK) st = dt_fail(DT_ERR_IO, "dtrain sim: cannot write %s", hosts);
    return st;
}

/* SimGrid's own errors (a platform it cannot load, a host it cannot find) come as several
 * lines and an abort: they are kept, and said in one line when the simulation ends so. */
static int simgrid_error(const char *line) {
    return strstr(line, "/ERROR]") != NULL || strstr(line, "/CRITICAL]") != NULL;
}

/* Runs argv and waits; the child dies with us. Its stderr passes through, SimGrid's errors
 * aside (simgrid_error). Its exit status, 2 when it could not start or SimGrid stopped it. */
static int run_child(char **argv, const char *platform) {
    int fd[2];
    if (pipe(fd) != 0) { dt_fail(DT_ERR_IO, "dtrain sim: pipe: %s", strerror(errno)); return dt_cli_fail(); }
    const pid_t pid = fork();
    if (pid < 0) { dt_fail(DT_ERR_IO, "dtrain sim: fork: %s", strerror(errno)); return dt_cli_fail(); }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "dtrain: error: dtrain sim: cannot start %s: %s (apt-get install libsimgrid-dev)\n", argv[0], strerror(errno));
        _exit(2);
    }
    close(fd[1]);
    /* Ctrl-C reaches the simulation too (one process group): wait for it to end */
    signal(SIGINT, SIG_IGN);
    FILE *err = fdopen(fd[0], "r");
    char line[2048], first[600] = "";
    while (err && fgets(line, sizeof line, err)) {
        /* after an error, its backtrace ("  ->  0# ...") and blank lines go with it */
        const int trace = first[0] && (!strncmp(line, "  -> ", 5) || line[strspn(line, " \n")] == 0);
        if (trace) continue;
        if (!simgrid_error(line)) { fputs(line, stderr); continue; }
        if (!first[0]) { /* its text after the "[where] [category/ERROR] " prefixes */
            const char *t = strstr(line, "ERROR] ") ? strstr(line, "ERROR] ") + 7 : strstr(line, "CRITICAL] ") + 10;
            snprintf(first, sizeof first, "%.*s", (int)strcspn(t, "\n"), t);
        }
    }
    if (err) fclose(err);
    else close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (first[0] && !ok) {
        fprintf(stderr, "dtrain: error: dtrain sim: SimGrid stopped (platform %s): %s\n", platform, first);
        return 2;
    }
    if (first[0]) fprintf(stderr, "dtrain sim: warning: SimGrid: %s\n", first);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

int dt_cmd_sim(int argc, char **argv) {
    static dt_train_flags f;
    static sim_opts o;
    dt_flag_list lists[DT_TRAIN_LISTS + 1];
    int nlists = dt_train_flag_lists(&f, lists), help = 0;
    lists[nlists++] = (dt_flag_list){.flags = sim_flags, .n = NOPTS(sim_flags), .base = &o};
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) return 2;
    for (int i = 0; i < argc; i++) args[i] = (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-np")) ? "--n" : argv[i];
    args[argc] = NULL;
    dt_status st = dt_flags_defaults(sim_flags, NOPTS(sim_flags), &o);
    if (st == DT_OK) st = dt_flags_parse_argv("sim", argc, args, 2, lists, nlists, &help);
    f.ranks = o.ranks;
    if (help) {
        char help_text[1600];
        dt_usage_with_schemes(help_text, sizeof help_text, "-n N [--platform NAME|FILE] [--link RATE] [--latency TIME] [--compute measured|modelled]\n"
                              "       [--speed FLOPS] [--straggler RANK:FACTOR] [train flags]\n\n"
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
    struct stat sb;
    FILE *fp = NULL;
    if (st == DT_OK && !named && stat(o.platform, &sb) != 0)
        st = dt_fail(DT_ERR_ARG, "--platform %s: expected one of %s, or a SimGrid platform file (none there)", o.platform,
                     dt_sim_platform_names());
    /* the files SimGrid will read: regular and readable (a FIFO would hang it) */
    if (st == DT_OK && !named && dt_open_regular(o.platform, &fp, NULL) != DT_OK)
        st = dt_fail(DT_ERR_ARG, "--platform %s", dt_last_error());
    if (fp) fclose(fp), fp = NULL;
    if (st == DT_OK && o.hostfile && dt_open_regular(o.hostfile, &fp, NULL) != DT_OK)
        st = dt_fail(DT_ERR_ARG, "--hostfile %s", dt_last_error());
    if (fp) fclose(fp), fp = NULL;
    if (st == DT_OK && !named && !o.hostfile)
        st = dt_fail(DT_ERR_ARG, "--platform %s: a platform file needs --hostfile FILE (its hosts, rank r on line r)", o.platform);
    if (st == DT_OK && named && o.hostfile)
        st = dt_fail(DT_ERR_ARG, "--hostfile %s: only with a platform file (--platform %s names its own hosts)", o.hostfile, o.platform);
    if (st == DT_OK && (o.link_given || o.latency_given) && strcmp(o.platform, "cluster") != 0)
        st = dt_fail(DT_ERR_ARG, "--%s: only with --platform cluster (--platform %s sets its own links)",
                     o.link_given ? "link" : "latency", o.platform);
    if (st == DT_OK && o.straggler) {
        const char *why = dt_sim_parse_stragglers(o.straggler, &cl);
        if (why) st = dt_fail(DT_ERR_ARG, "--straggler %s: expected %s", o.straggler, why);
        else if (!named) st = dt_fail(DT_ERR_ARG, "--straggler: with a platform file, give the slow host its speed there");
    }
    if (st == DT_OK && o.speed > 0 && !o.compute)
        st = dt_fail(DT_ERR_ARG, "--speed: only with --compute modelled (measured compute runs at this CPU's speed)");
    char bin[4200];
    if (st == DT_OK) st = find_sim_binary(bin, sizeof bin);
    /* dtrain sweep checks every run's flags before it starts any (src/cli/sweep.c): nothing made */
    const int check_only = getenv("DTRAIN_CHECK_ONLY") != NULL;
    if (st == DT_OK) st = dt_resolve_outputs(&f, 0);
    if (st == DT_OK && f.run_dir && !check_only) st = dt_start_run_dir(&f, argv, argc);
    if (st == DT_OK) st = dt_train_check_paths(&f.c, 0);
    if (st == DT_OK && check_only) {
        free(args);
        return 0;
    }
    if (st == DT_OK && o.compute && !(o.speed > 0)) {
        st = bench_speed(f.c.model, f.c.batch, &o.speed);
        if (st == DT_OK)
            fprintf(stderr, "dtrain sim: --speed %.3gGf: this CPU's, measured by dtrain bench (give it to repeat this run elsewhere)\n",
                    o.speed / 1e9);
    }
    /* measured: SMPI times each burst at smpi/host-speed and the hosts run at that speed
     * (1 s of this CPU is 1 simulated s on a host, a straggler's host slower); modelled: the
     * hosts' speed is --speed and nothing is timed */
    cl.speed = o.compute ? o.speed : 1e9;
    char dir[] = "/tmp/dtrain-sim.XXXXXX", xml[256] = "", hosts[256] = "", describe[600] = "";
    int made_dir = 0;
    if (st == DT_OK && named) {
        if (!mkdtemp(dir)) st = dt_fail(DT_ERR_IO, "dtrain sim: cannot make a folder in /tmp: %s", strerror(errno));
        else made_dir = 1, st = write_platform(&cl, dir, xml, hosts, sizeof xml, describe, sizeof describe);
    } else if (st == DT_OK) {
        snprintf(xml, sizeof xml, "%s", o.platform);
        snprintf(hosts, sizeof hosts, "%s", o.hostfile);
        snprintf(describe, sizeof describe, "platform file %s, %d hosts", o.platform, f.ranks);
    }
    int rc = 2;
    if (st == DT_OK) {
        char compute[120];
        if (o.compute) snprintf(compute, sizeof compute, "compute modelled at %.4g Gflop/s", o.speed / 1e9);
        else snprintf(compute, sizeof compute, "compute measured on this CPU");
        char full[800];
        snprintf(full, sizeof full, "%s; %s", describe, compute);
        setenv("DTRAIN_SIM_DESCRIBE", full, 1);
        setenv("DTRAIN_SIM_COMPUTE", o.compute ? "modelled" : "measured", 1);
        char *typed = dt_shell_quote(argv, argc);
        if (typed) setenv(DT_COMMAND_ENV, typed, 1);
        free(typed);
        if (!f.c.quiet)
            printf("dtrain sim: %s; %s. Times are simulated. Off in simulation: the watchdog (--timeout), "
                   "rank guards and restarts\n", describe, compute);
        char np[64], speed[64], hf[300], size[16];
        snprintf(np, sizeof np, "--cfg=smpi/np:%d", f.ranks);
        snprintf(hf, sizeof hf, "--cfg=smpi/hostfile:%s", hosts);
        snprintf(speed, sizeof speed, "--cfg=smpi/host-speed:%.17gf", cl.speed);
        snprintf(size, sizeof size, "%d", f.ranks);
        setenv("SMPI_GLOBAL_SIZE", size, 1); /* as smpirun sets it */
        char **av = calloc((size_t)argc + 64, sizeof *av);
        int k = 0;
        if (av) {
            /* SMPI's own launcher, as smpirun starts it: smpirun would add a line of its own
             * ("Execution failed ...") to a run's one-line error */
            av[k++] = getenv("DTRAIN_SMPIMAIN") ? getenv("DTRAIN_SMPIMAIN") : SMPIMAIN;
            av[k++] = bin;
            av[k++] = "--cfg=smpi/privatization:1", av[k++] = np, av[k++] = hf;
            av[k++] = "--cfg=surf/precision:1e-9", av[k++] = "--cfg=network/model:SMPI", av[k++] = "--cfg=smpi/tmpdir:/tmp";
            av[k++] = speed;
            /* each MPI_Test / MPI_Iprobe would cost 0.1 ms of simulated time: the polling
             * schemes (eventgrad's windows, downpour's server) spent 1,863 s an epoch on it */
            av[k++] = "--cfg=smpi/test:0", av[k++] = "--cfg=smpi/iprobe:0";
            /* collectives chosen as MPICH chooses them (the real runs' MPI): SMPI's default
             * reduced then broadcast a 2-host allreduce, twice the time of MPICH's exchange */
            av[k++] = "--cfg=smpi/coll-selector:mpich";
            /* the network model's corrections (SMPI's defaults were fitted to MPI over TCP on one
             * Grid'5000 cluster: 11.6x the latency of a 64 kB message): a TCP stream carries
             * 1448 bytes of every 1538 an Ethernet link sends (0.94), the latency is the
             * links'. scripts/sim-calibrate measures both on netcluster hosts
             * (docs/simulation.md); DTRAIN_SIM_CFG adds or overrides SimGrid options. */
            av[k++] = "--cfg=smpi/bw-factor:0:0.94", av[k++] = "--cfg=smpi/lat-factor:0:1";
            /* a send returns once its bytes are handed over, as MPICH with UCX sends eagerly up
             * to 1 MB across hosts (dtrain run sets UCX_RNDV_THRESH=1mb): SMPI's default made
             * every send above 64 kB wait for its receiver */
            av[k++] = "--cfg=smpi/send-is-detached-thresh:1048576";
            char *extra = getenv("DTRAIN_SIM_CFG") ? strdup(getenv("DTRAIN_SIM_CFG")) : NULL;
            for (char *tok = extra ? strtok(extra, " \t") : NULL; tok && k < argc + 24; tok = strtok(NULL, " \t"))
                av[k++] = tok;
            if (o.compute) av[k++] = "--cfg=smpi/simulate-computation:no";
            /* SimGrid's set-up chatter off, its warnings on, but not one per rank that exits 2
             * after the run's own error line */
            av[k++] = "--log=root.thr:warning", av[k++] = "--log=smpi_kernel.thr:error";
            av[k++] = xml;
            av[k++] = "train";
            for (int i = 2; i < argc; i++) {
                const dt_flag_list *in = NULL;
                const dt_flag *fl = !strncmp(args[i], "--", 2) ? dt_flags_lookup(lists, nlists, args[i], &in) : NULL;
                if (fl && in == &lists[nlists - 1]) { /* sim's own (and -n): not train's */
                    if (!strchr(args[i], '=') && fl->kind != DT_FLAG_SWITCH) i++;
                    continue;
                }
                av[k++] = argv[i];
            }
            av[k] = NULL;
            fflush(stdout);
            rc = run_child(av, xml);
            free(av);
            free(extra);
        }
    } else {
        dt_cli_fail();
    }
    if (made_dir) {
        unlink(xml);
        unlink(hosts);
        rmdir(dir);
    }
    free(args);
    dt_console_close();
    return rc;
}
