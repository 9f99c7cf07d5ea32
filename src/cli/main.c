/* dtrain command-line tool: subcommands train, eval, info, bench. Every runtime error is
 * one line on stderr and exit status 2. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/guard.h"
#include "cli/rundir.h"
#include "cli/supervise.h"
#include "cli/sweep.h"
#include "cli/tee.h"
#include "comm/watch.h"
#include "comm/comm.h"
#include "core/paths.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "algorithms/strategy.h"
#include "trainer/trainer.h"

#define NOPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int fail(void) {
    fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
    return 2;
}

/* Debian's OpenBLAS 0.3.21 does not know recent AVX-512 CPUs (e.g. Zen 5); with a preset or
 * detected AVX2 kernel family (OPENBLAS_CORETYPE=Haswell, Zen) it runs at half the speed. The
 * kernel family is fixed when the library loads, so when the CPU has AVX-512 but an AVX2 family
 * is in use we set OPENBLAS_CORETYPE=SkylakeX (and one BLAS thread) and re-execute ourselves
 * once. DTRAIN_BLAS_AUTO=0 keeps the environment as it is. */
static int is_avx512_core(const char *core) {
    return core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake") ||
                    !strcasecmp(core, "sapphirerapids"));
}

static void ensure_fast_blas(char **argv) {
    const char *opt = getenv("DTRAIN_BLAS_AUTO");
    if ((opt && !strcmp(opt, "0")) || getenv("DTRAIN_REEXECED")) return;
    int reexec = 0;
    if (!getenv("OPENBLAS_NUM_THREADS")) { setenv("OPENBLAS_NUM_THREADS", "1", 1); reexec = 1; }
    __builtin_cpu_init();
    const char *core = openblas_get_corename();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && !is_avx512_core(core)) {
        setenv("DTRAIN_BLAS_WAS", core ? core : "unknown", 1);
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        reexec = 1;
    }
    if (!reexec) return;
    setenv("DTRAIN_REEXECED", "1", 1);
    /* by its real path: exec of /proc/self/exe would name the process "exe" in ps and top */
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) { self[len] = 0; execv(self, argv); }
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with what we have */
}

/* Flags of `train` (and `run`, which passes them on): the run's own, then every scheme's,
 * taken from the registry (strategy.h), each flag once however many schemes declare it. */
#define MAX_OPTS (48 + DT_ALGO_MAX_SET)

typedef struct train_flags {
    dt_train_config c;
    const char *out, *run_dir, *target_on;
    int no_augment, no_save, ranks, max_steps, redone_steps, images;
    float timeout;                   /* the watchdog's, seconds (0: none) */
    int max_restarts;                /* run: restarts after a lost rank */
    float start_timeout;             /* run: seconds for every rank to start */
    const char *hostfile, *hosts;    /* run: where the ranks go */
    int nscheme;                     /* the schemes' flags */
    struct {
        const dt_flag *flag;
        const char *text;            /* as given, or NULL */
        int on;                      /* switches */
        char help[240];
    } scheme[DT_ALGO_MAX_SET];
    char algo_help[200], compress_help[240];
} train_flags;

/* "dpsgd, eventgrad: HELP [DEFAULT]": who takes the flag, what it does, its default. */
static void scheme_flag_help(const dt_flag *f, char *out, size_t len) {
    int n;
    const dt_scheme *const *all = dt_schemes(&n);
    size_t o = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < all[i]->nflags; k++)
            if (!strcmp(all[i]->flags[k].name, f->name))
                o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s", o ? ", " : "", all[i]->name);
    if (o < len) snprintf(out + o, len - o, ": %s%s%s%s", f->help, f->type == DT_FLAG_SWITCH ? "" : " [",
                          f->type == DT_FLAG_SWITCH ? "" : f->def, f->type == DT_FLAG_SWITCH ? "" : "]");
}

static void scheme_options(train_flags *f, dt_opt *opts, int *nopts) {
    int n;
    const dt_scheme *const *all = dt_schemes(&n);
    char *w = f->compress_help;
    size_t o = (size_t)snprintf(w, sizeof f->compress_help, "payload codec none | fp16 | bf16 | int8 | topk:F (0 < F <= 1), for ");
    for (int i = 0; i < n; i++)
        if (all[i]->compress != DT_COMPRESS_NO && o < sizeof f->compress_help)
            o += (size_t)snprintf(w + o, sizeof f->compress_help - o, "%s%s, ", all[i]->name,
                                  all[i]->compress == DT_COMPRESS_WITH_SYNC ? " with --sync" : "");
    if (o >= 2 && o < sizeof f->compress_help) snprintf(w + o - 2, sizeof f->compress_help - o + 2, " [none]");
    opts[(*nopts)++] = (dt_opt){"compress", OPT_STR, &f->c.algo.compress, f->compress_help, 0, 0, 0, 0, NULL};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < all[i]->nflags; k++) {
            const dt_flag *fl = &all[i]->flags[k];
            int seen = 0;
            for (int q = 0; q < f->nscheme && !seen; q++) seen = !strcmp(f->scheme[q].flag->name, fl->name);
            if (seen || f->nscheme == DT_ALGO_MAX_SET) continue;
            const int q = f->nscheme++;
            f->scheme[q].flag = fl;
            scheme_flag_help(fl, f->scheme[q].help, sizeof f->scheme[q].help);
            if (fl->type == DT_FLAG_SWITCH)
                opts[(*nopts)++] = (dt_opt){fl->name, OPT_FLAG, &f->scheme[q].on, f->scheme[q].help, 0, 0, 0, fl->test_only, NULL};
            else
                opts[(*nopts)++] = (dt_opt){fl->name, OPT_STR, &f->scheme[q].text, f->scheme[q].help, 0, 0, 0, fl->test_only,
                                            fl->type == DT_FLAG_INT ? "N" : fl->type == DT_FLAG_FLOAT ? "X" : "S"};
        }
}

