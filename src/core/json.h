/* A JSON-lines writer: one line (one top-level value) built member by member into a growing
 * buffer, so log lines need no fixed-size buffer that a long run name or a many-rank array
 * could overflow or truncate. Commas and escaping are done here, not by each caller.
 *
 *   dt_json j; dt_json_init(&j);
 *   dt_json_begin(&j, NULL); dt_json_str(&j, "type", "epoch"); dt_json_int(&j, "epoch", 3);
 *   dt_json_end(&j);
 *   const char *line = dt_json_text(&j);   // {"type":"epoch","epoch":3}, or NULL: out of memory
 *   ...; dt_json_free(&j);
 *
 * Keys are given inside objects and NULL at the top level and inside arrays. After an
 * allocation failure every call is a no-op until dt_json_reset, and dt_json_text says so
 * (and records the out of memory, the one place that does); callers check once, at the end,
 * and return dt_allocated(text) (core/alloc.h). Misuse (end without begin, more than 31 levels, two
 * top-level values) asserts. */
#ifndef DT_JSON_H
#define DT_JSON_H

/* (DT_API: str, num, int and bool are public, dtrain/scheme.h, for a scheme's summary) */

#include <stddef.h>

#include "dtrain.h" /* DT_API */

typedef struct dt_json {
    char *buf;          /* NUL-terminated text so far */
    size_t len, cap;
    int depth;          /* open objects/arrays */
    unsigned char first[32]; /* per depth: no member written yet */
    int failed;         /* an allocation failed: the line is unusable */
} dt_json;

void dt_json_init(dt_json *j);                 /* empty; no allocation yet */
void dt_json_free(dt_json *j);
void dt_json_reset(dt_json *j);                /* empty again, keeps the buffer */
void dt_json_begin(dt_json *j, const char *key);   /* '{'; key NULL at top level or inside arrays */
void dt_json_end(dt_json *j);                       /* '}' */
void dt_json_begin_array(dt_json *j, const char *key); /* '[' */
void dt_json_end_array(dt_json *j);
DT_API void dt_json_str(dt_json *j, const char *key, const char *v);  /* escaped per RFC 8259; v NULL -> null */
DT_API void dt_json_num(dt_json *j, const char *key, double v);       /* "%.12g"; NaN/inf -> null */
void dt_json_fixed(dt_json *j, const char *key, double v, int decimals); /* "%.*f"; NaN/inf -> null */
DT_API void dt_json_int(dt_json *j, const char *key, long long v);
DT_API void dt_json_bool(dt_json *j, const char *key, int v);
void dt_json_null(dt_json *j, const char *key);
void dt_json_raw(dt_json *j, const char *key, const char *json_value); /* a value already in JSON */
/* The finished text (""), or NULL with an out-of-memory failure recorded. */
const char *dt_json_text(dt_json *j);

#endif
