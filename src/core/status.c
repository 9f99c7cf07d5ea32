/* Status codes and the per-thread last-error message. */
#include "dtrain.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

const char *dt_status_str(dt_status s) {
    switch (s) {
    case DT_OK: return "ok";
    case DT_ERR_IO: return "i/o error";
    case DT_ERR_FORMAT: return "bad file format";
    case DT_ERR_ARG: return "bad argument";
    case DT_ERR_NOMEM: return "out of memory";
    case DT_ERR_MPI: return "MPI error";
    case DT_ERR_STATE: return "invalid state";
    case DT_ERR_DIVERGED: return "diverged";
    }
    return "unknown status";
}

const char *dt_last_error(void) { return last_error[0] ? last_error : "no error"; }

dt_status dt_fail(dt_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}
