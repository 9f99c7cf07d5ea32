/* The flags of dtrain train and run (train_flags.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/rundir.h"
#include "cli/tee.h"
#include "cli/train_flags.h"
#include "core/tensorfile.h"
#include "trainer/trainer.h"

typedef dt_train_flags F;

/* --algo's and --compress's help: the schemes from the registry */
static char algo_help[200], compress_help[240];
static const char *const target_on_words[] = {"test", "val", NULL};

/* The run's own flags; the defaults shown by --help are the values in force before parsing
 * (dt_train_config_defaults), a zero one as .zero says. */
static const dt_flag train_flags[] = {
    {"model", DT_AT_TEXT(F, c.model), .help = "model name or spec file (dtrain info --list)"},
    {"data", DT_AT_TEXT(F, c.data), .help = "mnist | fashion-mnist | cifar10"},
    {"data-dir", DT_AT_TEXT(F, c.data_dir), .help = "folder with the dataset files", .zero = "$DTRAIN_DATA/NAME or data/NAME"},
    {"algo", DT_AT_TEXT(F, c.scheme.name), .help = algo_help},
    {"split", DT_AT_TEXT(F, c.split), .help = "random | class | equal | contiguous | stripe: how the training set is divided among the training ranks"},
    {"epochs", DT_AT_INT(F, c.epochs), DT_GIVEN(F, epochs_given), .min = 1, .max = 1e6, .help = "epochs, >= 1"},
    {"batch", DT_AT_INT(F, c.batch), .min = 1, .max = 1e6, .help = "mini-batch size per rank, >= 1"},
    {"lr", DT_AT_FLOAT(F, c.lr), .min = 0, .max = 1e6, .min_open = 1, .help = "learning rate, > 0"},
    {"optim", DT_AT_CHOICE(F, c.optim, dt_optim_names),
     .help = "sgd | adamw: the optimiser (adamw: torch.optim.AdamW's, decoupled weight decay, bias correction)"},
    {"momentum", DT_AT_FLOAT(F, c.momentum), .min = 0, .max = 0.999999, .help = "sgd: momentum in [0, 1)"},
    {"nesterov", DT_AT_SWITCH(F, c.nesterov), .help = "sgd: Nesterov momentum"},
    {"beta1", DT_AT_FLOAT(F, c.beta1), DT_GIVEN(F, adamw_given[0]), .min = 0, .max = 0.999999,
     .help = "adamw: the first moment's decay, [0, 1)"},
    {"beta2", DT_AT_FLOAT(F, c.beta2), DT_GIVEN(F, adamw_given[1]), .min = 0, .max = 0.999999,
     .help = "adamw: the second moment's decay, [0, 1) (nanoGPT's character model: 0.99)"},
    {"eps", DT_AT_FLOAT(F, c.eps), DT_GIVEN(F, adamw_given[2]), .min = 0, .max = 1,
     .help = "adamw: added to the second moment's root"},
    {"precision", DT_AT_CHOICE(F, c.precision, dt_precision_names),
     .help = "fp32 | bf16: bf16 stores activations and their gradients as bfloat16 and multiplies in conv and linear "
             "layers bf16-rounded operands with fp32 sums; weights, gradients, optimiser and checkpoints stay fp32"},
    {"plan", DT_AT_TEXT(F, c.plan), .zero = "off",
     .help = "auto | off | FILE: the kernel each layer runs, timed on this CPU (dtrain tune makes FILE; auto: made once "
             "and kept in ~/.cache/dtrain); off: the rules of the instruction set"},
    {"weight-decay", DT_AT_FLOAT(F, c.weight_decay), .min = 0, .max = 1e6,
     .help = "weight decay, >= 0: sgd adds wd*w to the gradient (L2), adamw multiplies w by 1 - lr*wd (decoupled)"},
    {"decay-on", DT_AT_CHOICE(F, c.decay_on, dt_decay_on_names),
     .help = "auto | weights | matrices | all: the tensors --weight-decay applies to; weights: of conv and linear "
             "layers (no bias, norm or embedding); matrices: every tensor of 2+ dimensions (nanoGPT's rule); auto: sgd "
             "all, adamw weights"},
    {"clip", DT_AT_FLOAT(F, c.clip), .min = 0, .max = 1e30,
     .help = "clip the gradient's global L2 norm to X before each step (torch's clip_grad_norm_); 0: never"},
    {"schedule", DT_AT_TEXT(F, c.schedule),
     .help = "const | step:EVERY:GAMMA (epochs) | cosine[:MIN_LR] (to MIN_LR at the run's last step: counted in steps "
             "with --lr-warmup, --max-steps or --images, else in epochs)"},
    {"lr-warmup", DT_AT_INT(F, c.lr_warmup), .min = 0, .max = 2e9, .zero = "0: none",
     .help = "raise the lr linearly over the first N steps, lr x (s+1)/(N+1) at step s (nanoGPT's get_lr), then "
             "--schedule"},
    {"seed", DT_AT_SEED(F, c.seed), .help = "run seed (weights, split, shuffling, dropout)"},
    {"max-steps", DT_AT_INT(F, c.max_steps), .min = 1, .max = 2e9, .help = "stop after N steps per rank", .zero = "no limit"},
    {"eval-every", DT_AT_INT(F, c.eval_every), .min = 0, .max = 1e6,
     .help = "evaluate the averaged model every N epochs; 0: only at the end"},
    {"eval-every-steps", DT_AT_INT(F, c.eval_every_steps), .min = 1, .max = 1e9,
     .help = "... and every N steps in between (not counted as training time)", .zero = "0: never"},
    {"target-acc", DT_AT_FLOAT(F, c.target_acc), .min = 0, .max = 1, .min_open = 1,
     .help = "stop at the first evaluation with this test accuracy, in (0, 1]; the summary gives the time to it", .zero = "none"},
    {"target-loss", DT_AT_FLOAT(F, c.target_loss), .min = 0, .max = 1e6, .min_open = 1,
     .help = "stop at the first evaluation with this test loss or less (nats: a language model's target); the summary gives the time to it", .zero = "none"},
    {"target-on", DT_AT_CHOICE(F, c.target_on_val, target_on_words),
     .help = "test | val: the figure --target-acc or --target-loss is about; val (with --val N) for a search that must not look at the test set"},
    {"train-limit", DT_AT_INT(F, c.train_limit), .min = 1, .max = 1e9, .help = "use only the first N training examples", .zero = "all"},
    {"test-limit", DT_AT_INT(F, c.test_limit), .min = 1, .max = 1e9, .help = "use only the first N test examples", .zero = "all"},
    {"val", DT_AT_INT(F, c.val), .min = 1, .max = 1e9,
     .help = "hold out the last N training examples (after --train-limit) as a validation set, evaluated with the test set",
     .zero = "0: none"},
    {"images", DT_AT_INT(F, c.images), .min = 1, .max = 2e9, .zero = "",
     .help = "train until N images were seen by all training ranks: ceil(N / (batch x ranks)) steps per rank, as many "
             "epochs as that takes (not with --epochs)"},
    {"progress", DT_AT_INT(F, c.progress), .min = 1, .max = 1e9,
     .help = "every N steps: a step line in the log (rank 0's mean loss) and, without a live line, a progress line", .zero = "0: none"},
    {"no-augment", DT_AT_SWITCH(F, no_augment), .help = "no random crop/flip (CIFAR)"},
    {"out", DT_AT_TEXT(F, out), .help = "final weights file, replaced",
     .zero = "DIR/model.weights with --run-dir, else dtrain-MODEL-DATA-ALGO.weights, which replaces only the weights of "
             "an earlier run of the same model, data and --algo"},
    {"run-dir", DT_AT_TEXT(F, run_dir), .metavar = "DIR",
     .help = "a folder for the run (created): DIR/log.jsonl, DIR/model.weights (unless --log, --out), DIR/command.txt, "
             "DIR/console.txt (what it prints); refused if it holds a finished run, unless --resume; checkpoints go where "
             "--checkpoint says (by convention DIR/checkpoint)"},
    {"no-save", DT_AT_SWITCH(F, no_save), .help = "do not write final weights"},
    {"log", DT_AT_TEXT(F, c.log_path), .help = "JSON-lines log: the configuration, one line per epoch, a summary; an existing "
                                               "log is appended to (a resumed run adds its config line and epochs)"},
    {"checkpoint", DT_AT_TEXT(F, c.checkpoint),
     .help = "checkpoint after every epoch (several ranks: parts FILE.eE.rankR, committed by the manifest FILE); and on "
             "SIGTERM or SIGINT every rank stops after one step, saves it and exits with status 5"},
    {"resume", DT_AT_TEXT(F, c.resume),
     .help = "continue from a checkpoint; 'auto': from --checkpoint's when it exists, else from the start (a requeued job)"},
    {"trace", DT_AT_TEXT(F, c.trace), .metavar = "FILE",
     .help = "a timeline of every rank (Chrome trace-event JSON, for ui.perfetto.dev or chrome://tracing), of the steps "
             "--trace-steps A:B [10:60]"},
    {"trace-steps", DT_AT_TEXT(F, c.trace_steps), .metavar = "A:B", .help = "the steps A..B-1 of each rank that --trace records",
     .zero = "10:60"},
    {"quiet", DT_AT_SWITCH(F, c.quiet), .help = "no progress output"},
    {"timeout", DT_AT_FLOAT(F, timeout), .min = 0, .max = 1e7,
     .help = "end the job when an MPI wait makes no progress for this long, seconds; 0: never"},
    {"compress", DT_AT_TEXT(F, c.scheme.compress), .help = compress_help, .zero = "none"},
    /* a supervisor's restart says so (dtrain run --max-restarts): reported in the summary */
    {"restarts", DT_AT_INT(F, c.restarts), .min = 0, .max = 1e6, .help = "restarts before this attempt", .hidden = 1},
    {"redone-steps", DT_AT_INT(F, c.redone_steps), .min = 0, .max = 2e9, .help = "steps trained again after restarts", .hidden = 1},
};

