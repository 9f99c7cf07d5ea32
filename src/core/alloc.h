/* Allocation that fails with the thing's name, in the spirit of llm.c's mallocCheck: every
 * "out of memory" says what could not be allocated and where, e.g.
 *   out of memory for the momentum buffer (optim/sgd.c:21)
 * (the place relative to src/). The status stays DT_ERR_NOMEM; the caller frees what it had
 * made as before. */
#ifndef DT_ALLOC_H
#define DT_ALLOC_H

#include <stddef.h>

#include "dtrain.h"

/* Records "out of memory for <what> (<file>:<line>)", what formatted printf-style, and
 * returns DT_ERR_NOMEM: for a check of one or several buffers allocated by hand. */
#define dt_nomem(...) dt_nomem_at(__FILE__, __LINE__, __VA_ARGS__)

/* p = n elements of sizeof *p bytes (dt_calloc: zeroed); evaluates to DT_OK, or to
 * DT_ERR_NOMEM with p NULL and the failure recorded as by dt_nomem (also when n * sizeof *p
 * overflows). Never NULL on success: no elements still allocate one (so the callers'
 * n ? n : 1 is not needed). */
#define dt_malloc(p, n, ...) dt_allocated((p) = dt_alloc_at((n), sizeof *(p), 0, __FILE__, __LINE__, __VA_ARGS__))
#define dt_calloc(p, n, ...) dt_allocated((p) = dt_alloc_at((n), sizeof *(p), 1, __FILE__, __LINE__, __VA_ARGS__))

/* DT_OK when p is not NULL, else DT_ERR_NOMEM: the status of a call that returns NULL once it
 * recorded its own out-of-memory (dt_alloc_at, dt_json_text, dt_scheme_new_at); recording it
 * again would overwrite the message that names what and where. */
#define dt_allocated(p) ((p) ? DT_OK : DT_ERR_NOMEM)

/* Returns call's status unless DT_OK: one spelling of "return the failure" (the allocation's
 * status is passed on, not named again at every caller). Only where nothing needs freeing. */
#define DT_TRY(call)                                \
    do {                                            \
        const dt_status dt_try_st_ = (call);        \
        if (dt_try_st_ != DT_OK) return dt_try_st_; \
    } while (0)

/* Frees each pointer given (NULL ones too, as free does): a destroy's run of free() calls as
 * one call, so that what a struct owns is named once. */
#define dt_free_all(...) \
    dt_free_n((void *[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))

/* As dt_nomem, then "dtrain: error: <that>" on stderr and exit status 2: for the command's
 * code that has no status to return. */
#define dt_nomem_exit(...) dt_nomem_exit_at(__FILE__, __LINE__, __VA_ARGS__)

dt_status dt_nomem_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *dt_alloc_at(size_t n, size_t size, int zero, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void dt_free_n(void *const *p, size_t n);
_Noreturn void dt_nomem_exit_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
