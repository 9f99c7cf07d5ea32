/* libFuzzer target: the command-line flag parser (dt_flags_parse_argv) with the real flag tables
 * of `dtrain train` and `dtrain run` (every scheme's flags from the registry), then the
 * schemes' own value checks (dt_scheme_config_set, dt_scheme_check), as the CLI does before any
 * MPI call. The input is split on NUL bytes into arguments; the first is the command ("run"
 * selects run's table, anything else train's). src/cli/train_flags.c is linked in, so the
 * tables are the very ones the CLI uses. */
#include <stdlib.h>
#include <string.h>

#include "cli/train_flags.h"

#include "fuzz_util.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = dt_fuzz_str(data, size);
    char *argv[MAX_ARGS + 2] = {"dtrain"};
    int argc = 1;
    for (char *p = text; argc < MAX_ARGS + 1;) {
        argv[argc++] = p;
        char *z = memchr(p, 0, (size_t)(text + size - p));
        if (!z || z == text + size) break;
        p = z + 1;
    }
    static dt_train_flags f;
    dt_flag_list lists[DT_RUN_LISTS];
    const int run = argc > 1 && !strcmp(argv[1], "run");
    const int nlists = run ? dt_run_flag_lists(&f, lists) : dt_train_flag_lists(&f, lists);
    int help;
    if (dt_flags_parse_argv(run ? "run" : "train", argc, argv, 2, lists, nlists, &help) == DT_OK && !help)
        (void)dt_scheme_values(&f, NULL);
    free(text);
    return 0;
}