static int train_options(train_flags *f, dt_opt *opts) {
    dt_train_config *c = &f->c;
    memset(f, 0, sizeof *f);
    dt_train_config_defaults(c);
    c->epochs = 0; /* not given: the default, unless --images sets them (run_length) */
    c->algo.algo = "local";
    f->ranks = 4;
    f->timeout = 300;
    f->start_timeout = 60;
    snprintf(f->algo_help, sizeof f->algo_help, "%s [local]", dt_strategy_names());
    for (char *p = f->algo_help; *p; p++)
        if (p[0] == ',' && p[1] == ' ') { memmove(p + 2, p + 1, strlen(p + 1) + 1); p[0] = ' '; p[1] = '|'; }
    const dt_opt run[] = {
        {"model", OPT_STR, &c->model, "model name or spec file (dtrain info --list) [cnn1]", 0, 0, 0, 0, NULL},
        {"data", OPT_STR, &c->data, "mnist | fashion-mnist | cifar10 [mnist]", 0, 0, 0, 0, NULL},
        {"data-dir", OPT_STR, &c->data_dir, "folder with the dataset files [$DTRAIN_DATA/NAME or data/NAME]", 0, 0, 0, 0, NULL},
        {"algo", OPT_STR, &c->algo.algo, f->algo_help, 0, 0, 0, 0, NULL},
        {"split", OPT_STR, &c->split, "random | class | equal | stripe: the training set across ranks [random]", 0, 0, 0, 0, NULL},
        {"epochs", OPT_INT, &c->epochs, "epochs, >= 1 [10]", 1, 1e6, 0, 0, NULL},
        {"batch", OPT_INT, &c->batch, "mini-batch size per rank, >= 1 [64]", 1, 1e6, 0, 0, NULL},
        {"lr", OPT_FLOAT, &c->lr, "learning rate, > 0 [0.05]", 0, 1e6, 1, 0, NULL},
        {"momentum", OPT_FLOAT, &c->momentum, "momentum in [0, 1) [0]", 0, 0.999999, 0, 0, NULL},
        {"nesterov", OPT_FLAG, &c->nesterov, "Nesterov momentum", 0, 0, 0, 0, NULL},
        {"weight-decay", OPT_FLOAT, &c->weight_decay, "L2 weight decay, >= 0 [0]", 0, 1e6, 0, 0, NULL},
        {"schedule", OPT_STR, &c->schedule, "const | step:EVERY:GAMMA | cosine[:MIN_LR] [const]", 0, 0, 0, 0, NULL},
        {"seed", OPT_SEED, &c->seed, "run seed (weights, split, shuffling, dropout) [1]", 0, 0, 0, 0, NULL},
        {"max-steps", OPT_INT, &f->max_steps, "stop after N steps per rank [no limit]", 1, 2e9, 0, 0, NULL},
        {"eval-every", OPT_INT, &c->eval_every, "evaluate the averaged model every N epochs; 0: only at the end [1]", 0, 1e6, 0, 0, NULL},
        {"eval-every-steps", OPT_INT, &c->eval_every_steps, "... and every N steps in between (not counted as training time) [0: never]", 1, 1e9, 0, 0, NULL},
        {"target-acc", OPT_FLOAT, &c->target_acc, "stop at the first evaluation with this test accuracy, in (0, 1]; the summary gives the time to it [none]", 0, 1, 1, 0, NULL},
        {"target-on", OPT_STR, &f->target_on, "test | val: the accuracy --target-acc is about; val (with --val N) for a search that must not look at the test set [test]", 0, 0, 0, 0, NULL},
        {"train-limit", OPT_INT, &c->train_limit, "use only the first N training examples [all]", 1, 1e9, 0, 0, NULL},
        {"test-limit", OPT_INT, &c->test_limit, "use only the first N test examples [all]", 1, 1e9, 0, 0, NULL},
        {"val", OPT_INT, &c->val, "hold out the last N training examples (after --train-limit) as a validation set, evaluated with the test set [0: none]", 1, 1e9, 0, 0, NULL},
        {"images", OPT_INT, &f->images, "train until N images were seen by all training ranks: ceil(N / (batch x ranks)) steps per rank, as many epochs as that takes (not with --epochs)", 1, 2e9, 0, 0, NULL},
        {"progress", OPT_INT, &c->progress, "every N steps: a step line in the log (rank 0's mean loss) and, without a live line, a progress line [0: none]", 1, 1e9, 0, 0, NULL},
        {"no-augment", OPT_FLAG, &f->no_augment, "no random crop/flip (CIFAR)", 0, 0, 0, 0, NULL},
        {"out", OPT_STR, &f->out, "final weights file, replaced [DIR/model.weights with --run-dir, else dtrain-MODEL-DATA-ALGO.weights, "
                                  "which replaces only the weights of an earlier run of the same model, data and --algo]", 0, 0, 0, 0, NULL},
        {"run-dir", OPT_STR, &f->run_dir, "a folder for the run (created): DIR/log.jsonl, DIR/model.weights (unless --log, --out), "
                                          "DIR/command.txt, DIR/console.txt (what it prints); refused if it holds a finished run, unless --resume; "
                                          "checkpoints go where --checkpoint says (by convention DIR/checkpoint)", 0, 0, 0, 0, "DIR"},
        {"no-save", OPT_FLAG, &f->no_save, "do not write final weights", 0, 0, 0, 0, NULL},
        {"log", OPT_STR, &c->log_path, "JSON-lines log: the configuration, one line per epoch, a summary; an existing log is "
                                       "appended to (a resumed run adds its config line and epochs)", 0, 0, 0, 0, NULL},
        {"checkpoint", OPT_STR, &c->checkpoint, "checkpoint after every epoch (several ranks: parts FILE.eE.rankR, committed by the manifest FILE)", 0, 0, 0, 0, NULL},
        {"resume", OPT_STR, &c->resume, "continue from a checkpoint", 0, 0, 0, 0, NULL},
        {"trace", OPT_STR, &c->trace, "a timeline of every rank (Chrome trace-event JSON, for ui.perfetto.dev or chrome://tracing), "
                                      "of the steps --trace-steps A:B [10:60]", 0, 0, 0, 0, "FILE"},
        {"trace-steps", OPT_STR, &c->trace_steps, "the steps A..B-1 of each rank that --trace records [10:60]", 0, 0, 0, 0, "A:B"},
        {"quiet", OPT_FLAG, &c->quiet, "no progress output", 0, 0, 0, 0, NULL},
        {"timeout", OPT_FLOAT, &f->timeout, "end the job when an MPI wait makes no progress for this long, seconds; 0: never [300]", 0, 1e7, 0, 0, NULL},
        /* a supervisor's restart says so (dtrain run --max-restarts): reported in the summary */
        {"restarts", OPT_INT, &c->restarts, "restarts before this attempt", 0, 1e6, 0, 1, NULL},
        {"redone-steps", OPT_INT, &f->redone_steps, "steps trained again after restarts", 0, 2e9, 0, 1, NULL},
    };
    memcpy(opts, run, sizeof run);
    int n = NOPTS(run);
    scheme_options(f, opts, &n);
    return n;
}

