/* dtrain command-line tool: the dispatch table of its subcommands (cmd_*.c, sweep.c); the
 * usage is printed from the same table. Every runtime error is one line on stderr and exit
 * status 2. It is the library's dt_main (dtrain.h): the dtrain command is src/main.c, and a
 * program that registers its own schemes (dtrain/scheme.h) is the same command with them. */
#include <stdio.h>
#include <string.h>

#include "cli/blas.h"
#include "cli/cli.h"
#include "cli/sweep.h"
#include "cli/tee.h"
#include "comm/watch.h"
#include "core/suggest.h"
#include "dtrain.h"

/* train leaves through the console and the watchdog's board (under dtrain run) */
static int train(int argc, char **argv) {
    const int rc = dt_cmd_train(argc, argv);
    dt_console_close();
    dt_watch_left();
    return rc;
}

static int version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("dtrain %s\n", dt_version());
    return 0;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"train", train, "train a model (one process, or every rank under mpiexec)"},
    {"run", dt_cmd_run, "start N ranks of train: dtrain run -n 4 --algo eventgrad ..."},
    {"sim", dt_cmd_sim, "N ranks of train on a simulated cluster: dtrain sim -n 64 --platform campus-100m ..."},
    {"eval", dt_cmd_eval, "test accuracy of saved weights (a language model's: its test loss)"},
    {"sample", dt_cmd_sample, "text a language model writes: dtrain sample --weights W --prompt TEXT"},
    {"info", dt_cmd_info, "layers, shapes, parameter count and FLOPs of a model"},
    {"bench", dt_cmd_bench, "time training steps on random data"},
    {"tune", dt_cmd_tune, "plan each layer's kernel by timing them on this CPU (--plan)"},
    {"diff", dt_cmd_diff, "largest difference between two weights files"},
    {"sweep", dt_cmd_sweep, "the runs of an experiment file, many at once (docs/sweep.md)"},
    {"version", version, "the version and commit of this build (also dtrain --version)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain COMMAND [flags]   (dtrain COMMAND --help for its flags)\n\ncommands:\n");
    for (int i = 0; i < NOPTS(commands); i++) fprintf(f, "  %-7s %s\n", commands[i].name, commands[i].summary);
}

int dt_main(int argc, char **argv) {
    dt_cli_fast_blas(argv);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    /* not a command of its own: the ranks dtrain sim calibrate starts */
    if (!strcmp(cmd, "sim-calibrate-rank")) return dt_cmd_sim_calibrate_rank(argc, argv);
    for (int i = 0; i < NOPTS(commands); i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc, argv);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) return version(argc, argv);
    const char *names[NOPTS(commands)];
    for (int i = 0; i < NOPTS(commands); i++) names[i] = commands[i].name;
    const char *near = dt_suggest(cmd, names, NOPTS(commands));
    if (near) fprintf(stderr, "dtrain: error: unknown command '%s' (did you mean %s?)\n", cmd, near);
    else fprintf(stderr, "dtrain: error: unknown command '%s' (expected train, run, eval, info, bench, tune, diff, sweep or version)\n", cmd);
    return 2;
}
