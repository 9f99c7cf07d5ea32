/* What the subcommands share (cli.h). */
#include "cli/cli.h"

#include <stdio.h>

#include "dtrain.h"

int dt_cli_fail(void) {
    fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
    return 2;
}
