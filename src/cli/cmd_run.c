/* dtrain run: N ranks of dtrain train under mpiexec, supervised (supervise.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/launch.h"
#include "cli/rundir.h"
#include "cli/supervise.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
#include "core/paths.h"
#include "dtrain.h"
#include "trainer/plan_cache.h"
#include "trainer/trainer.h"

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
    if (st == DT_OK && !help && f.hostfile) st = dt_launch_check_hostfile(f.hostfile);
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
    /* --plan auto: made (or found) here, once, and every rank given the file */
    static char plan_path[4096], plan_eq[4200];
    if (f.c.plan && !strcmp(f.c.plan, "auto")) {
        if (dt_plan_ensure("auto", f.c.model, f.c.batch, f.c.precision, stderr, plan_path, sizeof plan_path) != DT_OK) {
            free(args);
            return dt_cli_fail();
        }
        snprintf(plan_eq, sizeof plan_eq, "--plan=%s", plan_path);
    }
    static dt_launch launch;
    if (dt_launch_begin(&launch, f.hostfile, f.hosts, f.ranks, "train") != DT_OK) { free(args); return dt_cli_fail(); }
    char **av = calloc((size_t)argc + DT_LAUNCH_WORDS, sizeof *av);
    if (!av) { free(args); return 2; }
    int k = 0;
    for (; k < launch.n; k++) av[k] = launch.av[k];
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
        if (*plan_path && !strcmp(a, "--plan") && i + 1 < argc) { av[k++] = plan_eq; i++; continue; }
        if (*plan_path && !strcmp(a, "--plan=auto")) { av[k++] = plan_eq; continue; }
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
