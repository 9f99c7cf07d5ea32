/* Table-driven flag parsing for the subcommands: --name VALUE or --name=VALUE, with range
 * checks, and --help generated from the same table. */
#ifndef DT_ARGS_H
#define DT_ARGS_H

#include "dtrain.h"

typedef enum { OPT_INT, OPT_FLOAT, OPT_STR, OPT_FLAG, OPT_SEED } dt_opt_kind;

typedef struct dt_opt {
    const char *name;     /* without the leading -- */
    dt_opt_kind kind;
    void *dst;            /* int*, float*, const char**, int* (flag), uint64_t* */
    const char *help;
    double min, max;      /* inclusive bounds for numbers */
    int min_exclusive;    /* 1: value must be > min */
    int hidden;           /* for the tests: left out of --help */
    const char *metavar;  /* the value's name in --help (NULL: by kind: N, X, S) */
} dt_opt;

/* Parses argv[first..argc). Returns DT_OK, or DT_ERR_ARG with a message naming the flag.
 * *help is set when --help/-h is present. */
dt_status dt_parse_args(const char *cmd, int argc, char **argv, int first, const dt_opt *opts,
                        int nopts, int *help);
void dt_print_help(const char *cmd, const char *usage, const dt_opt *opts, int nopts);

#endif