static const dt_flag run_flags[] = {
    {"n", DT_AT_INT(F, ranks), .min = 1, .max = 1e5, .help = "number of ranks"},
    {"max-restarts", DT_AT_INT(F, max_restarts), .min = 0, .max = 1000,
     .help = "when a rank is lost or stalls, start the job again (from the newest checkpoint every rank has) up to N times"},
    {"hostfile", DT_AT_TEXT(F, hostfile), .metavar = "FILE",
     .help = "the hosts to run on, one per line (host or host:slots), passed to mpiexec"},
    {"hosts", DT_AT_TEXT(F, hosts), .metavar = "LIST", .help = "the hosts to run on: a,b or a:2,b:2, passed to mpiexec"},
    {"start-timeout", DT_AT_FLOAT(F, start_timeout), .min = 0, .max = 1e7, .min_open = 1,
     .help = "end the job when a rank has not started (MPI initialised) after this long, seconds"},
};

/* A scheme's flag given on the command line: its text to the scheme's configuration, parsed
 * (once) by the registry against the chosen scheme's table. */
static dt_status take_scheme_flag(void *cfg, const dt_flag *f, const char *text) {
    return dt_scheme_config_set(cfg, f->name, text);
}

/* Every scheme's flag once, its help "dpsgd, eventgrad: HELP" (--help adds the default). */
static void scheme_flags(dt_train_flags *f) {
    int n;
    const dt_scheme_def *const *all = dt_schemes(&n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < all[i]->nflags; k++) {
            const dt_flag *fl = &all[i]->flags[k];
            if (dt_flag_find(f->scheme, f->nscheme, fl->name) || f->nscheme == DT_SCHEME_MAX_SET) continue;
            char *h = f->scheme_help[f->nscheme];
            const size_t len = sizeof f->scheme_help[0];
            const size_t o = dt_schemes_where(h, len, ", ", dt_scheme_takes_flag, fl->name);
            if (o < len) snprintf(h + o, len - o, ": %s", fl->help);
            f->scheme[f->nscheme] = *fl;
            f->scheme[f->nscheme].help = h;
            f->nscheme++;
        }
}

