/* Compiled, not run (tests/CMakeLists.txt: flag_types_ok, flag_types_wrong): a flag whose
 * DT_AT_* names a member of another type does not compile. Built once as is (it must
 * compile: the check below is not failing for another reason) and once with -DWRONG_TYPE
 * (it must not). */
#include "core/flag_table.h"

typedef struct {
    int local_steps;
    float horizon;
} my_opts;

static const dt_flag my_flags[] = {
#ifdef WRONG_TYPE
    {"horizon", DT_AT_INT(my_opts, horizon), .help = "a float read as an int"},
#else
    {"horizon", DT_AT_FLOAT(my_opts, horizon), .help = "a float"},
#endif
    {"local-steps", DT_AT_INT(my_opts, local_steps), .help = "an int"},
};

const dt_flag *flag_types_table(void);
const dt_flag *flag_types_table(void) { return my_flags; }
