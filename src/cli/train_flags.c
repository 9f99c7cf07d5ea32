/* The flags of dtrain train and run (train_flags.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/train_flags.h"
#include "cli/rundir.h"
#include "cli/tee.h"
#include "core/tensorfile.h"
#include "trainer/trainer.h"

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

static void scheme_options(dt_train_flags *f, dt_opt *opts, int *nopts) {
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

int dt_train_options(dt_train_flags *f, dt_opt *opts) {
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
dt_status dt_scheme_values(dt_train_flags *f) {
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
dt_status dt_run_length(dt_train_flags *f) {
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
void dt_usage_with_schemes(char *out, size_t len, const char *head) {
    int n;
    const dt_scheme *const *all = dt_schemes(&n);
    size_t o = (size_t)snprintf(out, len, "%s\n\nschemes (--algo):", head);
    for (int i = 0; i < n && o < len; i++) o += (size_t)snprintf(out + o, len - o, "\n  %-10s %s", all[i]->name, all[i]->summary);
}

/* Flags of `run`: train's, then RUN_OPTS of its own (opts has room for MAX_OPTS + RUN_OPTS). */
int dt_run_options(dt_train_flags *f, dt_opt *opts) {
    int nopts = dt_train_options(f, opts);
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
dt_status dt_resolve_outputs(dt_train_flags *f, int rank) {
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
dt_status dt_start_run_dir(const dt_train_flags *f, char *const *argv, int argc) {
    char console[4200];
    dt_status st = dt_run_dir_make(f->run_dir, f->c.resume != NULL);
    if (st == DT_OK) st = dt_run_dir_command(f->run_dir, argv, argc);
    if (st == DT_OK) st = dt_run_dir_path(f->run_dir, "console.txt", console, sizeof console);
    if (st == DT_OK) st = dt_console_tee(console);
    return st;
}
