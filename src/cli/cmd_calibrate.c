/* dtrain sim calibrate: SimGrid's calibration procedure on two of the user's own hosts, in one
 * command. It starts two ranks under the launcher dtrain run uses (launch.h: mpiexec with
 * --hostfile or --hosts, or $DTRAIN_MPIEXEC, e.g. srun in a Slurm allocation or
 * `scripts/netcluster mpiexec`), which measure the link and the hosts (calib_rank.c); rank 0
 * writes the calibration file that `dtrain sim --calibration FILE` reads (calib_file.h). */
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/calib_file.h"
#include "cli/cli.h"
#include "cli/launch.h"
#include "core/flag_table.h"
#include "core/paths.h"
#include "dtrain.h"

typedef struct {
    const char *out, *hostfile, *hosts, *model;
    int batch, reps, steps;
    double gap_ms, longest_s, timeout_s;
} calib_opts;

#define O calib_opts
static const dt_flag calib_flags[] = {
    {"out", DT_AT_TEXT(O, out), .metavar = "FILE", .help = "the calibration file to write (needed)"},
    {"hostfile", DT_AT_TEXT(O, hostfile), .metavar = "FILE", .help = "mpiexec's hostfile: two hosts, a rank on each"},
    {"hosts", DT_AT_TEXT(O, hosts), .metavar = "A,B", .help = "the two hosts (mpiexec -hosts)"},
    {"model", DT_AT_TEXT(O, model), .def = "cnn1", .help = "the model whose training step gives the hosts' speed"},
    {"batch", DT_AT_INT(O, batch), .def = "64", .min = 1, .max = 1e5, .help = "its batch per host"},
    {"reps", DT_AT_INT(O, reps), .def = "15", .min = 3, .max = 10000, .help = "trips per message size (their median counts)"},
    {"steps", DT_AT_INT(O, steps), .def = "30", .min = 3, .max = 100000, .help = "training steps timed for the speed"},
    {"gap-ms", DT_AT_FLOAT(O, gap_ms), .def = "8", .min = 0, .max = 10000,
     .help = "pause before each trip, in ms (training computes between its messages)"},
    {"longest", DT_AT_FLOAT(O, longest_s), .def = "0.25", .min = 0.001, .max = 100,
     .help = "message sizes double (up to 64 MB) until one takes this many seconds"},
    {"timeout", DT_AT_FLOAT(O, timeout_s), .def = "900", .min = 1, .max = 1e6,
     .help = "seconds to wait for the ranks before ending them"},
};
#undef O

/* an existing --out is replaced only when it is a calibration (dtrain writes or removes only
 * what it made) */
static dt_status check_out(const char *path) {
    dt_status st = dt_check_output("--out", path, 0);
    if (st != DT_OK || access(path, F_OK) != 0) return st;
    FILE *f;
    if ((st = dt_open_regular(path, &f, NULL)) != DT_OK) return dt_fail(DT_ERR_ARG, "--out %s", dt_last_error());
    char first[64] = "";
    const int ours = fgets(first, sizeof first, f) && !strncmp(first, "; dtrain sim calibration", 24);
    fclose(f);
    return ours ? DT_OK : dt_fail(DT_ERR_ARG, "--out %s: exists and is not a calibration file (it would be replaced)", path);
}

static void nap(void) {
    const struct timespec t = {0, 100000000L};
    nanosleep(&t, NULL);
}