/* After parsing: --target-on's word, and the schemes' flags that were given go into the
 * configuration, which is then checked against the chosen scheme's declarations (one line
 * naming the flag). */
static dt_status scheme_values(train_flags *f) {
    dt_status st = DT_OK;
    if (f->target_on && strcmp(f->target_on, "test") && strcmp(f->target_on, "val"))
        return dt_fail(DT_ERR_ARG, "--target-on %s: expected test or val", f->target_on);
    f->c.target_on_val = f->target_on && !strcmp(f->target_on, "val");
    if (f->c.target_on_val && (f->c.val <= 0 || !(f->c.target_acc > 0)))
        return dt_fail(DT_ERR_ARG, "--target-on val: needs --val N (the held-out set) and --target-acc A");
    for (int q = 0; q < f->nscheme && st == DT_OK; q++) {
        if (f->scheme[q].flag->type == DT_FLAG_SWITCH) {
            if (f->scheme[q].on) st = dt_algo_config_set(&f->c.algo, f->scheme[q].flag->name, "1");
        } else if (f->scheme[q].text) {
            st = dt_algo_config_set(&f->c.algo, f->scheme[q].flag->name, f->scheme[q].text);
        }
    }
    return st == DT_OK ? dt_algo_check(&f->c.algo) : st;
}

/* --images sets the epochs (the trainer derives them): not with --epochs or --max-steps given. */
static dt_status run_length(train_flags *f) {
    if (f->images && f->c.epochs)
        return dt_fail(DT_ERR_ARG, "--images %d: not with --epochs %d (--images sets the epochs it takes)", f->images, f->c.epochs);
    if (f->images && f->max_steps)
        return dt_fail(DT_ERR_ARG, "--images %d: not with --max-steps %d (both set the run's length; give one)", f->images,
                       f->max_steps);
    dt_train_config d;
    dt_train_config_defaults(&d);
    if (!f->c.epochs) f->c.epochs = d.epochs;
    f->c.images = f->images;
    return DT_OK;
}

