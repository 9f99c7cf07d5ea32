/* The registry against the schemes' own declarations (scheme.h): names, flags, defaults,
 * ranges, the messages of bad values, the values in force, the configuration's JSON. No MPI. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schemes/paramavg.h"
#include "schemes/payload.h"
#include "schemes/registry.h"
#include "schemes/trigger.h"
#include "check.h"
#include "comm/codec.h"
#include "comm/world.h"
#include "core/json.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/server.h"


static int has_text(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* ------------------------------------------------------------------ registry and options */

static dt_scheme_config config(const char *algo) {
    dt_scheme_config a;
    memset(&a, 0, sizeof a);
    a.name = algo;
    return a;
}

static dt_status check_with(const char *algo, const char *flag, const char *value) {
    dt_scheme_config a = config(algo);
    dt_status st = dt_scheme_config_set(&a, flag, value);
    CHECK_MSG(st == DT_OK, "set --%s: %s", flag, dt_last_error());
    return dt_scheme_check(&a, NULL);
}

static void test_registry_table(void) {
    int n = 0;
    const dt_scheme_def *const *all = dt_schemes(&n);
    CHECK(n >= 7);
    int topo_seen = 0;
    for (int i = 0; i < n; i++) {
        const dt_scheme_def *s = all[i];
        CHECK(s && s->name && s->summary && s->create);
        CHECK(dt_scheme_find(s->name) == s);
        CHECK_MSG(has_text(dt_scheme_names(), s->name), "%s not in dt_scheme_names", s->name);
        for (int j = 0; j < i; j++) CHECK_MSG(strcmp(all[j]->name, s->name) != 0, "scheme %s twice", s->name);
        CHECK(s->nflags >= 0 && (s->nflags == 0 || s->flags));
        for (int f = 0; f < s->nflags; f++) {
            const dt_flag *fl = &s->flags[f];
            CHECK_MSG(fl->name && fl->def && fl->help && fl->name[0] != '-', "%s flag %d", s->name, f);
            for (int g = 0; g < f; g++)
                CHECK_MSG(strcmp(s->flags[g].name, fl->name) != 0, "%s declares --%s twice", s->name, fl->name);
            /* the same flag in another scheme: the same type and default */
            for (int j = 0; j < n; j++)
                for (int g = 0; j != i && g < all[j]->nflags; g++) {
                    const dt_flag *o = &all[j]->flags[g];
                    if (strcmp(o->name, fl->name)) continue;
                    CHECK_MSG(o->kind == fl->kind && !strcmp(o->def, fl->def), "--%s: %s and %s disagree", fl->name,
                              s->name, all[j]->name);
                    if (!strcmp(fl->name, "topology")) topo_seen++;
                }
        }
        /* every declared default passes the check, and the scheme creates with them */
        dt_scheme_config a = config(s->name);
        CHECK_MSG(dt_scheme_check(&a, NULL) == DT_OK, "%s with defaults: %s", s->name, dt_last_error());
        dt_scheme *st = NULL;
        CHECK_MSG(dt_scheme_make(&a, &st) == DT_OK && st && st->ops && st->def == s, "%s create: %s", s->name,
                  dt_last_error());
        dt_scheme_free(st);
    }
    /* ordered pairs of schemes that declare it: dpsgd, eventgrad and choco */
    CHECK_MSG(topo_seen == 6, "--topology declared by dpsgd, eventgrad and choco (pairs seen: %d)", topo_seen);
    CHECK(dt_scheme_find("nope") == NULL);
    const dt_scheme_def *loc = dt_scheme_find("local");
    CHECK(loc && loc->compress == DT_COMPRESS_NO);
    CHECK(dt_scheme_find("eventgrad") && dt_scheme_find("eventgrad")->compress == DT_COMPRESS_WITH_SYNC);
    /* NULL algo means local */
    dt_scheme_config a = config(NULL);
    CHECK(dt_scheme_check(&a, NULL) == DT_OK);
}

