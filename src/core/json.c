/* JSON-lines writer (core/json.h). The buffer doubles as it grows, so a line costs O(length)
 * however it is built; an allocation failure is remembered rather than returned by every
 * call, so the callers (log lines) need one check, at dt_json_text. */
#include "core/json.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "dtrain.h"

enum { JSON_MAX_DEPTH = (int)sizeof(((dt_json *)0)->first) - 1 }; /* first[0] is the top level */

void dt_json_init(dt_json *j) {
    memset(j, 0, sizeof *j);
    j->first[0] = 1;
}

void dt_json_free(dt_json *j) {
    free(j->buf);
    dt_json_init(j);
}

void dt_json_reset(dt_json *j) {
    char *buf = j->buf;
    size_t cap = j->cap;
    dt_json_init(j);
    j->buf = buf;
    j->cap = cap;
    if (buf) buf[0] = 0;
}

/* Room for n more bytes and the NUL; 0 (and failed set) when the allocation fails. */
static int reserve(dt_json *j, size_t n) {
    if (j->failed) return 0;
    if (n < j->cap - j->len) return 1;           /* cap > len always once buf exists */
    if (n > SIZE_MAX / 2 - j->len) { j->failed = 1; return 0; }
    size_t need = j->len + n + 1, cap = j->cap ? j->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(j->buf, cap);
    if (!p) { j->failed = 1; return 0; }
    j->buf = p;
    j->cap = cap;
    return 1;
}

static void put(dt_json *j, const char *s, size_t n) {
    if (!reserve(j, n)) return;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = 0;
}

/* A JSON string: quotes and backslashes escaped, control characters as \n-style or \u00XX
 * (RFC 8259 section 7); everything else, UTF-8 included, copied in runs as it is. */
static void put_string(dt_json *j, const char *s) {
    static const char hex[] = "0123456789abcdef";
    put(j, "\"", 1);
    for (;;) {
        size_t run = 0;
        while (s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20) run++;
        put(j, s, run);
        s += run;
        if (!*s) break;
        unsigned char ch = (unsigned char)*s++;
        char e[6] = {'\\', (char)ch};
        size_t n = 2;
        switch (ch) {
        case '"': case '\\': break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[ch >> 4];
            e[5] = hex[ch & 15];
            n = 6;
        }
        put(j, e, n);
    }
    put(j, "\"", 1);
}

/* Before every value: the comma when the container already has a member, then the key. */
static void member(dt_json *j, const char *key) {
    assert((j->depth > 0 || j->first[0]) && "one top-level value per line");
    assert((j->depth > 0 || !key) && "no key at the top level");
    if (!j->first[j->depth]) put(j, ",", 1);
    j->first[j->depth] = 0;
    if (key) { put_string(j, key); put(j, ":", 1); }
}

static void open_container(dt_json *j, const char *key, char c) {
    if (j->failed) return;
    if (j->depth >= JSON_MAX_DEPTH) { assert(!"dt_json: more than 31 levels"); return; }
    member(j, key);
    put(j, &c, 1);
    j->first[++j->depth] = 1;
}

static void close_container(dt_json *j, char c) {
    if (j->failed) return;
    if (j->depth <= 0) { assert(!"dt_json: end without begin"); return; }
    put(j, &c, 1);
    j->depth--;
}

void dt_json_begin(dt_json *j, const char *key) { open_container(j, key, '{'); }
void dt_json_end(dt_json *j) { close_container(j, '}'); }
void dt_json_begin_array(dt_json *j, const char *key) { open_container(j, key, '['); }
void dt_json_end_array(dt_json *j) { close_container(j, ']'); }

/* One scalar already formatted as JSON text. */
static void value(dt_json *j, const char *key, const char *text) {
    if (j->failed) return;
    member(j, key);
    put(j, text, strlen(text));
}

void dt_json_str(dt_json *j, const char *key, const char *v) {
    if (!v) { value(j, key, "null"); return; }
    if (j->failed) return;
    member(j, key);
    put_string(j, v);
}

/* JSON has no NaN or infinity: a diverged loss logs as null, and the line still parses. */
void dt_json_num(dt_json *j, const char *key, double v) {
    char s[32];
    if (!isfinite(v)) { value(j, key, "null"); return; }
    snprintf(s, sizeof s, "%.12g", v);
    value(j, key, s);
}

void dt_json_fixed(dt_json *j, const char *key, double v, int decimals) {
    assert(decimals >= 0);
    if (!isfinite(v)) { value(j, key, "null"); return; }
    if (j->failed) return;
    member(j, key);
    /* %f of a large value runs to hundreds of digits: measure, then write in place */
    int n = snprintf(NULL, 0, "%.*f", decimals, v);
    if (n < 0 || !reserve(j, (size_t)n)) return;
    snprintf(j->buf + j->len, (size_t)n + 1, "%.*f", decimals, v);
    j->len += (size_t)n;
}

void dt_json_int(dt_json *j, const char *key, long long v) {
    char s[24];
    snprintf(s, sizeof s, "%lld", v);
    value(j, key, s);
}

void dt_json_bool(dt_json *j, const char *key, int v) { value(j, key, v ? "true" : "false"); }
void dt_json_null(dt_json *j, const char *key) { value(j, key, "null"); }
void dt_json_raw(dt_json *j, const char *key, const char *json_value) {
    value(j, key, json_value ? json_value : "null");
}

const char *dt_json_text(dt_json *j) {
    if (j->failed) {
        dt_nomem("a JSON line (%zu bytes so far)", j->len);
        return NULL;
    }
    assert(j->depth == 0 && "dt_json_text with an object or array still open");
    return j->buf ? j->buf : "";
}