/* The scheme list for --help. */
static void usage_with_schemes(char *out, size_t len, const char *head) {
    int n;
    const dt_scheme *const *all = dt_schemes(&n);
    size_t o = (size_t)snprintf(out, len, "%s\n\nschemes (--algo):", head);
    for (int i = 0; i < n && o < len; i++) o += (size_t)snprintf(out + o, len - o, "\n  %-10s %s", all[i]->name, all[i]->summary);
}

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

/* The default weights file is replaced only when it holds the weights of an earlier run of
 * the same model, data and scheme (the same command run again): never another file. */
static dt_status check_default_out(const char *path, const dt_train_config *c) {
    struct stat sb;
    if (stat(path, &sb) != 0) return DT_OK;
    dt_weights_meta w = {0};
    const int ours = dt_weights_meta_read(path, &w) == DT_OK && w.model && w.data && w.algo && !strcmp(w.data, c->data) &&
                     !strcmp(w.algo, c->algo.algo) && dt_weights_meta_same_model(&w, c->model);
    dt_weights_meta_free(&w);
    return ours ? DT_OK
                : dt_fail(DT_ERR_ARG, "%s exists and is not the weights of an earlier run of %s on %s with --algo %s: "
                          "not replaced; use --out FILE (or --run-dir DIR)", path, c->model, c->data, c->algo.algo);
}

/* Where the run writes: --run-dir's defaults, else the default weights name (checked on
 * rank 0, which writes it). Explicit --log and --out win. */
static dt_status resolve_outputs(train_flags *f, int rank) {
    static char log[4200], out[4200], named[512];
    dt_train_config *c = &f->c;
    dt_status st = DT_OK;
    if (f->run_dir) {
        c->run_dir = f->run_dir;
        if (!c->log_path && (st = dt_run_dir_path(f->run_dir, "log.jsonl", log, sizeof log)) == DT_OK) c->log_path = log;
        if (st == DT_OK && !f->out && !f->no_save && (st = dt_run_dir_path(f->run_dir, "model.weights", out, sizeof out)) == DT_OK)
            f->out = out;
    }
    if (st == DT_OK && !f->out && !f->no_save) {
        const char *base = strrchr(c->model, '/') ? strrchr(c->model, '/') + 1 : c->model;
        snprintf(named, sizeof named, "dtrain-%s-%s-%s.weights", base, c->data, c->algo.algo);
        f->out = named;
        if (rank == 0) st = check_default_out(named, c);
    }
    c->weights_out = f->no_save ? NULL : f->out;
    return st;
}

/* The run folder itself, by the process that keeps it (train's rank 0, or run's supervisor):
 * created, the command written, and from now on what this process prints copied into it. */
static dt_status start_run_dir(const train_flags *f, char *const *argv, int argc) {
    char console[4200];
    dt_status st = dt_run_dir_make(f->run_dir, f->c.resume != NULL);
    if (st == DT_OK) st = dt_run_dir_command(f->run_dir, argv, argc);
    if (st == DT_OK) st = dt_run_dir_path(f->run_dir, "console.txt", console, sizeof console);
    if (st == DT_OK) st = dt_console_tee(console);
    return st;
}

