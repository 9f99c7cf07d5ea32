/* Allocation that fails with the thing's name (alloc.h). */
#include "core/alloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The place from src/ on: the build may pass absolute paths (/home/x/src/dtrain/src/optim/sgd.c
 * is optim/sgd.c). */
static const char *from_src(const char *file) {
    const char *rel = file;
    for (const char *p = file; (p = strstr(p, "src/")); p += 4)
        if (p == file || p[-1] == '/') rel = p + 4;
    return rel;
}

static dt_status nomem_v(const char *file, int line, const char *fmt, va_list ap) {
    char what[256];
    vsnprintf(what, sizeof what, fmt, ap);
    return dt_fail(DT_ERR_NOMEM, "out of memory for %s (%s:%d)", what, from_src(file), line);
}

dt_status dt_nomem_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const dt_status st = nomem_v(file, line, fmt, ap);
    va_end(ap);
    return st;
}

void *dt_alloc_at(size_t n, size_t size, int zero, const char *file, int line, const char *fmt, ...) {
    void *p = NULL;
    if (size == 0 || n <= SIZE_MAX / size) {
        const size_t bytes = n ? n * size : size ? size : 1;
        p = zero ? calloc(bytes, 1) : malloc(bytes);
    }
    if (!p) {
        va_list ap;
        va_start(ap, fmt);
        nomem_v(file, line, fmt, ap);
        va_end(ap);
    }
    return p;
}

void dt_free_n(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}

void dt_nomem_exit_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    nomem_v(file, line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dtrain: error: %s\n", dt_last_error());
    exit(2);
}
