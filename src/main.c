/* The dtrain command: the library's dt_main (src/cli/main.c). A program with its own schemes
 * is this file with dt_scheme_register calls before dt_main (examples/my_scheme.c). */
#include "dtrain.h"

int main(int argc, char **argv) { return dt_main(argc, argv); }
