/* A replay (dtrain sim --replay LOG, docs/simulation.md "Replays"): a simulated run of a scheme
 * whose numbers do not depend on the network (dtrain/scheme.h C14) that calculates nothing (the
 * model charges each layer's FLOPs and leaves the numbers, models/model.c) and takes every
 * evaluation's figures from LOG, the log of a run of the same flags. It costs what the messages
 * cost to simulate, not the training: one run, then its time on any other network.
 *
 * What makes it trustworthy is checked here, on rank 0: LOG's configuration is this run's but
 * for what only says where and how it ran (the command, the platform, the log's path), and at
 * every evaluation this run has sent, to the byte, what LOG's run had by the same step (a
 * scheme whose messages depend on its numbers fails at the first). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "trainer/replay.h"

typedef struct {
    int epoch_line;        /* 0: an evaluation between steps ("eval"), 1: an epoch's ("epoch") */
    long at;               /* its step, or its epoch */
    double test_acc, test_loss, val_acc, val_loss, spread;
    double loss, train_acc; /* an epoch line's training figures */
    double msgs, mb;       /* what the run had sent by then */
} record;

struct dt_replay {
    char path[1024];
    record *r;
    int n, cap, next;
    double spread_before, spread_after; /* the summary's */
    int has_summary;
};

/* The configuration's keys that say where and how a run ran, not what it computed: a replay's
 * may differ from its log's. Everything else (a key added later too) must be equal. */
static const char *const where_keys[] = {"type", "started_utc", "command", "version", "commit", "hosts", "simulated",
                                         "sim", "waits", "engines", "out", "log", "checkpoint", "run_dir", "restarts",
                                         "resume", "target_acc", "target_loss", "target_on", NULL};

static int is_where_key(const char *k) {
    for (int i = 0; where_keys[i]; i++)
        if (!strcmp(k, where_keys[i])) return 1;
    return 0;
}

static double num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* "null" for a key the object lacks; the caller frees */
static char *shown(json_t *v) {
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    return s ? s : strdup("(none)");
}

static dt_status check_config(const dt_replay *rp, json_t *theirs, json_t *ours, int line) {
    const char *key;
    json_t *v;
    for (int pass = 0; pass < 2; pass++) {
        json_t *a = pass ? theirs : ours, *b = pass ? ours : theirs;
        json_object_foreach(a, key, v) {
            if (is_where_key(key)) continue;
            json_t *w = json_object_get(b, key);
            if (w && json_equal(v, w)) continue;
            char *mine = shown(pass ? w : v), *log = shown(pass ? v : w);
            dt_status st = dt_fail(DT_ERR_ARG, "dtrain sim --replay %s:%d: that run's %s was %s, this run's is %s (a replay "
                                   "times a run of the same flags on another network)", rp->path, line, key, log, mine);
            free(mine); free(log);
            return st;
        }
    }
    return DT_OK;
}

static dt_status add_record(dt_replay *rp, json_t *o, int epoch_line) {
    if (rp->n == rp->cap) {
        const int cap = rp->cap ? 2 * rp->cap : 64;
        record *r = realloc(rp->r, (size_t)cap * sizeof *r);
        if (!r) return dt_nomem("the %d evaluations of %s", cap, rp->path);
        rp->r = r;
        rp->cap = cap;
    }
    record *r = &rp->r[rp->n++];
    r->epoch_line = epoch_line;
    r->at = (long)num(o, epoch_line ? "epoch" : "step");
    r->test_acc = num(o, "test_acc");
    r->test_loss = num(o, "test_loss");
    r->val_acc = num(o, "val_acc");
    r->val_loss = num(o, "val_loss");
    r->spread = num(o, "spread");
    r->loss = num(o, "loss");
    r->train_acc = num(o, "train_acc");
    r->msgs = num(o, "msgs_sent");
    r->mb = num(o, "mb_sent");
    return DT_OK;
}