static int cmd_train(int argc, char **argv) {
    dt_guard_rank(argv); /* under dtrain run: a parent that sees how this rank ends */
    /* the command as typed, for the log: under dtrain run the supervisor's (this rank's argv is
     * mpiexec's), else this process's own */
    static char **typed;
    static int ntyped;
    const char *env = getenv(DT_COMMAND_ENV);
    if (env) typed = dt_shell_split(env, &ntyped);
    if (!typed && (typed = malloc(((size_t)argc + 1) * sizeof *typed))) {
        memcpy(typed, argv, ((size_t)argc + 1) * sizeof *typed);
        ntyped = argc;
    }
    dt_comm comm;
    if (dt_comm_init(&argc, &argv, &comm) != DT_OK) return fail();
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    dt_watch_identify(comm.rank, (int)getpid(), host);
    static train_flags f;
    dt_opt opts[MAX_OPTS];
    int nopts = train_options(&f, opts), help;
    dt_status st = dt_parse_args("train", argc, argv, 2, opts, nopts, &help);
    if (st == DT_OK && !help) st = scheme_values(&f);
    if (st == DT_OK && !help) st = run_length(&f);
    if (st != DT_OK || help) {
        if (comm.rank == 0) {
            char usage[1400];
            usage_with_schemes(usage, sizeof usage, "[flags]\n\nTrains a model and writes its final weights. Under mpiexec (or dtrain run) the\n"
                                                    "ranks train together with --algo; alone it trains on one process.");
            if (st != DT_OK) fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
            else dt_print_help("train", usage, opts, nopts);
        }
        dt_comm_finalize();
        return st != DT_OK ? 2 : 0;
    }
    dt_train_config *c = &f.c;
    if (comm.size > 1 && dt_watch_start(f.timeout, c->algo.algo) != 0)
        fprintf(stderr, "dtrain: warning: rank %d: cannot start the watchdog thread: --timeout is off\n", comm.rank);
    c->max_steps = f.max_steps;
    c->redone_steps = f.redone_steps;
    c->command = typed;
    c->ncommand = typed ? ntyped : 0;
    st = resolve_outputs(&f, comm.rank);
    /* under dtrain run the supervisor keeps the run folder (and the console of every rank) */
    if (st == DT_OK && f.run_dir && comm.rank == 0 && !env) st = start_run_dir(&f, argv, argc);
    if (report_agreed(&comm, st)) {
        dt_comm_finalize();
        return 2;
    }
    if (f.no_augment) c->augment = 0;
    dt_runtime_init();
    dt_trainer t;
    st = dt_trainer_init(&t, c);
    int failed = report_agreed(&comm, st);
    if (!failed) failed = report_agreed(&comm, dt_trainer_start(&t)); /* collective set-up, --resume's state */
    if (failed) {
        dt_trainer_free(&t);
        dt_comm_finalize();
        return 2;
    }
    st = dt_trainer_run(&t);
    double final_acc = t.last.test_acc;
    int rank = t.comm.rank, size = t.comm.size;
    dt_trainer_free(&t);
    if (st == DT_ERR_DIVERGED) {
        /* agreed by every rank: said once, and the run ends with its own status */
        if (rank == 0) fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
        dt_comm_finalize();
        return 3;
    }
    if (st != DT_OK) {
        /* mid-run errors are this rank's own: say which, and stop the others */
        if (size > 1) {
            fprintf(stderr, "dtrain: error: rank %d: %s\n", rank, dt_last_error());
            fflush(stderr);
            /* said: the supervisor must not add a line of its own when MPI_Abort's kills
             * reach this rank's guard as signals */
            dt_watch_end(DT_RANK_FAILED, 2);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        dt_comm_finalize();
        return fail();
    }
    if (!c->quiet && c->weights_out && rank == 0)
        printf("final test accuracy %.2f%%, weights written to %s\n", 100 * final_acc, c->weights_out);
    fflush(stdout);
    dt_watch_end(DT_RANK_FINISHING, 0);
    if (dt_watch_left_out()) leave_without_finalize();
    dt_comm_finalize();
    return 0;
}

/* Starts N ranks of `dtrain train` with mpiexec and supervises them (supervise.h). Flags are
 * checked here first, so a typo is reported once, not by every rank. */
#define RUN_OPTS 5 /* run's own flags, after train's */

/* Flags of `run`: train's, then RUN_OPTS of its own (opts has room for MAX_OPTS + RUN_OPTS). */
static int run_options(train_flags *f, dt_opt *opts) {
    int nopts = train_options(f, opts);
    opts[nopts++] = (dt_opt){"n", OPT_INT, &f->ranks, "number of ranks [4]", 1, 1e5, 0, 0, NULL};
    opts[nopts++] = (dt_opt){"max-restarts", OPT_INT, &f->max_restarts,
                             "when a rank is lost or stalls, start the job again (from the newest checkpoint every rank has) up to N times [0]",
                             0, 1000, 0, 0, NULL};
    opts[nopts++] = (dt_opt){"hostfile", OPT_STR, &f->hostfile, "the hosts to run on, one per line (host or host:slots), passed to mpiexec", 0, 0, 0, 0, "FILE"};
    opts[nopts++] = (dt_opt){"hosts", OPT_STR, &f->hosts, "the hosts to run on: a,b or a:2,b:2, passed to mpiexec", 0, 0, 0, 0, "LIST"};
    opts[nopts++] = (dt_opt){"start-timeout", OPT_FLOAT, &f->start_timeout,
                             "end the job when a rank has not started (MPI initialised) after this long, seconds [60]", 0, 1e7, 1, 0, NULL};
    return nopts;
}

/* A hostfile must be readable and name a host: one that names none would let mpiexec run
 * every rank here, silently. */
static dt_status check_hostfile(const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp) return dt_fail(DT_ERR_ARG, "--hostfile %s: cannot read it: %s", path, strerror(errno));
    char line[1024];
    int hosts = 0;
    while (fgets(line, sizeof line, fp)) {
        const char *p = line + strspn(line, " \t\r\n");
        hosts += *p && *p != '#';
    }
    fclose(fp);
    return hosts ? DT_OK : dt_fail(DT_ERR_ARG, "--hostfile %s: names no host (expected one per line: NAME or NAME:SLOTS)", path);
}