static void scheme_helps(void) {
    dt_schemes_where(algo_help, sizeof algo_help, " | ", dt_scheme_any, NULL);
    const size_t o = (size_t)snprintf(compress_help, sizeof compress_help, "payload codec none | fp16 | bf16 | int8 | topk:F (0 < F <= 1) | powersgd:R (allreduce), for ");
    if (o < sizeof compress_help)
        dt_schemes_where(compress_help + o, sizeof compress_help - o, ", ", dt_scheme_compresses, NULL);
}

int dt_train_flag_lists(dt_train_flags *f, dt_flag_list lists[DT_TRAIN_LISTS]) {
    memset(f, 0, sizeof *f);
    dt_train_config_defaults(&f->c);
    f->c.scheme.name = "local";
    f->ranks = 4;
    f->timeout = 300;
    f->start_timeout = 60;
    scheme_helps();
    scheme_flags(f);
    lists[0] = (dt_flag_list){.flags = train_flags, .n = NOPTS(train_flags), .base = f};
    lists[1] = (dt_flag_list){.flags = f->scheme, .n = f->nscheme, .take = take_scheme_flag, .ctx = &f->c.scheme};
    return DT_TRAIN_LISTS;
}

int dt_run_flag_lists(dt_train_flags *f, dt_flag_list lists[DT_RUN_LISTS]) {
    dt_train_flag_lists(f, lists);
    lists[2] = (dt_flag_list){.flags = run_flags, .n = NOPTS(run_flags), .base = f};
    return DT_RUN_LISTS;
}

