/* dtrain train: one process, or every rank under mpiexec (dtrain run). */
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dtrain.h"
#include <stdatomic.h>
#include "cli/guard.h"
#include "cli/rundir.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
#include "comm/sim_poll.h"
#include "comm/watch.h"
#include "comm/world.h"
#include "core/paths.h"
#include "core/sim.h"
#include "trainer/trainer.h"

/* MPI is initialised (a singleton without mpiexec). Errors every rank meets alike are printed
 * by rank 0 only; an error of some ranks by the lowest of them, prefixed with its rank. */
static int report_agreed(const dt_comm *comm, dt_status st) {
    int bad = st != DT_OK, first = bad ? comm->rank : comm->size, lowest = comm->size, any = 0, all = 0;
    int err = MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm->comm);
    if (err == MPI_SUCCESS && !any) return 0;
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, comm->comm);
    /* all failed: the same message everywhere, printed once */
    if (err == MPI_SUCCESS) err = MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_MIN, comm->comm);
    if (err != MPI_SUCCESS) { /* the agreement itself failed: every rank says what it knows */
        fprintf(stderr, "dtrain: error: rank %d: %s\n", comm->rank, bad ? dt_last_error() : "MPI failed agreeing on an error");
        return 1;
    }
    if (comm->rank == lowest) {
        if (all || comm->size == 1) fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
        else fprintf(stderr, "dtrain: error: rank %d: %s\n", comm->rank, dt_last_error());
    }
    return 1;
}

/* Ranks a scheme dropped for good (stopped or hung: downpour's gone workers) would hold
 * MPI_Finalize forever. The work is done and saved, so the others leave without it: rank 0
 * last but one message, so that nothing it still had to say or write is cut short when the
 * launcher sees the first rank leave. The board names world ranks, and a scheme that
 * dropped ranks trains its last steps on a communicator of the survivors, whose numbering
 * differs (survivor 2 of 0,1,3 is world rank 3): so MPI_COMM_WORLD's numbers, every one. */
static void leave_without_finalize(void) {
    const dt_board *b = dt_watch_board();
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dt_console_close();
    for (int r = 1; r < size; r++) {
        int dropped = 0;
        for (int i = 0; i < 8; i++) dropped |= atomic_load(&b->dropped[i]) == r;
        if (dropped) continue;
        if (rank == 0) MPI_Send(NULL, 0, MPI_BYTE, r, 7399, MPI_COMM_WORLD);
        else if (rank == r) MPI_Recv(NULL, 0, MPI_BYTE, 0, 7399, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    dt_watch_left();
    _exit(0);
}

/* MPI sees this process alone, but a launcher started several: srun without its MPI plugin,
 * or another MPI's launcher (Open MPI's mpirun for a build on MPICH, or the reverse). N runs
 * would each train alone and write the same files: refused in one line (the first process). */
static const struct { const char *env, *who, *fix; } launchers[] = {
    {"OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun", "launch it with the mpiexec of the MPI dtrain was built with"},
    {"PMI_SIZE", "an MPICH (hydra) mpiexec", "launch it with the mpiexec of the MPI dtrain was built with"},
    {"SLURM_STEP_NUM_TASKS", "srun", "use srun --mpi=pmi2 (MPICH) or --mpi=pmix (Open MPI)"},
};

/* A launcher started this process (it names the job in the environment; PMIx's PMIX_RANK too). */
static int under_launcher(void) {
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++)
        if (getenv(launchers[i].env)) return 1;
    return getenv("PMIX_RANK") != NULL;
}

static int launched_alone(void) {
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
        const char *n = getenv(launchers[i].env);
        if (!n || atoi(n) <= 1) continue;
        const char *rank = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK")
                           : getenv("PMI_RANK")           ? getenv("PMI_RANK")
                                                          : getenv("SLURM_PROCID");
        if (!rank || !strcmp(rank, "0")) {
            char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
            int len = 0;
            MPI_Get_library_version(lib, &len);
            lib[strcspn(lib, ",\n")] = 0; /* its first words: "MPICH Version: 4.0.2", "Open MPI v4.1.4" */
            for (char *c = lib; *c; c++)
                if (*c == '\t') *c = ' ';
            fprintf(stderr, "dtrain: error: %s started %s processes but MPI (this build's: %s) sees each alone: %s\n",
                    launchers[i].who, n, lib, launchers[i].fix);
        }
        return 1;
    }
    return 0;
}

/* on: SIGTERM and SIGINT ask the run to stop after a step (trainer/stop.c); off (without
 * --checkpoint): they end it, as they would any program. */
static void stop_on_signals(int on) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? dt_trainer_request_stop : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* --checkpoint among the arguments, before they are parsed (which needs MPI) */
static int checkpoint_given(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--checkpoint") || !strncmp(argv[i], "--checkpoint=", 13)) return 1;
    return 0;
}

/* --resume auto found a checkpoint that holds every epoch (dt_trainer_init refused it as
 * finished): a job started again after its run ended (preempted in its final evaluation,
 * requeued by hand). That is the run's end, not an error, when every rank read the same and
 * its weights were written (rank 0's --out): 1. A finished checkpoint without them (ended
 * after its last save, before its weights) stays the error it was, said as such. */
