/* dt_json (src/core/json.c) against exact expected text: nesting and commas, string escapes
 * (quotes, backslashes, control characters, UTF-8 copied as it is), numbers (exact integers,
 * NaN and infinities as null), fixed decimals, bools, null, raw values; a line over 100 KB
 * (growth), reuse after dt_json_reset, and an allocation failure (realloc interposed). The
 * lines written must also parse with Python's json module. */
#include "core/json.h"
#include "check.h"
#include "dtrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* realloc fails while fail_realloc is set. The sanitizers replace the allocator themselves:
 * there the failure case is skipped (and said so). */
#if defined(__SANITIZE_ADDRESS__)
#define INTERPOSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INTERPOSE 0
#endif
#endif
#ifndef INTERPOSE
#define INTERPOSE 1
#endif

#if INTERPOSE
static int fail_realloc;
extern void *__libc_realloc(void *, size_t);
void *realloc(void *p, size_t n) { return fail_realloc ? NULL : __libc_realloc(p, n); }
#endif

/* The text equals want; on a mismatch both are printed. */
#define CHECK_TEXT(j, want) do { const char *_t = dt_json_text(j); \
    CHECK_MSG(_t && strcmp(_t, (want)) == 0, "got %s, want %s", _t ? _t : "(NULL)", (want)); \
} while (0)

static FILE *lines; /* every line checked, for Python to parse at the end */
static void keep(dt_json *j) {
    const char *t = dt_json_text(j);
    if (lines && t) fprintf(lines, "%s\n", t);
}

static void test_structure(dt_json *j) {
    dt_json_begin(j, NULL);
    dt_json_str(j, "type", "epoch");
    dt_json_int(j, "epoch", 3);
    dt_json_begin_array(j, "ranks");
    dt_json_begin(j, NULL);
    dt_json_int(j, "rank", 0);
    dt_json_begin_array(j, "sent");
    dt_json_int(j, NULL, 1);
    dt_json_int(j, NULL, -2);
    dt_json_end_array(j);
    dt_json_end(j);
    dt_json_begin(j, NULL);
    dt_json_end(j);
    dt_json_begin_array(j, NULL);
    dt_json_end_array(j);
    dt_json_end_array(j);
    dt_json_begin(j, "empty");
    dt_json_end(j);
    dt_json_bool(j, "t", 1);
    dt_json_bool(j, "f", 0);
    dt_json_null(j, "n");
    dt_json_str(j, "s", NULL);
    dt_json_raw(j, "raw", "{\"a\":[1,2]}");
    dt_json_raw(j, "rawnull", NULL);
    dt_json_end(j);
    CHECK_TEXT(j, "{\"type\":\"epoch\",\"epoch\":3,\"ranks\":[{\"rank\":0,\"sent\":[1,-2]},{},[]],"
                  "\"empty\":{},\"t\":true,\"f\":false,\"n\":null,\"s\":null,"
                  "\"raw\":{\"a\":[1,2]},\"rawnull\":null}");
    CHECK(j->depth == 0);
    keep(j);
}

static void test_strings(dt_json *j) {
    dt_json_reset(j);
    dt_json_begin(j, NULL);
    dt_json_str(j, "q", "say \"hi\"");
    dt_json_str(j, "b", "C:\\dir\\");
    dt_json_str(j, "c", "a\nb\tc\rd\be\ff\x01g\x1f");
    dt_json_str(j, "u", "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"); /* café → 😀 */
    dt_json_str(j, "k\"ey\n", "");
    dt_json_str(j, "del", "\x7f/");
    dt_json_end(j);
    CHECK_TEXT(j, "{\"q\":\"say \\\"hi\\\"\",\"b\":\"C:\\\\dir\\\\\","
                  "\"c\":\"a\\nb\\tc\\rd\\be\\ff\\u0001g\\u001f\","
                  "\"u\":\"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80\","
                  "\"k\\\"ey\\n\":\"\",\"del\":\"\x7f/\"}");
    keep(j);
}

static void test_numbers(dt_json *j) {
    dt_json_reset(j);
    dt_json_begin_array(j, NULL);
    dt_json_num(j, NULL, 0);
    dt_json_num(j, NULL, 999999999999.0);  /* 12 digits: exact */
    dt_json_num(j, NULL, 1e12);            /* 13 digits: %.12g switches to exponent form */
    dt_json_num(j, NULL, -123456789012.0);
    dt_json_num(j, NULL, 0.1);
    dt_json_num(j, NULL, 1e-300);
    dt_json_num(j, NULL, 2.5e300);
    dt_json_num(j, NULL, NAN);
    dt_json_num(j, NULL, INFINITY);
    dt_json_num(j, NULL, -INFINITY);
    dt_json_num(j, NULL, -0.0);
    dt_json_end_array(j);
    CHECK_TEXT(j, "[0,999999999999,1e+12,-123456789012,0.1,1e-300,2.5e+300,null,null,null,-0]");
    keep(j);

    dt_json_reset(j);
    dt_json_begin(j, NULL);
    dt_json_fixed(j, "loss", 0.123456789, 6);
    dt_json_fixed(j, "acc", 0.5, 4);
    dt_json_fixed(j, "s", 12.75, 1);     /* 12.75 is exact in binary: rounds to even */
    dt_json_fixed(j, "whole", 2.6, 0);
    dt_json_fixed(j, "nan", NAN, 3);
    dt_json_fixed(j, "inf", INFINITY, 3);
    dt_json_fixed(j, "ninf", -INFINITY, 3);
    dt_json_fixed(j, "nz", -0.0, 2);
    dt_json_int(j, "big", 9007199254740993LL);
    dt_json_int(j, "min", -9223372036854775807LL - 1);
    dt_json_end(j);
    CHECK_TEXT(j, "{\"loss\":0.123457,\"acc\":0.5000,\"s\":12.8,\"whole\":3,\"nan\":null,"
                  "\"inf\":null,\"ninf\":null,\"nz\":-0.00,\"big\":9007199254740993,"
                  "\"min\":-9223372036854775808}");
    keep(j);

    /* %f of a huge value is hundreds of digits: written whole, not cut at a fixed size */
    dt_json_reset(j);
    dt_json_fixed(j, NULL, 1e300, 2);
    const char *t = dt_json_text(j);
    CHECK(t && strlen(t) == 301 + 3 && strncmp(t, "1000000000000000052504760255204420248704", 40) == 0
          && strcmp(t + 301, ".00") == 0);
}