dt_status dt_replay_open(const char *path, const char *config_line, dt_replay **out) {
    *out = NULL;
    dt_replay *rp = calloc(1, sizeof *rp);
    if (!rp) return dt_nomem("a replay");
    snprintf(rp->path, sizeof rp->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        free(rp);
        return dt_fail(DT_ERR_IO, "dtrain sim --replay %s: cannot read it", path);
    }
    json_t *ours = json_loads(config_line, 0, NULL);
    dt_status st = ours ? DT_OK : dt_fail(DT_ERR_STATE, "the configuration line is not JSON");
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, configs = 0;
    while (st == DT_OK && getline(&line, &cap, f) > 0) {
        lineno++;
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        const char *type = json_string_value(json_object_get(o, "type"));
        if (!type) {
            st = dt_fail(DT_ERR_FORMAT, "dtrain sim --replay %s:%d: not a line of a dtrain log (JSON with a \"type\")", path,
                         lineno);
        } else if (!strcmp(type, "config")) {
            /* a log holds one run (dtrain appends: a second configuration is a second run) */
            st = configs++ ? dt_fail(DT_ERR_ARG, "dtrain sim --replay %s:%d: a second run in the log; a replay takes a "
                                     "log of one run", path, lineno)
                           : check_config(rp, o, ours, lineno);
        } else if (!configs) {
            st = dt_fail(DT_ERR_ARG, "dtrain sim --replay %s:%d: a %s line before the run's configuration", path, lineno,
                         type);
        } else if (!strcmp(type, "eval") || !strcmp(type, "epoch")) {
            st = add_record(rp, o, !strcmp(type, "epoch"));
        } else if (!strcmp(type, "summary")) {
            rp->spread_before = num(o, "spread_before_avg");
            rp->spread_after = num(o, "spread_after_finish");
            rp->has_summary = 1;
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    json_decref(ours);
    if (st == DT_OK && !configs) st = dt_fail(DT_ERR_ARG, "dtrain sim --replay %s: no run in it (no configuration line)", path);
    if (st == DT_OK && !rp->has_summary)
        st = dt_fail(DT_ERR_ARG, "dtrain sim --replay %s: its run did not finish (no summary line)", path);
    if (st != DT_OK) {
        dt_replay_free(rp);
        return st;
    }
    *out = rp;
    return DT_OK;
}

/* The next evaluation of LOG, which must be of this kind at this point and follow the same
 * traffic. */
static dt_status next(dt_replay *rp, int epoch_line, long at, double msgs, double mb, const record **out) {
    const char *what = epoch_line ? "epoch" : "step";
    if (rp->next >= rp->n)
        return dt_fail(DT_ERR_ARG, "dtrain sim --replay %s: this run evaluates at %s %ld, after the last evaluation of "
                       "that run", rp->path, what, at);
    const record *r = &rp->r[rp->next++];
    if (r->epoch_line != epoch_line || r->at != at)
        return dt_fail(DT_ERR_ARG, "dtrain sim --replay %s: this run evaluates at %s %ld, that run at %s %ld", rp->path,
                       what, at, r->epoch_line ? "epoch" : "step", r->at);
    /* the log prints MB with 4 decimals */
    if (msgs != r->msgs || fabs(mb - r->mb) > 0.51e-4 + 1e-12 * mb)
        return dt_fail(DT_ERR_ARG, "dtrain sim --replay %s: by %s %ld this run sent %.0f messages, %.4f MB, that run "
                       "%.0f, %.4f MB: what this scheme sends depends on what it computes, which a replay does not",
                       rp->path, what, at, msgs, mb, r->msgs, r->mb);
    *out = r;
    return DT_OK;
}

/* An evaluation's figures, the record's: what every evaluation line has. */
static void take(const record *r, double *acc, double *loss, double val[2], double *spread) {
    *acc = r->test_acc;
    *loss = r->test_loss;
    val[0] = r->val_acc;
    val[1] = r->val_loss;
    if (isfinite(r->spread)) *spread = r->spread;
}

dt_status dt_replay_step(dt_replay *rp, long step, double msgs, double mb, double *acc, double *loss, double val[2],
                         double *spread) {
    const record *r = NULL;
    dt_status st = next(rp, 0, step, msgs, mb, &r);
    if (st == DT_OK) take(r, acc, loss, val, spread);
    return st;
}

dt_status dt_replay_epoch(dt_replay *rp, int epoch, double msgs, double mb, double *loss, double *train_acc,
                          double *acc, double *test_loss, double val[2], double *spread) {
    const record *r = NULL;
    dt_status st = next(rp, 1, epoch, msgs, mb, &r);
    if (st != DT_OK) return st;
    take(r, acc, test_loss, val, spread);
    *loss = r->loss;
    *train_acc = r->train_acc;
    return DT_OK;
}

void dt_replay_spreads(const dt_replay *rp, double *before, double *after) {
    if (isfinite(rp->spread_before)) *before = rp->spread_before;
    if (isfinite(rp->spread_after)) *after = rp->spread_after;
}

const char *dt_replay_path(const dt_replay *rp) { return rp->path; }

void dt_replay_free(dt_replay *rp) {
    if (!rp) return;
    free(rp->r);
    free(rp);
}
