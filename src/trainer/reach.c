/* Flags that cannot act within the run: a warm-up longer than the run (eventgrad is then
 * dpsgd), averagings every more steps than it has (fedavg never averages), an evaluation
 * period or a decay past its end. Each such flag declares what it needs of the run's length
 * (dt_flag.reach, dtrain/flag.h) and what the run does instead; one check here compares them
 * all with the run's steps and epochs and warns once per flag, from rank 0, before training.
 * A warning, not an error: a short run with the defaults is a fine smoke test, but a
 * comparison made with it would be of something else than its name says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/trainer.h"

typedef struct {
    const char *name;      /* the flag, without -- */
    long value;
    dt_flag_reach reach;
    const char *unreached; /* what the run does instead */
    const char *whose;     /* "eventgrad's default", or NULL when given */
    const char *shown;     /* the value as given, when not just the number (NULL: the number) */
} reach_item;

/* 1: a value of the flag's kind cannot act within `steps` steps and `epochs` epochs */
static int out_of_reach(long v, dt_flag_reach r, long steps, long epochs) {
    if (v <= 0) return 0; /* off */
    switch (r) {
    case DT_REACH_START_STEPS: return v >= steps;
    case DT_REACH_EVERY_STEPS: return v > steps;
    case DT_REACH_START_EPOCHS: return v >= epochs;
    case DT_REACH_EVERY_EPOCHS: return v > epochs;
    case DT_REACH_NONE: break;
    }
    return 0;
}

static void warn(const reach_item *it, long steps, long epochs) {
    const int in_epochs = it->reach == DT_REACH_START_EPOCHS || it->reach == DT_REACH_EVERY_EPOCHS;
    if (!out_of_reach(it->value, it->reach, steps, epochs)) return;
    char value[64];
    if (it->shown) snprintf(value, sizeof value, "%s", it->shown);
    else snprintf(value, sizeof value, "%ld", it->value);
    fprintf(stderr, "dtrain: warning: --%s %s%s%s%s cannot act in a run of %ld %s%s: %s\n", it->name, value,
            it->whose ? " (" : "", it->whose ? it->whose : "", it->whose ? ")" : "", in_epochs ? epochs : steps,
            in_epochs ? "epoch" : "step", (in_epochs ? epochs : steps) == 1 ? "" : "s", it->unreached);
}

static int scheme_flag_given(const dt_train_config *cfg, const char *name) {
    for (int i = 0; i < cfg->scheme.nset; i++)
        if (!strcmp(cfg->scheme.set[i].name, name)) return 1;
    return 0;
}

/* An INT flag's value in the scheme's options (int or long, as DT_AT_INT allows) */
static long int_value(const dt_flag *f, const void *opts) {
    const char *at = (const char *)opts + f->at;
    if (f->size == sizeof(long)) { long v; memcpy(&v, at, sizeof v); return v; }
    int v;
    memcpy(&v, at, sizeof v);
    return v;
}

void dt_trainer_warn_unreached(const dt_trainer *t) {
    const dt_train_config *cfg = t->cfg;
    /* (the tests that count stderr's lines set this, as for the CLI's own set-up warnings) */
    if (t->comm.rank != 0 || getenv("DTRAIN_NO_SETUP_WARNINGS")) return;
    const long all = (long)cfg->epochs * t->ctx.run.steps_per_epoch;
    const long steps = cfg->max_steps > 0 && cfg->max_steps < all ? cfg->max_steps : all;
    const long spe = t->ctx.run.steps_per_epoch > 0 ? t->ctx.run.steps_per_epoch : 1;
    const long epochs = (steps + spe - 1) / spe; /* those it trains in, the last maybe partial */
    /* the trainer's own: evaluations and the step schedule's decay */
    const reach_item own[] = {
        {"eval-every-steps", cfg->eval_every_steps, DT_REACH_START_STEPS,
         "no evaluation between steps, only the epochs' (the last step's is the run's own)", NULL, NULL},
        {"eval-every", cfg->eval_every, DT_REACH_EVERY_EPOCHS, "only the run's final evaluation", NULL, NULL},
        {"schedule", t->sched.kind == DT_SCHED_STEP ? t->sched.step_every : 0, DT_REACH_START_EPOCHS,
         "the learning rate never decays", NULL, cfg->schedule},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) warn(&own[i], steps, epochs);
    /* the scheme's, as declared with its flags (defaults too: eventgrad's warm-up is one) */
    const dt_scheme *s = t->scheme;
    if (!s || !s->opts) return;
    char whose[96];
    for (int i = 0; i < s->def->nflags; i++) {
        const dt_flag *f = &s->def->flags[i];
        if (f->reach == DT_REACH_NONE || f->kind != DT_FLAG_INT) continue;
        if (f->reach_when && !f->reach_when(s->opts, cfg->scheme.compress)) continue;
        snprintf(whose, sizeof whose, "%s's default", s->def->name);
        const reach_item it = {f->name, int_value(f, s->opts), f->reach, f->unreached,
                               scheme_flag_given(cfg, f->name) ? NULL : whose, NULL};
        warn(&it, steps, epochs);
    }
}