/* the launcher's exit status, or -1 when it ran past the timeout (then ended) */
static int run_ranks(char **av, double timeout_s) {
    const pid_t pid = fork();
    if (pid < 0) return dt_fail(DT_ERR_IO, "dtrain sim calibrate: fork: %s", strerror(errno)), -2;
    if (pid == 0) {
        execvp(av[0], av);
        fprintf(stderr, "dtrain: error: dtrain sim calibrate: cannot start %s: %s\n", av[0], strerror(errno));
        _exit(127);
    }
    const double end = dt_now() + timeout_s;
    int status = 0;
    for (;;) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return dt_fail(DT_ERR_IO, "dtrain sim calibrate: waitpid: %s", strerror(errno)), -2;
        if (dt_now() > end) { /* mpiexec ends its ranks on SIGTERM; then for good */
            kill(pid, SIGTERM);
            for (int i = 0; i < 50 && waitpid(pid, &status, WNOHANG) == 0; i++) nap();
            if (waitpid(pid, &status, WNOHANG) == 0) { kill(pid, SIGKILL); waitpid(pid, &status, 0); }
            return -1;
        }
        nap();
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int dt_cmd_sim_calibrate(int argc, char **argv) {
    static calib_opts o;
    const dt_flag_list list = {.flags = calib_flags, .n = NOPTS(calib_flags), .base = &o};
    int help = 0;
    dt_status st = dt_flags_defaults(calib_flags, NOPTS(calib_flags), &o);
    if (st == DT_OK) st = dt_flags_parse_argv("sim calibrate", argc, argv, 3, &list, 1, &help);
    if (help) {
        dt_flags_help("sim calibrate", "--out FILE [--hostfile FILE | --hosts A,B] [--model M]\n\n"
                      "Measures two real hosts as SimGrid's calibration procedure does (a ping-pong's one-way times by message\n"
                      "size, MPI_Isend's and MPI_Recv's own times, the hosts' speed on a model's training step) and writes the\n"
                      "file dtrain sim --calibration reads. The ranks start as dtrain run starts them: mpiexec, or\n"
                      "$DTRAIN_MPIEXEC (srun in a Slurm allocation, scripts/netcluster mpiexec).", &list, 1);
        return 0;
    }
    if (st == DT_OK && !o.out) st = dt_fail(DT_ERR_ARG, "dtrain sim calibrate: --out FILE is needed (the calibration file)");
    if (st == DT_OK && o.hostfile && o.hosts) st = dt_fail(DT_ERR_ARG, "dtrain sim calibrate: give --hostfile or --hosts, not both");
    if (st == DT_OK && o.hostfile) st = dt_launch_check_hostfile(o.hostfile);
    if (st == DT_OK) st = check_out(o.out);
    static dt_launch l;
    if (st == DT_OK) st = dt_launch_begin(&l, o.hostfile, o.hosts, 2, "sim-calibrate-rank");
    if (st != DT_OK) return dt_cli_fail();
    if (!o.hostfile && !o.hosts && !getenv("DTRAIN_MPIEXEC"))
        fprintf(stderr, "dtrain sim calibrate: warning: no --hostfile, --hosts or DTRAIN_MPIEXEC: both ranks on this machine "
                        "(its loopback is what is measured)\n");
    char batch[16], reps[16], steps[16], gap[32], longest[32];
    snprintf(batch, sizeof batch, "%d", o.batch);
    snprintf(reps, sizeof reps, "%d", o.reps);
    snprintf(steps, sizeof steps, "%d", o.steps);
    snprintf(gap, sizeof gap, "%.17g", o.gap_ms);
    snprintf(longest, sizeof longest, "%.17g", o.longest_s);
    char *more[] = {"--out", (char *)o.out, "--model", (char *)o.model, "--batch", batch, "--reps", reps,
                    "--steps", steps, "--gap-ms", gap, "--longest", longest};
    char *av[DT_LAUNCH_WORDS + 16];
    int k = 0;
    for (; k < l.n; k++) av[k] = l.av[k];
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) av[k++] = more[i];
    av[k] = NULL;
    printf("dtrain sim calibrate: measuring (message sizes from 0 bytes until one takes %.3g s, %d trips each; then %d "
           "training steps of %s)...\n", o.longest_s, o.reps, o.steps, o.model);
    fflush(stdout);
    const int rc = run_ranks(av, o.timeout_s);
    if (rc == -2) return dt_cli_fail();
    if (rc == -1) {
        dt_fail(DT_ERR_ARG, "dtrain sim calibrate: no calibration in --timeout %g s: ended (is each rank on a host that can "
                "reach the other?)", o.timeout_s);
        return dt_cli_fail();
    }
    if (rc != 0) { /* the ranks said why (one line), or the launcher did */
        fprintf(stderr, "dtrain: error: dtrain sim calibrate: the ranks ended with status %d; %s not written\n", rc, o.out);
        return 2;
    }
    dt_calibration c;
    if (dt_calib_read(o.out, &c) != DT_OK) return dt_cli_fail();
    printf("%s: between %s: latency %.1f us a link, %.4g Mbit/s for the largest messages (%.0f bytes), %s at %.3g Gflop/s\n",
           o.out, c.hosts, c.latency_s * 1e6, c.rate_bps / 1e6, c.size[c.nsizes - 1], c.model, c.speed / 1e9);
    if (c.progress_bytes > 0)
        printf("%s: the MPI moves a non-blocking sum only inside its calls: %.0f%% of a %.0f kB bucket crossed while "
               "computing (%.0f kB a call)\n", o.out, 100 * fmax(0, c.progress_hidden), c.progress_bucket / 1e3,
               c.progress_bytes / 1e3);
    else
        printf("%s: the MPI moves a non-blocking sum in the background (%.0f%% of a %.0f kB bucket crossed while computing)\n",
               o.out, 100 * c.progress_hidden, c.progress_bucket / 1e3);
    if (c.progress_cpu_per_byte > 0)
        printf("%s: a byte crossing while the rank computes takes %.3g ns of its computing (%.0f%% of a core at %.4g Mbit/s)\n",
               o.out, c.progress_cpu_per_byte * 1e9, 100 * c.progress_cpu_per_byte * c.rate_bps / 8, c.rate_bps / 1e6);
    printf("use: dtrain sim --calibration %s -n N --algo ... (--compute modelled takes its speed for --model %s)\n", o.out,
           c.model);
    return 0;
}