static int cmd_run(int argc, char **argv) {
    static train_flags f;
    dt_opt opts[MAX_OPTS + RUN_OPTS];
    int nopts = run_options(&f, opts), help;
    const int run_first = nopts - RUN_OPTS;
    /* -n N is the usual spelling: accept it as --n */
    char **args = malloc((size_t)argc * sizeof *args);
    if (!args) return 2;
    for (int i = 0; i < argc; i++) args[i] = (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-np")) ? "--n" : argv[i];
    dt_status st = dt_parse_args("run", argc, args, 2, opts, nopts, &help);
    if (st == DT_OK && !help) st = scheme_values(&f);
    if (st == DT_OK && !help) st = run_length(&f);
    if (st == DT_OK && !help && f.hostfile && f.hosts) st = dt_fail(DT_ERR_ARG, "dtrain run: give --hostfile or --hosts, not both");
    if (st == DT_OK && !help && f.hostfile) st = check_hostfile(f.hostfile);
    /* more than a few ranks a core only slows a run down, and each holds its own copy of the
     * data (MNIST: ~80 MB): -n 100000 on one machine is a typo, not a plan */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    if (st == DT_OK && !help && !f.hostfile && !f.hosts && !getenv("DTRAIN_MPIEXEC") && f.ranks > 16 * cores)
        st = dt_fail(DT_ERR_ARG, "-n %d: more than 16 ranks per core on this machine (%ld cores, so at most %ld); "
                     "use --hosts or --hostfile to run more", f.ranks, cores, 16 * cores);
    /* as rank 0 would, before any rank starts: one line, not one per rank */
    /* dtrain sweep checks every run's flags before it starts any (src/cli/sweep.c): nothing made */
    const int check_only = getenv("DTRAIN_CHECK_ONLY") != NULL;
    if (st == DT_OK && !help) st = resolve_outputs(&f, 0);
    if (st == DT_OK && !help && f.run_dir && !check_only) st = start_run_dir(&f, argv, argc);
    if (st == DT_OK && !help) st = dt_train_check_paths(&f.c, 0);
    if (st != DT_OK) { free(args); return fail(); }
    if (!help && check_only) { free(args); return 0; }
    if (help) {
        char usage[1400];
        usage_with_schemes(usage, sizeof usage, "-n N [--hostfile FILE | --hosts LIST] [--max-restarts N] [train flags]\n\n"
                           "Starts N ranks of dtrain train under mpiexec ($DTRAIN_MPIEXEC or mpiexec) and watches them: a lost\n"
                           "or stalled rank is named in one line, the launcher's own messages go to a file that line names.");
        dt_print_help("run", usage, opts, nopts);
        free(args);
        return 0;
    }
    /* $DTRAIN_MPIEXEC may be a command with its own arguments (e.g. scripts/netcluster mpiexec) */
    static char launcher[1024];
    snprintf(launcher, sizeof launcher, "%s", getenv("DTRAIN_MPIEXEC") ? getenv("DTRAIN_MPIEXEC") : "mpiexec");
    char *lv[16];
    int nl = 0;
    for (char *tok = strtok(launcher, " \t"); tok && nl < 15; tok = strtok(NULL, " \t")) lv[nl++] = tok;
    if (nl == 0) { free(args); dt_fail(DT_ERR_ARG, "DTRAIN_MPIEXEC is empty"); return fail(); }
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
            return fail();
        }
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) { free(args); dt_fail(DT_ERR_IO, "dtrain run: cannot find my own executable"); return fail(); }
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
            const char *name = a + 2, *eq = strchr(name, '=');
            const size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
            if (eq) with_value = 0;
            for (int o = run_first; o < nopts; o++)
                if (strlen(opts[o].name) == nlen && !strncmp(opts[o].name, name, nlen)) skip = 1;
            if (nlen == 6 && !strncmp(name, "resume", 6)) skip = 1;
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
                  .resume = f.c.resume};
    const int rc = dt_supervise(&job);
    free(av);
    free(args);
    dt_console_close();
    return rc;
}

/* The model a weights file is evaluated with: --model, else the one the file names (its spec
 * text), else cnn1 (files of older builds name none). A --model or --data that contradicts
 * the file is refused: weights evaluated on the wrong data give a plausible, wrong figure. */
static dt_status eval_model(const char *model, const char *data, const char *weights, const dt_weights_meta *w,
                            dt_model **m) {
    if (model && !dt_weights_meta_same_model(w, model))
        return dt_fail(DT_ERR_ARG, "eval: --model %s: %s holds weights of %s", model, weights, w->model);
    if (data && w->data && strcmp(data, w->data) != 0)
        return dt_fail(DT_ERR_ARG, "eval: --data %s: %s was trained on %s", data, weights, w->data);
    if (model) return dt_model_open(model, m);
    if (!w->spec) return dt_model_open(w->model ? w->model : "cnn1", m);
    char origin[1100];
    snprintf(origin, sizeof origin, "%s (its model %s)", weights, w->model ? w->model : "");
    return dt_model_from_spec(w->spec, origin, m);
}