static int finished_before(const dt_comm *comm, const dt_trainer *t, const dt_train_config *c) {
    int mine = t->resumed_finished, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm->comm) != MPI_SUCCESS || !all) return 0;
    int written = comm->rank == 0 && (!c->weights_out || access(c->weights_out, F_OK) == 0);
    if (MPI_Bcast(&written, 1, MPI_INT, 0, comm->comm) != MPI_SUCCESS) return 0;
    if (!written)
        dt_fail(DT_ERR_ARG, "--resume auto: checkpoint %s is of a run that trained all its %d epochs, but its weights %s were "
                "never written (it was ended after its last checkpoint): nothing to resume", c->checkpoint, t->start_epoch,
                c->weights_out);
    return written;
}

/* The command as typed, for the log: under dtrain run the supervisor's (this rank's argv is
 * mpiexec's), else this process's own; env: DT_COMMAND_ENV's value, or NULL. Kept for the
 * process's life (the config points into it). */
static char **typed_command(int argc, char **argv, const char *env, int *ntyped) {
    static char **typed;
    static int n;
    if (env) typed = dt_shell_split(env, &n);
    if (!typed && (typed = malloc(((size_t)argc + 1) * sizeof *typed))) {
        memcpy(typed, argv, ((size_t)argc + 1) * sizeof *typed);
        n = argc;
    }
    *ntyped = n;
    return typed;
}

/* train's flags read into f and scheme: -1 to go on, else the exit status (2: an error, 0:
 * --help), said by rank 0 and MPI finalized */
static int parse_flags(const dt_comm *comm, int argc, char **argv, dt_train_flags *f, dt_scheme_choice *scheme) {
    dt_flag_list lists[DT_TRAIN_LISTS];
    int nlists = dt_train_flag_lists(f, lists), help;
    dt_status st = dt_flags_parse_argv("train", argc, argv, 2, lists, nlists, &help);
    if (st == DT_OK && !help) st = dt_scheme_values(f, scheme);
    if (st == DT_OK && !help) st = dt_run_length(f);
    if (st == DT_OK && !help) return -1;
    if (comm->rank == 0) {
        char help_text[1400];
        dt_usage_with_schemes(help_text, sizeof help_text, "[flags]\n\nTrains a model and writes its final weights. Under mpiexec (or dtrain run) the\n"
                                                "ranks train together with --algo; alone it trains on one process.");
        if (st != DT_OK) fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
        else dt_flags_help("train", help_text, lists, nlists);
    }
    dt_comm_finalize();
    return st != DT_OK ? 2 : 0;
}

/* The run's outputs resolved, --resume auto decided (rank 0 for all: the parts may sit on
 * other disks, its manifest not) and the run folder started; every rank alike, whatever its
 * st (rank 0 alone checks the default --out). */
static dt_status resolve_run(const dt_comm *comm, dt_train_flags *f, int resume_auto, const char *env, int argc, char **argv) {
    dt_train_config *c = &f->c;
    dt_status st = dt_resolve_outputs(f, comm->rank);
    if (resume_auto) {
        int exists = comm->rank == 0 && c->checkpoint && access(c->checkpoint, F_OK) == 0;
        if (MPI_Bcast(&exists, 1, MPI_INT, 0, comm->comm) != MPI_SUCCESS) exists = 0;
        if (st == DT_OK) st = dt_resume_auto(f, exists);
    }
    /* under dtrain run the supervisor keeps the run folder (and the console of every rank) */
    if (st == DT_OK && f->run_dir && comm->rank == 0 && !env) st = dt_start_run_dir(f, argv, argc);
    return st;
}