/* AdamW's flags given to sgd would be ignored: refused, naming the flag; then the values as
 * dt_optim_init checks them (sgd's given to adamw), before any rank starts. */
static dt_status optim_values(const dt_train_flags *f) {
    static const char *const adamw_flags[] = {"beta1", "beta2", "eps"};
    for (int i = 0; i < 3; i++)
        if (f->adamw_given[i] && f->c.optim != DT_OPTIM_ADAMW)
            return dt_fail(DT_ERR_ARG, "--%s: an adamw flag, but --optim %s (give --optim adamw)", adamw_flags[i],
                           dt_optim_names[f->c.optim]);
    dt_optim_config oc;
    dt_train_optim_config(&f->c, &oc);
    return dt_optim_config_check(&oc);
}

/* After parsing: --target-on val's needs, the optimiser's flags, and the configuration checked
 * against the chosen scheme's declarations (one line naming the flag). */
dt_status dt_scheme_values(dt_train_flags *f, dt_scheme_choice *out) {
    /* a registered scheme's flag named as one of the command's would never reach the scheme */
    for (int i = 0; i < f->nscheme; i++)
        if (dt_flag_find(train_flags, NOPTS(train_flags), f->scheme[i].name) ||
            dt_flag_find(run_flags, NOPTS(run_flags), f->scheme[i].name))
            return dt_fail(DT_ERR_ARG, "--%s: a flag of dtrain itself, declared again by a scheme (%.*s): the scheme "
                           "must name it otherwise", f->scheme[i].name, (int)strcspn(f->scheme[i].help, ":"),
                           f->scheme[i].help);
    if (f->c.target_acc > 0 && f->c.target_loss > 0)
        return dt_fail(DT_ERR_ARG, "--target-loss %g: not with --target-acc %g (one target a run)", (double)f->c.target_loss,
                       (double)f->c.target_acc);
    if (f->c.target_on_val && (f->c.val <= 0 || !(f->c.target_acc > 0 || f->c.target_loss > 0)))
        return dt_fail(DT_ERR_ARG, "--target-on val: needs --val N (the held-out set) and --target-acc A or --target-loss L");
    dt_status st = optim_values(f);
    return st != DT_OK ? st : dt_scheme_check(&f->c.scheme, out);
}