static int cmd_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *data_dir = NULL, *weights = NULL;
    int batch = 256, limit = 0;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [the one the weights file names, else cnn1]", 0, 0, 0, 0, NULL},
        {"weights", OPT_STR, &weights, "weights file written by dtrain train (required)", 0, 0, 0, 0, NULL},
        {"data", OPT_STR, &data, "mnist | fashion-mnist | cifar10 [the one the weights file names, else mnist]", 0, 0, 0, 0, NULL},
        {"data-dir", OPT_STR, &data_dir, "folder with the dataset files", 0, 0, 0, 0, NULL},
        {"batch", OPT_INT, &batch, "evaluation batch size [256]", 1, 1e6, 0, 0, NULL},
        {"test-limit", OPT_INT, &limit, "use only the first N test examples [all]", 1, 1e9, 0, 0, NULL},
    };
    int help;
    if (dt_parse_args("eval", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("eval", "--weights FILE [flags]\n\nTest accuracy of saved weights. The file names its model and dataset "
                              "(files of older\nbuilds do not: give --model and --data).", opts, NOPTS(opts));
        return 0;
    }
    if (!weights) { dt_fail(DT_ERR_ARG, "dtrain eval: --weights FILE is required"); return fail(); }
    if (dt_check_input("--weights", weights) != DT_OK) return fail();
    dt_runtime_init();
    dt_weights_meta w;
    if (dt_weights_meta_read(weights, &w) != DT_OK) return fail();
    dt_model *m = NULL;
    dt_dataset test = {0};
    double acc = 0, loss = 0;
    dt_status st = eval_model(model, data, weights, &w, &m);
    if (!data) data = w.data ? w.data : "mnist";
    char dir[1024];
    dt_data_dir(data, data_dir, dir, sizeof dir);
    if (st == DT_OK && (st = dt_model_load(m, weights)) != DT_OK && !w.model) {
        /* a file of an older build does not name its model: its shapes tell it is another */
        char why[900];
        snprintf(why, sizeof why, "%s", dt_last_error());
        st = dt_fail(st, "eval: --model %s: %s (weights of another model?)", model ? model : "cnn1", why);
    }
    if (st == DT_OK) st = dt_dataset_load(data, dir, 0, &test);
    if (st == DT_OK) st = dt_evaluate(m, &test, batch, limit, &acc, &loss);
    int n = limit > 0 && limit < test.n ? limit : test.n;
    dt_dataset_free(&test);
    dt_model_free(m);
    dt_weights_meta_free(&w);
    if (st != DT_OK) return fail();
    printf("test accuracy %.2f%% (%ld/%d), loss %.4f\n", 100 * acc, (long)(acc * n + 0.5), n, loss);
    return 0;
}

static int cmd_info(int argc, char **argv) {
    const char *model = "cnn1";
    int spec = 0, list = 0;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0, 0, NULL},
        {"spec", OPT_FLAG, &spec, "print the model's spec text", 0, 0, 0, 0, NULL},
        {"list", OPT_FLAG, &list, "list the built-in models", 0, 0, 0, 0, NULL},
    };
    int help;
    if (dt_parse_args("info", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("info", "[--model NAME]\n\nLayers, output shapes, parameters and FLOPs of a model.", opts, NOPTS(opts));
        return 0;
    }
    if (list) {
        for (const char *const *n = dt_model_names(); *n; n++) printf("%s\n", *n);
        return 0;
    }
    if (spec) {
        char *text = dt_model_spec_text(model);
        if (!text) { dt_model *m; if (dt_model_from_name(model, &m) != DT_OK) return fail(); }
        fputs(text, stdout);
        free(text);
        return 0;
    }
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return fail();
    printf("model %s\n", model);
    dt_model_print(m, stdout);
    dt_model_free(m);
    return 0;
}


/* Training-step speed on random data (no data loading, no evaluation), for bench/run. */
static int cmd_bench(int argc, char **argv) {
    const char *model = "cnn1";
    int batch = 64, warmup = 20, steps = 200;
    float lr = 0.01f, momentum = 0.9f;
    dt_opt opts[] = {
        {"model", OPT_STR, &model, "model name or spec file [cnn1]", 0, 0, 0, 0, NULL},
        {"batch", OPT_INT, &batch, "batch size [64]", 1, 1e6, 0, 0, NULL},
        {"warmup", OPT_INT, &warmup, "untimed steps first [20]", 0, 1e9, 0, 0, NULL},
        {"steps", OPT_INT, &steps, "timed steps [200]", 1, 1e9, 0, 0, NULL},
        {"lr", OPT_FLOAT, &lr, "learning rate [0.01]", 0, 1e6, 1, 0, NULL},
        {"momentum", OPT_FLOAT, &momentum, "momentum [0.9]", 0, 0.999999, 0, 0, NULL},
    };
    int help;
    if (dt_parse_args("bench", argc, argv, 2, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("bench", "[flags]\n\nTimes training steps on random data; prints one line.", opts, NOPTS(opts));
        return 0;
    }
    dt_runtime_init();
    dt_model *m = NULL;
    if (dt_model_open(model, &m) != DT_OK) return fail();
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    size_t in = (size_t)c * h * w;
    float *x = malloc((size_t)batch * in * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    dt_sgd opt;
    dt_status st = (x && y) ? dt_model_reserve(m, batch) : dt_fail(DT_ERR_NOMEM, "out of memory");
    if (st == DT_OK) st = dt_sgd_init(&opt, dt_model_num_params(m), momentum, 0, 0);
    if (st != DT_OK) { free(x); free(y); dt_model_free(m); return fail(); }
    dt_rng r;
    dt_rng_seed(&r, 7);
    for (size_t i = 0; i < (size_t)batch * in; i++) x[i] = 2 * dt_rng_uniform(&r) - 1;
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)dt_rng_below(&r, (uint32_t)dt_model_num_classes(m));
    dt_model_init(m, 1);
    double t0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t0 = dt_now();
        dt_model_forward(m, x, batch, 1);
        dt_model_backward(m, y, NULL);
        dt_sgd_step(&opt, dt_model_params(m), dt_model_grads(m), lr);
    }
    double secs = dt_now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("dtrain model=%s batch=%d images_per_s=%.1f fwd_flops=%.0f maxrss_kb=%ld blas=%s\n", model, batch,
           (double)steps * batch / secs, dt_model_flops(m), ru.ru_maxrss, openblas_get_corename());
    dt_sgd_free(&opt);
    free(x); free(y);
    dt_model_free(m);
    return 0;
}