/* > 100 KB of members: the buffer doubles many times and nothing is lost. */
static void test_long(dt_json *j) {
    dt_json_reset(j);
    dt_json_begin(j, NULL);
    dt_json_begin_array(j, "v");
    const int n = 20000;
    for (int i = 0; i < n; i++) dt_json_int(j, NULL, 100000 + i);   /* 7 bytes each */
    dt_json_end_array(j);
    dt_json_str(j, "end", "ok");
    dt_json_end(j);
    const char *t = dt_json_text(j);
    size_t want_len = strlen("{\"v\":[") + (size_t)n * 7 - 1 + strlen("],\"end\":\"ok\"}");
    CHECK(t != NULL);
    if (!t) return;
    CHECK_MSG(strlen(t) == want_len && j->len == want_len, "length %zu, want %zu", strlen(t), want_len);
    CHECK(want_len > 100 * 1024);
    CHECK(j->cap > j->len && (j->cap & (j->cap - 1)) == 0); /* doubled from a power of two */
    CHECK(strncmp(t, "{\"v\":[100000,100001,", 20) == 0);
    CHECK(strstr(t, ",110000,") != NULL);
    const char *tail = "119999],\"end\":\"ok\"}";
    CHECK(strcmp(t + want_len - strlen(tail), tail) == 0);
    keep(j);

    /* reset keeps the buffer and starts a fresh line: no leading comma, no old text */
    char *buf = j->buf;
    size_t cap = j->cap;
    dt_json_reset(j);
    CHECK_TEXT(j, "");
    CHECK(j->buf == buf && j->cap == cap && j->len == 0 && j->depth == 0);
    dt_json_begin(j, NULL);
    dt_json_int(j, "a", 1);
    dt_json_end(j);
    CHECK_TEXT(j, "{\"a\":1}");
    CHECK(j->buf == buf);
    keep(j);
}

static void test_fresh(void) {
    dt_json j;
    dt_json_init(&j);
    CHECK(j.buf == NULL);
    CHECK_TEXT(&j, "");
    dt_json_reset(&j);   /* no buffer yet: still fine */
    CHECK_TEXT(&j, "");
    dt_json_str(&j, NULL, "top");   /* a scalar is a whole line too */
    CHECK_TEXT(&j, "\"top\"");
    dt_json_free(&j);
    CHECK(j.buf == NULL && j.len == 0);
    dt_json_free(&j);    /* twice is harmless */
}

static void test_nomem(void) {
#if INTERPOSE
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_int(&j, "a", 1);
    fail_realloc = 1;
    /* 256 bytes are there already: grow past them so the next allocation fails */
    for (int i = 0; i < 100; i++) dt_json_str(&j, "key", "value");
    dt_json_end(&j);
    fail_realloc = 0;
    CHECK(j.failed);
    size_t len = j.len;
    dt_json_int(&j, "b", 2);       /* no-op now */
    CHECK(j.len == len);
    dt_fail(DT_OK, "%s", "");
    CHECK(dt_json_text(&j) == NULL);
    CHECK_MSG(strstr(dt_last_error(), "out of memory") != NULL, "%s", dt_last_error());
    /* reset makes it usable again */
    dt_json_reset(&j);
    dt_json_begin(&j, NULL);
    dt_json_end(&j);
    CHECK_TEXT(&j, "{}");
    dt_json_free(&j);
#else
    printf("test_json: allocation failure case skipped (the sanitizer owns realloc)\n");
#endif
}

/* Every line kept must parse as JSON with Python's json module. */
static void test_python(const char *path) {
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("test_json: python3 parse check skipped (/usr/bin/python3 missing)\n");
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1], encoding=\"utf-8\")]' %s",
             path);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "python3 json.loads failed on %s (status %d)", path, rc);
}

int main(void) {
    char path[] = "/tmp/dtrain_test_json_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) lines = fdopen(fd, "w");

    dt_json j;
    dt_json_init(&j);
    test_structure(&j);
    test_strings(&j);
    test_numbers(&j);
    test_long(&j);
    dt_json_free(&j);
    test_fresh();
    test_nomem();

    if (lines) {
        CHECK(fclose(lines) == 0);
        test_python(path);
        unlink(path);
    }
    return test_summary("test_json");
}