/* How the run ended (st: dt_trainer_run's), said, and its exit status; MPI finalized */
static int run_ended(dt_status st, const dt_train_config *c, int rank, int size, int stop_signal, int text, double final_acc,
                     double final_loss) {
    if (st == DT_ERR_STOPPED) {
        /* agreed by every rank and saved: one line, how to go on, and a status of its own */
        if (rank == 0)
            fprintf(stderr, "dtrain: stopped by %s after %s: checkpoint %s committed; resume with the same command and "
                    "--resume %s (or --resume auto)\n", strsignal(stop_signal), dt_last_error(), c->checkpoint,
                    c->checkpoint);
        dt_comm_finalize();
        return DT_EXIT_STOPPED;
    }
    if (st == DT_ERR_DIVERGED) {
        /* agreed by every rank: said once, and the run ends with its own status */
        if (rank == 0) fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
        dt_comm_finalize();
        return 3;
    }
    if (st != DT_OK) {
        /* mid-run errors are this rank's own: say which, and stop the others */
        if (size > 1) {
            char line[300];
            snprintf(line, sizeof line, "rank %d: %s", rank, dt_last_error());
            fprintf(stderr, "dtrain: error: %s\n", line);
            fflush(stderr);
            /* said: the supervisor must not add a line of its own when MPI_Abort's kills
             * reach this rank's guard as signals, but says this one if it did not come through */
            dt_watch_failed(line, 2);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        dt_comm_finalize();
        return dt_cli_fail();
    }
    if (!c->quiet && c->weights_out && rank == 0 && text)
        printf("final test loss %.4f, weights written to %s\n", final_loss, c->weights_out);
    else if (!c->quiet && c->weights_out && rank == 0)
        printf("final test accuracy %.2f%%, weights written to %s\n", 100 * final_acc, c->weights_out);
    fflush(stdout);
    dt_watch_end(DT_RANK_FINISHING, 0);
    if (dt_watch_left_out()) leave_without_finalize();
    dt_comm_finalize();
    return 0;
}

int dt_cmd_train(int argc, char **argv) {
    /* With --checkpoint a signal is a stop from the process's first moment: one that comes
     * while MPI starts (MPI_Init waits for every rank) stops the run as soon as the ranks can
     * agree on it (after the second step), with its checkpoint, status 5 and line; the default
     * action would kill the rank with nothing said. Before dt_guard_rank, so that the rank has
     * it from its fork on. */
    if (checkpoint_given(argc, argv)) stop_on_signals(1);
    dt_guard_rank(argv); /* under dtrain run: a parent that sees how this rank ends */
    int ntyped;
    const char *env = getenv(DT_COMMAND_ENV);
    char **typed = typed_command(argc, argv, env, &ntyped);
    dt_comm comm;
    if (dt_comm_init(&argc, &argv, &comm) != DT_OK) return dt_cli_fail();
    if (comm.size == 1 && launched_alone()) {
        dt_comm_finalize();
        return 2;
    }
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    dt_watch_identify(comm.rank, (int)getpid(), host);
    static dt_train_flags f;
    static dt_scheme_choice scheme;
    const int parsed = parse_flags(&comm, argc, argv, &f, &scheme);
    if (parsed >= 0) return parsed;
    dt_train_config *c = &f.c;
    /* simulated ranks have no wall clock to miss: their waits are timed on the simulated clock
     * (comm/sim_poll.h), not by the watchdog thread */
    dt_sim_poll_limits(f.timeout, c->scheme.name);
    if (comm.size > 1 && !dt_sim_active() && dt_watch_start(f.timeout, c->scheme.name) != 0)
        fprintf(stderr, "dtrain: warning: rank %d: cannot start the watchdog thread: --timeout is off\n", comm.rank);
    c->command = typed;
    c->ncommand = typed ? ntyped : 0;
    const int resume_auto = dt_resume_auto_asked(&f);
    dt_status st = resolve_run(&comm, &f, resume_auto, env, argc, argv);
    if (report_agreed(&comm, st)) {
        dt_comm_finalize();
        return 2;
    }
    /* a scheme of several ranks started alone trains as local would: said, not refused (a
     * single-process run of a scheme is a valid check of it) */
    if (comm.size == 1 && strcmp(c->scheme.name, "local") != 0 && !env && !under_launcher() &&
        !getenv("DTRAIN_NO_SETUP_WARNINGS"))
        fprintf(stderr, "dtrain train: --algo %s on one process (not under mpiexec): use dtrain run -n N\n", c->scheme.name);
    if (f.no_augment) c->augment = 0;
    /* --checkpoint: SIGTERM (Slurm's preemption and time limit) and SIGINT stop every rank
     * after one step, with a checkpoint of it (trainer/stop.c); without, they end the run,
     * also one that came while MPI started (a --checkpoint the first look saw was another
     * flag's value) */
    stop_on_signals(c->checkpoint != NULL);
    if (!c->checkpoint && dt_trainer_stop_requested()) raise(dt_trainer_stop_requested());
    dt_runtime_init();
    dt_trainer t;
    st = dt_trainer_init(&t, c, &scheme);
    /* (collective: every rank resumes alike) */
    if (resume_auto && c->resume && finished_before(&comm, &t, c)) {
        /* said even with --quiet: it is all this run does */
        if (comm.rank == 0) {
            printf("dtrain: --resume auto: checkpoint %s is of the finished run (%d of %d epochs%s%s): nothing to train\n",
                   c->checkpoint, t.start_epoch, c->epochs, c->weights_out ? "; its weights: " : "",
                   c->weights_out ? c->weights_out : "");
            fflush(stdout);
        }
        dt_trainer_free(&t);
        dt_watch_end(DT_RANK_FINISHING, 0); /* for dtrain run: a run complete, not a failure */
        dt_comm_finalize();
        return 0;
    }
    if (st == DT_OK && resume_auto && comm.rank == 0 && !c->quiet) dt_resume_auto_say(&f);
    int failed = report_agreed(&comm, st);
    if (!failed) failed = report_agreed(&comm, dt_trainer_start(&t)); /* collective set-up, --resume's state */
    if (failed) {
        dt_trainer_free(&t);
        dt_comm_finalize();
        return 2;
    }
    st = dt_trainer_run(&t);
    const double final_acc = t.last.test_acc, final_loss = t.last.test_loss;
    const int text = t.train.text;
    int rank = t.comm.rank, size = t.comm.size, stop_signal = t.stop_signal;
    dt_trainer_free(&t);
    return run_ended(st, c, rank, size, stop_signal, text, final_acc, final_loss);
}
