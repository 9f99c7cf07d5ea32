/* Status codes and the per-thread last-error message. */
#include "dtrain.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/escape.h"

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
    case DT_ERR_STOPPED: return "stopped on request";
    }
    return "unknown status";
}

const char *dt_last_error(void) { return last_error[0] ? last_error : "no error"; }

/* Formatted apart first, so an argument may be dt_last_error() itself (a cause rewrapped);
 * then escaped: the names and lines quoted from files can hold any byte, and the message
 * must stay one line that does nothing to the terminal (escape.h). */
dt_status dt_fail(dt_status s, const char *fmt, ...) {
    char raw[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    dt_escape(last_error, sizeof last_error, raw);
    return s;
}