static void test_registry_refusals(void) {
    int n = 0;
    const dt_scheme_def *const *all = dt_schemes(&n);
    dt_scheme_config a = config("eventgrad");
    CHECK(dt_scheme_config_set(&a, "no-such-flag", "1") == DT_ERR_ARG);
    CHECK(has_text(dt_last_error(), "--no-such-flag"));
    CHECK(a.nset == 0);
    /* setting a flag twice keeps one entry, the last value */
    CHECK(dt_scheme_config_set(&a, "history", "3") == DT_OK && dt_scheme_config_set(&a, "history", "4") == DT_OK);
    CHECK(a.nset == 1 && !strcmp(a.set[0].value, "4"));

    a = config("sgd");
    CHECK(dt_scheme_check(&a, NULL) == DT_ERR_ARG);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    CHECK(has_text(msg, "--algo sgd"));
    /* a misspelt scheme: the nearest name; a far one: the list */
    a = config("allreduse");
    CHECK(dt_scheme_check(&a, NULL) == DT_ERR_ARG && has_text(dt_last_error(), "--algo allreduse: unknown scheme (did you mean allreduce?)"));
    a = config("gossip");
    CHECK(dt_scheme_check(&a, NULL) == DT_ERR_ARG && has_text(dt_last_error(), "(expected one of: local, allreduce"));

    /* a flag of another scheme is refused (it would be ignored), naming the schemes that take it */
    a = config("allreduce");
    CHECK(dt_scheme_config_set(&a, "local-steps", "5") == DT_OK);
    CHECK_MSG(dt_scheme_check(&a, NULL) == DT_ERR_ARG && !strcmp(dt_last_error(), "--local-steps: a flag of fedavg, not of --algo allreduce"),
              "%s", dt_last_error());
    dt_scheme *none = NULL;
    CHECK(dt_scheme_make(&a, &none) == DT_ERR_ARG && none == NULL);
    a = config("fedavg");
    dt_scheme_config_set(&a, "topology", "ring");
    CHECK_MSG(dt_scheme_check(&a, NULL) == DT_ERR_ARG && !strcmp(dt_last_error(), "--topology: a flag of dpsgd, eventgrad, choco, not of --algo fedavg"),
              "%s", dt_last_error());
    a = config(NULL); /* local takes no scheme flag */
    dt_scheme_config_set(&a, "servers", "1");
    CHECK_MSG(dt_scheme_check(&a, NULL) == DT_ERR_ARG && has_text(dt_last_error(), "not of --algo local"), "%s", dt_last_error());
    /* a flag several schemes share passes for each of them */
    a = config("dpsgd");
    dt_scheme_config_set(&a, "topology", "ring");
    CHECK_MSG(dt_scheme_check(&a, NULL) == DT_OK, "%s", dt_last_error());
    a = config("eventgrad");
    dt_scheme_config_set(&a, "topology", "ring");
    CHECK_MSG(dt_scheme_check(&a, NULL) == DT_OK, "%s", dt_last_error());
    for (int i = 0; i < n; i++) CHECK_MSG(has_text(msg, all[i]->name), "%s missing from: %s", all[i]->name, msg);

    a = config("local");
    a.compress = "fp16";
    CHECK(dt_scheme_check(&a, NULL) == DT_ERR_ARG);
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    CHECK(has_text(msg, "--compress fp16") && has_text(msg, "local"));
    for (int i = 0; i < n; i++)
        if (all[i]->compress != DT_COMPRESS_NO)
            CHECK_MSG(has_text(msg, all[i]->name), "%s missing from: %s", all[i]->name, msg);
    CHECK(has_text(msg, "eventgrad with --sync"));
    a.compress = "none";
    CHECK(dt_scheme_check(&a, NULL) == DT_OK);
    a = config("allreduce");
    a.compress = "fp17";
    CHECK(dt_scheme_check(&a, NULL) == DT_ERR_ARG && has_text(dt_last_error(), "--compress"));

    struct { const char *algo, *flag, *value; } bad[] = {
        {"eventgrad", "history", "0"},           {"eventgrad", "history", "abc"},
        {"eventgrad", "history", "1001"},        {"eventgrad", "history", "2.5"},
        {"eventgrad", "threshold-decay", "1.5"}, {"eventgrad", "threshold-decay", "0"},
        {"eventgrad", "horizon", "0"},           {"eventgrad", "horizon", "-1"},
        {"eventgrad", "warmup-steps", "-1"},     {"eventgrad", "sync", "2"},
        {"downpour", "servers", "0"},            {"downpour", "worker-timeout", "0"},
        {"fedavg", "local-epochs", "0"},         {"fedavg", "local-steps", "x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(check_with(bad[i].algo, bad[i].flag, bad[i].value) == DT_ERR_ARG, "--%s %s accepted", bad[i].flag,
                  bad[i].value);
        char want[64];
        snprintf(want, sizeof want, "--%s %s", bad[i].flag, bad[i].value);
        CHECK_MSG(has_text(dt_last_error(), want), "want '%s' in: %s", want, dt_last_error());
    }
    /* the edges of the ranges */
    struct { const char *algo, *flag, *value; } good[] = {
        {"eventgrad", "history", "1"},         {"eventgrad", "history", "1000"},
        {"eventgrad", "threshold-decay", "1"}, {"eventgrad", "threshold-decay", "1e-6"},
        {"eventgrad", "horizon", "1e-6"},      {"eventgrad", "warmup-steps", "0"},
        {"eventgrad", "sync", "1"},            {"downpour", "servers", "1"},
        {"fedavg", "local-steps", "0"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_MSG(check_with(good[i].algo, good[i].flag, good[i].value) == DT_OK, "--%s %s: %s", good[i].flag,
                  good[i].value, dt_last_error());

    /* words are checked at create, with a message naming the flag */
    dt_scheme *s = NULL;
    struct { const char *algo, *flag, *value; } words[] = {
        {"eventgrad", "threshold", "fast"}, {"eventgrad", "topology", "star"},
        {"dpsgd", "topology", "line"},      {"fedavg", "aggregate", "median"},
        {"ps", "ps-mode", "both"},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        a = config(words[i].algo);
        dt_scheme_config_set(&a, words[i].flag, words[i].value);
        CHECK_MSG(dt_scheme_check(&a, NULL) == DT_ERR_ARG, "--%s %s passed the check", words[i].flag, words[i].value);
        CHECK_MSG(dt_scheme_make(&a, &s) == DT_ERR_ARG && s == NULL, "--%s %s created", words[i].flag,
                  words[i].value);
        char want[64];
        snprintf(want, sizeof want, "--%s %s", words[i].flag, words[i].value);
        CHECK_MSG(has_text(dt_last_error(), want), "want '%s' in: %s", want, dt_last_error());
    }
    /* eventgrad compresses only in lock-step */
    a = config("eventgrad");
    a.compress = "int8";
    /* the scheme takes --compress, with --sync: refused already by the check, before any rank
     * starts (a trial create), and by create */
    CHECK(dt_scheme_check(&a, NULL) == DT_ERR_ARG && has_text(dt_last_error(), "--sync"));
    CHECK(dt_scheme_make(&a, &s) == DT_ERR_ARG && s == NULL);
    CHECK_MSG(has_text(dt_last_error(), "--sync"), "%s", dt_last_error());
    dt_scheme_config_set(&a, "sync", "1");
    CHECK_MSG(dt_scheme_make(&a, &s) == DT_OK && s, "%s", dt_last_error());
    if (s) CHECK(s->codec.kind == DT_CODEC_INT8 && s->decentralized == 1);
    dt_scheme_free(s);
}

/* A flag's value in force, as text, read through the scheme's own table from its typed
 * options struct (the test knows the names; the schemes read members). */
static const char *value_of(const dt_scheme *s, const char *name) {
    static char buf[64];
    const dt_flag *f = dt_flag_find(s->def->flags, s->def->nflags, name);
    CHECK_MSG(f != NULL, "%s declares no --%s", s->def->name, name);
    if (!f) return "";
    dt_flag_format(f, s->opts, buf, sizeof buf);
    return buf;
}

static void test_registry_values(void) {
    dt_scheme *s = NULL;
    dt_scheme_config a = config("eventgrad");
    CHECK(dt_scheme_make(&a, &s) == DT_OK);
    if (s) {
        const char *want[][2] = {{"history", "2"}, {"warmup-steps", "30"}, {"horizon", "2"}, {"threshold-decay", "1"},
                                 {"sync", "0"}, {"threshold", "adaptive"}, {"topology", "ring"}, {"mix", "auto"}, {"gamma", "0.5"}};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECK_MSG(!strcmp(value_of(s, want[i][0]), want[i][1]), "--%s: %s, want %s", want[i][0], value_of(s, want[i][0]),
                      want[i][1]);
        dt_scheme_free(s);
    }
    dt_scheme_config_set(&a, "history", "3");
    dt_scheme_config_set(&a, "horizon", "0.25");
    dt_scheme_config_set(&a, "sync", "1");
    dt_scheme_config_set(&a, "threshold", "const:0.5");
    dt_scheme_config_set(&a, "topology", "torus");
    dt_scheme_config_set(&a, "warmup-steps", "30"); /* given, though equal to the default */
    CHECK(dt_scheme_make(&a, &s) == DT_OK);
    if (s) {
        const char *want[][2] = {{"history", "3"}, {"horizon", "0.25"}, {"sync", "1"}, {"threshold", "const:0.5"},
                                 {"topology", "torus"}, {"threshold-decay", "1"}};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECK_MSG(!strcmp(value_of(s, want[i][0]), want[i][1]), "--%s: %s, want %s", want[i][0], value_of(s, want[i][0]),
                      want[i][1]);
        dt_scheme_free(s);
    }
    dt_scheme_config_set(&a, "topology", "ring"); /* as the configuration line below wants it */
    /* a flag of another scheme is recorded but not this scheme's business */
    dt_scheme_config d = config("downpour");
    dt_scheme_config_set(&d, "fetch-every", "4");
    CHECK(dt_scheme_make(&d, &s) == DT_OK);
    if (s) {
        CHECK(!strcmp(value_of(s, "servers"), "1") && dt_scheme_servers(s) == 1);
        CHECK(!strcmp(value_of(s, "fetch-every"), "4") && !strcmp(value_of(s, "push-every"), "1"));
        CHECK(!strcmp(value_of(s, "worker-timeout"), "30"));
        dt_scheme_free(s);
    }
    dt_scheme_config_set(&d, "servers", "2");
    CHECK(dt_scheme_make(&d, &s) == DT_OK);
    if (s) CHECK(!strcmp(value_of(s, "servers"), "2") && dt_scheme_servers(s) == 2);
    dt_scheme_free(s);
    dt_scheme_config f = config("fedavg");
    CHECK(dt_scheme_make(&f, &s) == DT_OK);
    if (s) {
        CHECK(!strcmp(value_of(s, "local-epochs"), "1") && !strcmp(value_of(s, "local-steps"), "0"));
        CHECK(!strcmp(value_of(s, "aggregate"), "average"));
        dt_scheme_free(s);
    }
    /* --local-steps with --local-epochs given (even at its default) is refused before any
     * rank starts: whether a flag was given is a typed member too (DT_GIVEN) */
    dt_scheme_config_set(&f, "local-steps", "5");
    CHECK_MSG(dt_scheme_check(&f, NULL) == DT_OK, "%s", dt_last_error());
    dt_scheme_config_set(&f, "local-epochs", "1");
    CHECK(dt_scheme_check(&f, NULL) == DT_ERR_ARG && has_text(dt_last_error(), "--local-steps and --local-epochs: give one of them"));
    dt_scheme_config_set(&f, "local-steps", "0");
    dt_scheme_config_set(&f, "aggregate", "loss");
    CHECK_MSG(dt_scheme_make(&f, &s) == DT_OK, "%s", dt_last_error());
    if (s) CHECK(!strcmp(value_of(s, "aggregate"), "loss") && !strcmp(value_of(s, "local-epochs"), "1"));
    dt_scheme_free(s);
    /* the library's misspelt flag: the nearest name of any scheme */
    CHECK(dt_scheme_config_set(&f, "histroy", "3") == DT_ERR_ARG &&
          has_text(dt_last_error(), "--histroy: no scheme takes this flag (did you mean --history?)"));

    /* the configuration line: every flag of the scheme, with its value in force */
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    CHECK_MSG(dt_scheme_make(&a, &s) == DT_OK, "%s", dt_last_error());
    if (s) dt_scheme_flags_json(s, &j);
    dt_scheme_free(s);
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    CHECK(text != NULL);
    const dt_scheme_def *eg = dt_scheme_find("eventgrad");
    for (int i = 0; text && i < eg->nflags; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", eg->flags[i].name);
        CHECK_MSG(has_text(text, key), "%s missing from %s", key, text);
    }
    const char *want[] = {"\"history\":3", "\"sync\":true", "\"horizon\":0.25", "\"threshold\":\"const:0.5\"",
                          "\"warmup-steps\":30", "\"threshold-decay\":1", "\"topology\":\"ring\""};
    for (size_t i = 0; text && i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(has_text(text, want[i]), "%s missing from %s", want[i], text);
    dt_json_reset(&j);
    dt_scheme_config l = config("local");
    dt_json_begin(&j, NULL);
    CHECK(dt_scheme_make(&l, &s) == DT_OK);
    if (s) dt_scheme_flags_json(s, &j);
    dt_scheme_free(s);
    dt_json_end(&j);
    text = dt_json_text(&j);
    CHECK_MSG(text && !strcmp(text, "{}"), "%s", text ? text : "(null)");
    dt_json_free(&j);
}


/* A flag's text is parsed once in a process: dt_scheme_check fills the options, create takes
 * them, the configuration line formats them. A custom flag counts its parses of the text
 * given (its default's parses are the registry's and the check's own). */
static int given_parses;
typedef struct { long v; } counted_opts;
static const char *count_parse(const char *text, void *value) {
    if (!strcmp(text, "7")) given_parses++;
    const long v = strtol(text, NULL, 10);
    memcpy(value, &v, sizeof v);
    return NULL;
}
static void count_format(const void *value, char *out, size_t len) {
    long v;
    memcpy(&v, value, sizeof v);
    snprintf(out, len, "%ld", v);
}
static const dt_flag counted_flags[] = {
    {"counted", DT_AT_CUSTOM(counted_opts, v, long, count_parse, count_format), .def = "1", .help = "counted"},
};
static const dt_scheme_ops counted_ops = {0};
static dt_status counted_create(dt_scheme *s) {
    s->ops = &counted_ops;
    return DT_OK;
}
static const dt_scheme_def counted_scheme = {.name = "counted", .summary = "counts its flag's parses",
                                             DT_SCHEME_FLAGS(counted_flags, counted_opts), .create = counted_create};

static void test_registry_parsed_once(void) {
    CHECK_MSG(dt_scheme_register(&counted_scheme) == DT_OK, "%s", dt_last_error());
    dt_scheme_config a = config("counted");
    CHECK(dt_scheme_config_set(&a, "counted", "7") == DT_OK && given_parses == 0);
    dt_scheme_choice c;
    CHECK_MSG(dt_scheme_check(&a, &c) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(given_parses == 1, "parsed %d times by the check", given_parses);
    dt_scheme *s = NULL;
    CHECK(dt_scheme_create(&c, &s) == DT_OK && s && c.opts == NULL);
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    if (s) dt_scheme_flags_json(s, &j);
    dt_json_end(&j);
    CHECK_MSG(dt_json_text(&j) && has_text(dt_json_text(&j), "\"counted\":\"7\""), "%s", dt_json_text(&j));
    CHECK_MSG(given_parses == 1, "parsed %d times by check, create and the configuration line", given_parses);
    CHECK(s && ((const counted_opts *)s->opts)->v == 7);
    dt_json_free(&j);
    dt_scheme_free(s);
    /* a choice is made by the check only */
    dt_scheme_choice none = {0};
    CHECK(dt_scheme_create(&none, &s) == DT_ERR_STATE && s == NULL);
}

int main(void) {
    test_registry_table();
    test_registry_refusals();
    test_registry_values();
    test_registry_parsed_once();
    return test_summary("test_registry");
}
