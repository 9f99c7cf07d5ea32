/* The flag system (core/flag_table.h): every kind parsed from text into its typed member, the
 * one-line messages of bad values (the member untouched), a custom parse, format and parse
 * again giving the same value, declared defaults and DT_GIVEN, and command lines: both
 * spellings, switches, a flag handed on as text, an unknown flag with "did you mean", and
 * --help with the defaults. No MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/flag_table.h"
#include "dtrain.h"

static int has_text(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* a custom kind: "x:y", two ints */
typedef struct { int x, y; } pair;
static const char *pair_parse(const char *text, void *value) {
    pair p;
    char tail;
    if (sscanf(text, "%d:%d%c", &p.x, &p.y, &tail) != 2) return "X:Y with integers X and Y";
    memcpy(value, &p, sizeof p);
    return NULL;
}
static void pair_format(const void *value, char *out, size_t len) {
    pair p;
    memcpy(&p, value, sizeof p);
    snprintf(out, len, "%d:%d", p.x, p.y);
}

typedef struct {
    int n, n_given;
    long big;
    float x;
    double d;
    const char *name;
    int on;
    uint64_t seed;
    int color;
    pair at;
} opts;

static const char *const colors[] = {"red", "green", "blue", NULL};

static const dt_flag flags[] = {
    {"n", DT_AT_INT(opts, n), DT_GIVEN(opts, n_given), .def = "3", .min = 1, .max = 1000, .help = "a count"},
    {"big", DT_AT_INT(opts, big), .def = "0", .help = "a long, unbounded"},
    {"x", DT_AT_FLOAT(opts, x), .def = "0.1", .min = 0, .max = 1, .min_open = 1, .help = "a float in (0, 1]"},
    {"d", DT_AT_FLOAT(opts, d), .def = "2.5", .help = "a double"},
    {"name", DT_AT_TEXT(opts, name), .help = "a word", .zero = "none"},
    {"on", DT_AT_SWITCH(opts, on), .def = "0", .help = "a switch"},
    {"seed", DT_AT_SEED(opts, seed), .def = "1", .help = "a seed"},
    {"color", DT_AT_CHOICE(opts, color, colors), .def = "green", .help = "red | green | blue"},
    {"at", DT_AT_CUSTOM(opts, at, pair, pair_parse, pair_format), .def = "1:2", .help = "a pair"},
    {"secret", DT_AT_INT(opts, big), .hidden = 1, .help = "for the tests"},
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

static const dt_flag *F(const char *name) {
    const dt_flag *f = dt_flag_find(flags, NFLAGS, name);
    CHECK_MSG(f != NULL, "--%s not found", name);
    return f;
}

static void test_defaults_and_kinds(void) {
    opts o;
    memset(&o, 0xff, sizeof o);
    o.name = NULL;
    CHECK(dt_flags_defaults(flags, NFLAGS, &o) == DT_OK);
    CHECK(o.n == 3 && o.n_given == 0 && o.big == 0 && o.x == 0.1f && o.d == 2.5 && o.on == 0 && o.seed == 1);
    CHECK(o.color == 1 && o.at.x == 1 && o.at.y == 2 && o.name == NULL);
    CHECK(dt_flag_find(flags, NFLAGS, "nope") == NULL);

    CHECK(dt_flag_set(F("n"), &o, "1000") == DT_OK && o.n == 1000 && o.n_given == 1);
    CHECK(dt_flag_set(F("big"), &o, "-9000000000") == DT_OK && o.big == -9000000000L);
    CHECK(dt_flag_set(F("x"), &o, "1") == DT_OK && o.x == 1.0f);
    CHECK(dt_flag_set(F("d"), &o, "-1e300") == DT_OK && o.d == -1e300);
    CHECK(dt_flag_set(F("name"), &o, "abc") == DT_OK && o.name && !strcmp(o.name, "abc"));
    CHECK(dt_flag_set(F("on"), &o, "1") == DT_OK && o.on == 1);
    CHECK(dt_flag_set(F("seed"), &o, "18446744073709551615") == DT_OK && o.seed == UINT64_MAX);
    CHECK(dt_flag_set(F("color"), &o, "blue") == DT_OK && o.color == 2);
    CHECK(dt_flag_set(F("at"), &o, "-4:7") == DT_OK && o.at.x == -4 && o.at.y == 7);
}

static void test_bad_values(void) {
    opts o;
    CHECK(dt_flags_defaults(flags, NFLAGS, &o) == DT_OK);
    const opts before = o;
    struct { const char *flag, *value, *msg; } bad[] = {
        {"n", "0", "--n 0: expected an integer >= 1 and <= 1000"},
        {"n", "1001", "--n 1001: expected an integer >= 1 and <= 1000"},
        {"n", "2.5", "--n 2.5: expected an integer >= 1 and <= 1000"},
        {"n", "99999999999", "--n 99999999999: expected an integer >= 1 and <= 1000"},
        {"big", "1x", "--big 1x: expected an integer"},
        {"x", "0", "--x 0: expected a number > 0 and <= 1"},
        {"x", "nan", "--x nan: expected a number > 0 and <= 1"},
        {"x", "1e-50", "--x 1e-50: expected a number > 0 and <= 1"}, /* 0 as a float */
        {"d", "1e400", "--d 1e400: expected a number"},
        {"d", "", "--d: expected a number"},
        {"name", "", "--name: expected a value, not nothing"},
        {"on", "yes", "--on yes: expected 0 or 1"},
        {"seed", "-1", "--seed -1: expected an integer >= 0 (a seed, below 2^64)"},
        {"seed", "18446744073709551616", "--seed 18446744073709551616: expected an integer >= 0 (a seed, below 2^64)"},
        {"color", "gren", "--color gren: expected red, green or blue (did you mean green?)"},
        {"color", "purple", "--color purple: expected red, green or blue"},
        {"at", "1:", "--at 1:: expected X:Y with integers X and Y"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(dt_flag_set(F(bad[i].flag), &o, bad[i].value) == DT_ERR_ARG, "--%s '%s' accepted", bad[i].flag, bad[i].value);
        CHECK_MSG(!strcmp(dt_last_error(), bad[i].msg), "got '%s', want '%s'", dt_last_error(), bad[i].msg);
    }
    CHECK_MSG(!memcmp(&o, &before, sizeof o), "a bad value changed the options");
    /* a float member: a value beyond float's range is refused, not made infinite */
    CHECK(dt_flag_set(F("x"), &o, "1e39") == DT_ERR_ARG && o.x == before.x);
}

/* every flag formatted, parsed back: the same member */
static void test_format_round_trip(void) {
    opts o;
    CHECK(dt_flags_defaults(flags, NFLAGS, &o) == DT_OK);
    const char *values[][2] = {{"n", "17"}, {"big", "-123456789012"}, {"x", "0.3"}, {"d", "0.1"}, {"name", "w x"},
                               {"on", "1"}, {"seed", "12345678901234567890"}, {"color", "red"}, {"at", "5:-6"}};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        const dt_flag *f = F(values[i][0]);
        CHECK(dt_flag_set(f, &o, values[i][1]) == DT_OK);
        char text[64];
        dt_flag_format(f, &o, text, sizeof text);
        CHECK_MSG(!strcmp(text, values[i][1]), "--%s %s formats as '%s'", f->name, values[i][1], text);
        opts again = o;
        char text2[64];
        CHECK(dt_flag_set(f, &again, text) == DT_OK);
        dt_flag_format(f, &again, text2, sizeof text2);
        CHECK_MSG(!strcmp(text, text2), "--%s: '%s', then '%s'", f->name, text, text2);
        /* the same bytes (a text member points at the text parsed, so that is its own) */
        CHECK_MSG(f->kind == DT_FLAG_TEXT || !memcmp((char *)&again + f->at, (char *)&o + f->at, f->size), "--%s", f->name);
    }
    /* the shortest text that reads back: 0.1f is "0.1", not 0.100000001 */
    char text[64];
    dt_flag_shortest(0.1f, 1, text, sizeof text);
    CHECK_MSG(!strcmp(text, "0.1"), "%s", text);
    dt_flag_shortest(0.1, 0, text, sizeof text);
    CHECK_MSG(!strcmp(text, "0.1"), "%s", text);
    dt_flag_shortest(1.0 / 3, 0, text, sizeof text);
    CHECK_MSG(strtod(text, NULL) == 1.0 / 3, "%s", text);

    /* the configuration line: numbers as numbers, switches as booleans, the rest as text */
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    for (int i = 0; i < NFLAGS; i++) dt_flag_json(&flags[i], &o, &j);
    dt_json_end(&j);
    const char *want[] = {"\"n\":17", "\"x\":0.3", "\"on\":true", "\"seed\":12345678901234567890", "\"color\":\"red\"",
                          "\"at\":\"5:-6\"", "\"name\":\"w x\""};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(has_text(dt_json_text(&j), want[i]), "%s not in %s", want[i], dt_json_text(&j));
    dt_json_free(&j);
}

/* the text of the flags handed on (a scheme's flags on the command line) */
static char taken[256];
static dt_status take(void *ctx, const dt_flag *f, const char *text) {
    (void)ctx;
    size_t o = strlen(taken);
    snprintf(taken + o, sizeof taken - o, "%s=%s;", f->name, text);
    return DT_OK;
}

static dt_status parse(opts *o, int *help, int argc, char **argv) {
    static const dt_flag other[] = {
        {"words", .kind = DT_FLAG_TEXT, .def = "a", .help = "handed on"},
        {"sync", .kind = DT_FLAG_SWITCH, .help = "handed on"},
    };
    const dt_flag_list lists[] = {{.flags = flags, .n = NFLAGS, .base = o}, {.flags = other, .n = 2, .take = take}};
    memset(o, 0, sizeof *o);
    dt_flags_defaults(flags, NFLAGS, o);
    taken[0] = 0;
    return dt_flags_parse_argv("test", argc, argv, 1, lists, 2, help);
}

static void test_argv(void) {
    opts o;
    int help;
    char *good[] = {"prog", "--n", "7", "--x=0.5", "--on", "--words", "b c", "--sync", "--color=blue", "--name", "--x"};
    CHECK_MSG(parse(&o, &help, 11, good) == DT_OK, "%s", dt_last_error());
    CHECK(o.n == 7 && o.n_given && o.x == 0.5f && o.on == 1 && o.color == 2 && !help);
    CHECK_MSG(o.name && !strcmp(o.name, "--x"), "a value that looks like a flag is the value: %s", o.name ? o.name : "NULL");
    CHECK_MSG(!strcmp(taken, "words=b c;sync=1;"), "%s", taken);

    char *h[] = {"prog", "-h"};
    CHECK(parse(&o, &help, 2, h) == DT_OK && help == 1);
    /* a one-letter flag with one dash, as --help writes it; a longer one needs two */
    char *short_form[] = {"prog", "-n", "9", "-x=0.25"};
    CHECK_MSG(parse(&o, &help, 4, short_form) == DT_OK && o.n == 9 && o.x == 0.25f, "%s", dt_last_error());
    char *long_one_dash[] = {"prog", "-name", "w"};
    CHECK(parse(&o, &help, 3, long_one_dash) == DT_ERR_ARG && strstr(dt_last_error(), "unexpected argument '-name'"));

    struct { int argc; char *argv[4]; const char *msg; } bad[] = {
        {2, {"prog", "--colour"}, "dtrain test: unknown flag '--colour' (did you mean --color?)"},
        {3, {"prog", "--bgi", "3"}, "dtrain test: unknown flag '--bgi' (did you mean --big?)"},
        {2, {"prog", "--zebra"}, "dtrain test: unknown flag '--zebra' (see dtrain test --help)"},
        {2, {"prog", "--secrt"}, "dtrain test: unknown flag '--secrt' (see dtrain test --help)"}, /* hidden: not suggested */
        {2, {"prog", "--n"}, "dtrain test: --n needs a value"},
        {2, {"prog", "--on=1"}, "dtrain test: --on takes no value"},
        {2, {"prog", "n"}, "dtrain test: unexpected argument 'n' (flags start with --; see dtrain test --help)"},
        {3, {"prog", "--n", "0"}, "dtrain test: --n 0: expected an integer >= 1 and <= 1000"},
        {2, {"prog", "--color=pink"}, "dtrain test: --color pink: expected red, green or blue"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(parse(&o, &help, bad[i].argc, bad[i].argv) == DT_ERR_ARG, "%s accepted", bad[i].argv[1]);
        CHECK_MSG(!strcmp(dt_last_error(), bad[i].msg), "got '%s', want '%s'", dt_last_error(), bad[i].msg);
    }
    /* the hidden flag itself is taken */
    char *hid[] = {"prog", "--secret", "5"};
    CHECK(parse(&o, &help, 3, hid) == DT_OK && o.big == 5);
    const dt_flag_list list = {.flags = flags, .n = NFLAGS, .base = &o};
    CHECK(dt_flags_lookup(&list, 1, "--color=red", NULL) == F("color"));
    CHECK(dt_flags_lookup(&list, 1, "color", NULL) == NULL && dt_flags_lookup(&list, 1, "--col", NULL) == NULL);
}

/* --help: one line a flag, with the value in force as the default ([none] for a zero one,
 * none for a switch), the hidden flag left out */
static void test_help(void) {
    opts o;
    memset(&o, 0, sizeof o);
    dt_flags_defaults(flags, NFLAGS, &o);
    o.n = 42; /* the value in force, not the declared default */
    const dt_flag_list list = {.flags = flags, .n = NFLAGS, .base = &o};
    char path[] = "/tmp/test_flag_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    dt_flags_help("test", "[flags]", &list, 1);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char text[4096] = "";
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
    text[n] = 0;
    if (fp) fclose(fp);
    close(fd);
    unlink(path);
    /* one-letter flags as usage lines write them (-n N), and as the parser takes them too */
    const char *want[] = {"usage: dtrain test [flags]\n", "  -n N                   a count [42]\n",
                          "  -x X                   a float in (0, 1] [0.1]\n", "  --name S               a word [none]\n",
                          "  --on                   a switch\n", "  --color S              red | green | blue [green]\n",
                          "  --at S                 a pair [1:2]\n", "  --seed N               a seed [1]\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK_MSG(has_text(text, want[i]), "'%s' not in:\n%s", want[i], text);
    CHECK_MSG(!has_text(text, "secret"), "the hidden flag is listed:\n%s", text);
}

int main(void) {
    test_defaults_and_kinds();
    test_bad_values();
    test_format_round_trip();
    test_argv();
    test_help();
    return test_summary("test_flag");
}
