/* dtrain run: N ranks of dtrain train under mpiexec, supervised (supervise.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dtrain.h"
#include "cli/supervise.h"
#include "cli/rundir.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
#include "core/paths.h"
#include "trainer/trainer.h"

/* A hostfile must be a readable regular file (a FIFO is refused, not waited on) and name a
 * host: one that names none would let mpiexec run every rank here, silently. */
static dt_status check_hostfile(const char *path) {
    FILE *fp;
    if (dt_open_regular(path, &fp, NULL) != DT_OK) return dt_fail(DT_ERR_ARG, "--hostfile %s", dt_last_error());
    char line[1024];
    int hosts = 0;
    while (fgets(line, sizeof line, fp)) {
        const char *p = line + strspn(line, " \t\r\n");
        hosts += *p && *p != '#';
    }
    fclose(fp);
    return hosts ? DT_OK : dt_fail(DT_ERR_ARG, "--hostfile %s: names no host (expected one per line: NAME or NAME:SLOTS)", path);
}

/* Starts N ranks of `dtrain train` with mpiexec and supervises them (supervise.h). Flags are
 * checked here first, so a typo is reported once, not by every rank. */
int dt_cmd_run(int argc, char **argv) {
    static dt_train_flags f;
    dt_flag_list lists[DT_RUN_LISTS];
    int nlists = dt_run_flag_lists(&f, lists), help;
    /* -n N is the usual spelling: accept it as --n */
    char **args = malloc((size_t)argc * sizeof *args);
    if (!args) return 2;
    for (int i = 0; i < argc; i++) args[i] = (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-np")) ? "--n" : argv[i];
    dt_status st = dt_flags_parse_argv("run", argc, args, 2, lists, nlists, &help);
    if (st == DT_OK && !help) st = dt_scheme_values(&f, NULL);
    if (st == DT_OK && !help) st = dt_run_length(&f);
    if (st == DT_OK && !help && f.hostfile && f.hosts) st = dt_fail(DT_ERR_ARG, "dtrain run: give --hostfile or --hosts, not both");
    if (st == DT_OK && !help && f.hostfile) st = check_hostfile(f.hostfile);
    /* more than a few ranks a core only slows a run down, and each holds its own copy of the
     * data (MNIST: ~80 MB): -n 100000 on one machine is a typo, not a plan */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    if (st == DT_OK && !help && !f.hostfile && !f.hosts && !getenv("DTRAIN_MPIEXEC") && f.ranks > 16 * cores)
        st = dt_fail(DT_ERR_ARG, "-n %d: more than 16 ranks per core on this machine (%ld cores, so at most %ld); "
                     "use --hosts or --hostfile to run more", f.ranks, cores, 16 * cores);
    if (st == DT_OK && !help) st = dt_local_ranks(&f, "run", argc, argv);
    /* as rank 0 would, before any rank starts: one line, not one per rank */
    /* dtrain sweep checks every run's flags before it starts any (src/cli/sweep.c): nothing made */
    const int check_only = getenv("DTRAIN_CHECK_ONLY") != NULL;
    if (st == DT_OK && !help) st = dt_resolve_outputs(&f, 0);
    /* --resume auto: decided here for the run folder and restarts, and again by the ranks (the
     * first attempt passes it on), whose rank 0 says which once it has read the checkpoint */
    const int resume_auto = dt_resume_auto_asked(&f);
    if (st == DT_OK && !help && resume_auto) st = dt_resume_auto(&f, f.c.checkpoint && access(f.c.checkpoint, F_OK) == 0);
    if (st == DT_OK && !help && f.run_dir && !check_only) st = dt_start_run_dir(&f, argv, argc);
    if (st == DT_OK && !help) st = dt_train_check_paths(&f.c, 0);
    if (st != DT_OK) { free(args); return dt_cli_fail(); }
    if (!help && check_only) { free(args); return 0; }
    /* ranks beyond the cores take turns: 4 ranks on 2 cores trained at 7.4k img/s where one
     * process did 44.5k; said once, here, not by every rank */
    if (!help && !f.hostfile && !f.hosts && f.ranks > cores && !getenv("DTRAIN_NO_SETUP_WARNINGS"))
        fprintf(stderr, "dtrain run: warning: %d ranks on %ld cores: they will share them (slower than %ld ranks)\n", f.ranks,
                cores, cores);
    if (help) {
        char help_text[1400];
        dt_usage_with_schemes(help_text, sizeof help_text, "-n N [--hostfile FILE | --hosts LIST] [--max-restarts N] [train flags]\n\n"
                           "Starts N ranks of dtrain train under mpiexec ($DTRAIN_MPIEXEC or mpiexec) and watches them: a lost\n"
                           "or stalled rank is named in one line, the launcher's own messages go to a file that line names.");
        dt_flags_help("run", help_text, lists, nlists);
        free(args);
        return 0;
    }
    /* $DTRAIN_MPIEXEC may be a command with its own arguments (e.g. scripts/netcluster mpiexec) */
    static char launcher[1024];
    snprintf(launcher, sizeof launcher, "%s", getenv("DTRAIN_MPIEXEC") ? getenv("DTRAIN_MPIEXEC") : "mpiexec");
    char *lv[16];
    int nl = 0;
    for (char *tok = strtok(launcher, " \t"); tok && nl < 15; tok = strtok(NULL, " \t")) lv[nl++] = tok;
    if (nl == 0) { free(args); dt_fail(DT_ERR_ARG, "DTRAIN_MPIEXEC is empty"); return dt_cli_fail(); }
    /* Open MPI wants to be told about root and oversubscription; MPICH's hydra does not */
    int openmpi = 0;
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "%s --version 2>&1", getenv("DTRAIN_MPIEXEC") ? getenv("DTRAIN_MPIEXEC") : "mpiexec");
    FILE *p = popen(cmd, "r");
    if (p) {
        char line[256];
        while (fgets(line, sizeof line, p)) openmpi |= strstr(line, "Open MPI") != NULL || strstr(line, "OpenRTE") != NULL;
        if (pclose(p) != 0 && !openmpi) {
            free(args);
            dt_fail(DT_ERR_ARG, "dtrain run: '%s' not found or not working (install mpich, or set DTRAIN_MPIEXEC)", lv[0]);
            return dt_cli_fail();
        }
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) { free(args); dt_fail(DT_ERR_IO, "dtrain run: cannot find my own executable"); return dt_cli_fail(); }
    self[len] = 0;
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", f.ranks);
    char **av = calloc((size_t)argc + 32, sizeof *av);
    if (!av) { free(args); return 2; }
    int k = 0;
    for (int i = 0; i < nl; i++) av[k++] = lv[i];
    if (openmpi) {
        av[k++] = "--oversubscribe";
        if (getuid() == 0) {
            setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
            setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        }
    }
    /* Across hosts, UCX's rendezvous protocol (a handshake before each message above its
     * threshold, ~8 kB over TCP) cost more than the bytes: a 4-host allreduce of cnn1's 87 kB
     * took 57 ms a step at 100 Mbit/s, 24 ms with messages up to 1 MB sent eagerly
     * (docs/transport.md). Within a host its zero-copy path is the faster one: unchanged. */
    if ((f.hostfile || f.hosts) && !getenv("UCX_RNDV_THRESH")) setenv("UCX_RNDV_THRESH", "1mb", 1);
    if (f.hostfile) { av[k++] = openmpi ? "--hostfile" : "-f"; av[k++] = (char *)f.hostfile; }
    if (f.hosts) { av[k++] = openmpi ? "--host" : "-hosts"; av[k++] = (char *)f.hosts; }
    av[k++] = "-n";
    av[k++] = nbuf;
    av[k++] = self;
    av[k++] = "train";
    /* the run's own flags stay here; --resume is the supervisor's to give (restarts change it) */
    for (int i = 2; i < argc; i++) {
        int skip = 0, with_value = 1;
        const char *a = args[i];
        if (!strncmp(a, "--", 2)) {
            const dt_flag *fl = dt_flags_lookup(lists, nlists, a, NULL);
            if (strchr(a, '=') || (fl && fl->kind == DT_FLAG_SWITCH)) with_value = 0;
            skip = dt_flags_lookup(&lists[nlists - 1], 1, a, NULL) != NULL || (fl && !strcmp(fl->name, "resume"));
        }
        if (skip) { if (with_value) i++; continue; }
        av[k++] = argv[i];
    }
    av[k] = NULL;
    /* the ranks log the command the user typed, not mpiexec's */
    char *typed = dt_shell_quote(argv, argc);
    if (typed) setenv(DT_COMMAND_ENV, typed, 1);
    free(typed);
    dt_job job = {.argv = av, .ranks = f.ranks, .max_restarts = f.max_restarts, .checkpoint = f.c.checkpoint,
                  .timeout = f.timeout, .start_timeout = f.start_timeout,
                  .resume = f.c.resume, .resume_auto = resume_auto};
    const int rc = dt_supervise(&job);
    free(av);
    free(args);
    dt_console_close();
    return rc;
}