/* diff compares the model's tensors and a checkpoint's momentum; the trainer's and the
 * schemes' own records (train:..., allreduce:..., raw counters among them) differ between
 * ranks by design and are not floats to compare */
static int diffed(const char *name) { return !strchr(name, ':') || !strncmp(name, "optim:", 6); }

static int diffed_records(const dt_tfile *f) {
    int n = 0;
    for (int i = 0; i < f->n; i++) n += diffed(f->recs[i].name);
    return n;
}

/* Compares two weights files tensor by tensor: the tool behind "are these two runs the same
 * model?" (and the distributed equivalence tests). */
static int cmd_diff(int argc, char **argv) {
    float tol = -1;
    dt_opt opts[] = {{"tol", OPT_FLOAT, &tol, "exit 1 when the largest difference exceeds this", 0, 1e30, 0, 0, NULL}};
    const char *files[2] = {NULL, NULL};
    int nf = 0, k = 2;
    while (k < argc && strncmp(argv[k], "--", 2) != 0 && nf < 2) files[nf++] = argv[k++];
    int help;
    if (dt_parse_args("diff", argc, argv, k, opts, NOPTS(opts), &help) != DT_OK) return fail();
    if (help) {
        dt_print_help("diff", "A.weights B.weights [--tol X]\n\nLargest absolute difference between two weights files (or checkpoints: their\nmodel and momentum; the schemes' own state is not compared).", opts, NOPTS(opts));
        return 0;
    }
    if (nf != 2) { dt_fail(DT_ERR_ARG, "dtrain diff: expected two weights files"); return fail(); }
    dt_tfile a, b;
    if (dt_tfile_read(files[0], &a) != DT_OK) return fail();
    if (dt_tfile_read(files[1], &b) != DT_OK) { dt_tfile_free(&a); return fail(); }
    double worst = 0, scale = 0;
    const char *where = "-";
    dt_status st = DT_OK;
    const int na = diffed_records(&a), nb = diffed_records(&b);
    if (na != nb) st = dt_fail(DT_ERR_FORMAT, "%s has %d tensors, %s has %d", files[0], na, files[1], nb);
    for (int i = 0; st == DT_OK && i < a.n; i++) {
        if (!diffed(a.recs[i].name)) continue;
        const dt_record *ra = &a.recs[i], *rb = dt_tfile_find(&b, ra->name);
        if (!rb || rb->numel != ra->numel) {
            st = dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' missing or of another size", files[1], ra->name);
            break;
        }
        for (size_t j = 0; j < ra->numel; j++) {
            double d = fabs((double)ra->data[j] - rb->data[j]);
            if (d > worst || d != d) { worst = d; where = ra->name; }
            if (fabs(ra->data[j]) > scale) scale = fabs(ra->data[j]);
        }
    }
    if (st == DT_OK)
        printf("max |a-b| = %.3g (in %s), max |a| = %.3g, %s\n", worst, where, scale,
               worst == 0 ? "identical" : "different");
    dt_tfile_free(&a);
    dt_tfile_free(&b);
    if (st != DT_OK) return fail();
    return tol >= 0 && !(worst <= tol) ? 1 : 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: dtrain COMMAND [flags]   (dtrain COMMAND --help for its flags)\n\n"
            "commands:\n"
            "  train   train a model (one process, or every rank under mpiexec)\n"
            "  run     start N ranks of train: dtrain run -n 4 --algo eventgrad ...\n"
            "  eval    test accuracy of saved weights\n"
            "  info    layers, shapes, parameter count and FLOPs of a model\n"
            "  bench   time training steps on random data\n"
            "  diff    largest difference between two weights files\n"
            "  sweep   the runs of an experiment file, many at once (docs/sweep.md)\n");
}

int main(int argc, char **argv) {
    ensure_fast_blas(argv);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "train")) {
        const int rc = cmd_train(argc, argv);
        dt_console_close();
        dt_watch_left();
        return rc;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc, argv);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc, argv);
    if (!strcmp(cmd, "info")) return cmd_info(argc, argv);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    if (!strcmp(cmd, "diff")) return cmd_diff(argc, argv);
    if (!strcmp(cmd, "sweep")) return dt_cmd_sweep(argc, argv);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    fprintf(stderr, "dtrain: error: unknown command '%s' (expected train, run, eval, info, bench, diff or sweep)\n", cmd);
    return 2;
}
