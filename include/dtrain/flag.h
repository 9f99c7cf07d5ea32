/*
 * dtrain/flag.h - a flag (--name VALUE), declared once: the declaration a scheme's flags are
 * (dtrain/scheme.h, C3), and dtrain's own command line too.
 *
 * A flag names its value's member in an options struct; a table of them is all there is: the
 * command line's parser, its --help (with the defaults), the struct filled from the library's
 * text values (dt_scheme_config), and the log's configuration line are all built from it. Code
 * that uses a value reads a typed member of the struct (o->local_steps), never a name: a flag
 * used but not declared, or declared with the wrong type, does not compile.
 *
 *     typedef struct { int local_steps; float horizon; int topology; } my_opts;
 *     static const char *const graphs[] = {"ring", "torus", NULL};
 *     static const dt_flag my_flags[] = {
 *         {"local-steps", DT_AT_INT(my_opts, local_steps), .def = "0", .min = 0, .max = 1e9,
 *          .help = "steps between averagings"},
 *         {"horizon", DT_AT_FLOAT(my_opts, horizon), .def = "1", .min = 0, .min_open = 1, .max = 1e9, .help = "..."},
 *         {"topology", DT_AT_CHOICE(my_opts, topology, graphs), .def = "ring", .help = "ring | torus"},
 *     };
 *
 * DT_AT_INT(my_opts, horizon) fails to compile: horizon is not an int or long. Every value
 * given is checked by kind and range, and a bad one gets one line naming the flag and what
 * was expected: "--history 0: expected an integer >= 1 and <= 1000".
 */
#ifndef DTRAIN_FLAG_H
#define DTRAIN_FLAG_H

#include <stddef.h>
#include <stdint.h>

#include <dtrain.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DT_FLAG_INT,    /* int or long; .min/.max */
    DT_FLAG_FLOAT,  /* float or double; .min/.max, .min_open */
    DT_FLAG_TEXT,   /* const char *, kept by pointer (not empty) */
    DT_FLAG_SWITCH, /* int 0/1: on the command line --name alone, as text "0" or "1" */
    DT_FLAG_SEED,   /* uint64_t, any unsigned decimal */
    DT_FLAG_CHOICE, /* int (or an enum): the index of the word given in .words */
    DT_FLAG_CUSTOM  /* any type: .parse and .format (e.g. a number or a word: adaptive | const:C) */
} dt_flag_kind;

/* A custom flag's parser: the text into *value; NULL when it is good, else what was expected
 * ("adaptive or const:C with C >= 0"), which the caller puts in the one-line message. */
typedef const char *(*dt_flag_parse_fn)(const char *text, void *value);
/* ... and back to text that parses to the same value (--help, the log's configuration line). */
typedef void (*dt_flag_format_fn)(const void *value, char *out, size_t len);

/* What a count flag needs of the run's length to act at all (dt_flag.reach). A start (a
 * warm-up's end, the step compression starts at) of N acts from step N on: the run needs more
 * than N steps; a period of N (steps between averagings) acts first at step N: the run needs
 * N. A run too short for one gets a warning line naming the flag and what the run does instead
 * (.unreached); 0 is "off" and never warned about. The trainer checks every flag so declared,
 * with one check (src/trainer/reach.c). */
typedef enum {
    DT_REACH_NONE = 0,
    DT_REACH_START_STEPS,  /* acts from step N on */
    DT_REACH_EVERY_STEPS,  /* acts at step N, 2N, ... */
    DT_REACH_START_EPOCHS, /* ... counted in epochs */
    DT_REACH_EVERY_EPOCHS
} dt_flag_reach;

typedef struct dt_flag {
    const char *name;        /* without the leading -- */
    /* the value's member in the options struct: set with DT_AT_* (kind, offset, size) */
    dt_flag_kind kind;
    size_t at, size;
    size_t given_at;         /* DT_GIVEN: 1 + the offset of an int set to 1 when the flag is given */
    const char *def;         /* the default as it would be typed; NULL: the struct's own value stays */
    double min, max;         /* numbers: the allowed range; max <= min: unbounded */
    int min_open;            /* 1: the value must be > min */
    const char *const *words;  /* CHOICE: the words, NULL-terminated */
    dt_flag_parse_fn parse;    /* CUSTOM */
    dt_flag_format_fn format;  /* CUSTOM */
    const char *help;        /* one line, without the default (--help adds it) */
    const char *metavar;     /* the value's name in --help (NULL: N, X or S by kind) */
    /* --help shows the value in force as the default, a zero (or NULL) one as this text
     * instead ("all", "no limit"); "": no default shown whatever the value */
    const char *zero;
    int hidden;              /* for the tests: left out of --help and of "did you mean" */
    dt_flag_reach reach;     /* INT flags: a count of steps or epochs the run must reach to act */
    const char *unreached;   /* ... and what the run does when it does not ("every step sends, as dpsgd") */
    /* NULL: the reach always matters; else it matters only when this says so, given the options
     * struct and --compress's text (NULL: none): --powersgd-start only with powersgd */
    int (*reach_when)(const void *opts, const char *compress);
} dt_flag;

/* Where a flag's value goes: member m of struct T, its type checked by the compiler. */
#define DT_AT_(K, T, m) .kind = (K), .at = offsetof(T, m)
#define DT_AT_INT(T, m) DT_AT_(DT_FLAG_INT, T, m), .size = _Generic(((T *)0)->m, int: sizeof(int), long: sizeof(long))
#define DT_AT_FLOAT(T, m) \
    DT_AT_(DT_FLAG_FLOAT, T, m), .size = _Generic(((T *)0)->m, float: sizeof(float), double: sizeof(double))
#define DT_AT_TEXT(T, m) DT_AT_(DT_FLAG_TEXT, T, m), .size = _Generic(((T *)0)->m, const char *: sizeof(const char *))
#define DT_AT_SWITCH(T, m) DT_AT_(DT_FLAG_SWITCH, T, m), .size = _Generic(((T *)0)->m, int: sizeof(int))
#define DT_AT_SEED(T, m) DT_AT_(DT_FLAG_SEED, T, m), .size = _Generic(((T *)0)->m, uint64_t: sizeof(uint64_t))
/* an int, or an enum whose values are the words' indices */
#define DT_AT_CHOICE(T, m, w) \
    DT_AT_(DT_FLAG_CHOICE, T, m), .words = (w), .size = _Generic(((T *)0)->m, int: sizeof(int), unsigned: sizeof(int))
/* (a custom value is parsed aside first, in DT_FLAG_CUSTOM_MAX bytes: a larger type does not compile) */
#define DT_FLAG_CUSTOM_MAX 256
#define DT_AT_CUSTOM(T, m, type, parse_fn, format_fn)                                                              \
    DT_AT_(DT_FLAG_CUSTOM, T, m), .parse = (parse_fn), .format = (format_fn),                                     \
        .size = _Generic(((T *)0)->m, type: sizeof(type)) + 0 * sizeof(char[sizeof(type) <= DT_FLAG_CUSTOM_MAX ? 1 : -1])
/* ... and an int member of the same struct set to 1 when the flag is given (not defaulted) */
#define DT_GIVEN(T, m) .given_at = 1 + _Generic(((T *)0)->m, int: offsetof(T, m))

#ifdef __cplusplus
}
#endif
#endif /* DTRAIN_FLAG_H */