dt_status dt_local_ranks(const dt_train_flags *f, const char *cmd, int argc, char **argv) {
    if (strcmp(f->c.scheme.name, "local") != 0 || f->ranks == 1) return DT_OK;
    int given = 0;
    for (int i = 2; i < argc; i++) given |= !strcmp(argv[i], "--algo") || !strncmp(argv[i], "--algo=", 7);
    if (!given)
        return dt_fail(DT_ERR_ARG, "dtrain %s: -n %d needs --algo (one of: %s; local trains on one process)", cmd, f->ranks,
                       dt_scheme_names());
    return dt_fail(DT_ERR_ARG, "dtrain %s: --algo local trains on one process, but -n %d (choose one of: %s)", cmd,
                   f->ranks, dt_scheme_names());
}

/* --images sets the epochs (the trainer derives them): not with --epochs or --max-steps given. */
dt_status dt_run_length(dt_train_flags *f) {
    if (f->c.images && f->epochs_given)
        return dt_fail(DT_ERR_ARG, "--images %ld: not with --epochs %d (--images sets the epochs it takes)", f->c.images, f->c.epochs);
    if (f->c.images && f->c.max_steps)
        return dt_fail(DT_ERR_ARG, "--images %ld: not with --max-steps %ld (both set the run's length; give one)", f->c.images,
                       f->c.max_steps);
    return DT_OK;
}

/* The scheme list for --help. */
void dt_usage_with_schemes(char *out, size_t len, const char *head) {
    int n;
    const dt_scheme_def *const *all = dt_schemes(&n);
    size_t o = (size_t)snprintf(out, len, "%s\n\nschemes (--algo):", head);
    for (int i = 0; i < n && o < len; i++) o += (size_t)snprintf(out + o, len - o, "\n  %-10s %s", all[i]->name, all[i]->summary);
}

/* The default weights file is replaced only when it holds the weights of an earlier run of
 * the same model, data and scheme (the same command run again): never another file. */
static dt_status check_default_out(const char *path, const dt_train_config *c) {
    struct stat sb;
    if (stat(path, &sb) != 0) return DT_OK;
    dt_weights_meta w = {0};
    const int ours = dt_weights_meta_read(path, &w) == DT_OK && w.model && w.data && w.scheme && !strcmp(w.data, c->data) &&
                     !strcmp(w.scheme, c->scheme.name) && dt_weights_meta_same_model(&w, c->model);
    dt_weights_meta_free(&w);
    return ours ? DT_OK
                : dt_fail(DT_ERR_ARG, "%s exists and is not the weights of an earlier run of %s on %s with --algo %s: "
                          "not replaced; use --out FILE (or --run-dir DIR)", path, c->model, c->data, c->scheme.name);
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
        snprintf(named, sizeof named, "dtrain-%s-%s-%s.weights", base, c->data, c->scheme.name);
        f->out = named;
        if (rank == 0) st = check_default_out(named, c);
    }
    c->weights_out = f->no_save ? NULL : f->out;
    return st;
}

int dt_resume_auto_asked(const dt_train_flags *f) { return f->c.resume && !strcmp(f->c.resume, "auto"); }

dt_status dt_resume_auto(dt_train_flags *f, int exists) {
    dt_train_config *c = &f->c;
    if (!dt_resume_auto_asked(f)) return DT_OK;
    if (!c->checkpoint) return dt_fail(DT_ERR_ARG, "--resume auto: needs --checkpoint FILE (the checkpoint it resumes from)");
    c->resume = exists ? c->checkpoint : NULL;
    return DT_OK;
}

void dt_resume_auto_say(const dt_train_flags *f) {
    const dt_train_config *c = &f->c;
    if (c->resume) printf("dtrain: --resume auto: continuing from checkpoint %s\n", c->checkpoint);
    else printf("dtrain: --resume auto: no checkpoint %s yet: starting from the first step\n", c->checkpoint);
    fflush(stdout);
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
