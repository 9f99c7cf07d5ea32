/* The public entry point for distributed training (dtrain.h: dt_train), used as a C program
 * would use it, without the command line: on one process (an MPI singleton) with the local
 * scheme, and the errors a program can meet. The distributed schemes run through the same
 * call under mpiexec; tests/cli_*.sh run them through the command. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "comm/world.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "dtrain/scheme.h"

/* ------------------------------------------------------------------ callbacks */

typedef struct {
    int epochs, evals, between;
    int epoch_seen[8];
    long epoch_step[8];
    dt_epoch_info last_epoch, last_eval;
    int bad_user;
} heard;

static const char tag[] = "mine";

static void on_epoch(const dt_epoch_info *i, void *user) {
    heard *h = *(heard **)user;
    h->bad_user |= ((const char *)((void **)user)[1]) != tag;
    if (h->epochs < 8) { h->epoch_seen[h->epochs] = i->epoch; h->epoch_step[h->epochs] = i->step; }
    h->epochs++;
    h->last_epoch = *i;
}

static void on_eval(const dt_epoch_info *i, void *user) {
    heard *h = *(heard **)user;
    h->evals++;
    h->between += i->between_steps;
    h->last_eval = *i;
}

/* ------------------------------------------------------------------ a scheme registered here */

static int halved_calls;

typedef struct {
    float by;
    int other;            /* for the clash below */
} halve_opts;

static const dt_flag halve_flags[] = {
    {"halve-by", DT_AT_FLOAT(halve_opts, by), .def = "0.5", .min = 0, .max = 1, .min_open = 1,
     .help = "scale the gradient by this"},
};

/* every step: the gradient scaled (one process: nothing to send) */
static dt_status halve_after_backward(dt_scheme *s, dt_step_ctx *c) {
    const float k = ((const halve_opts *)s->opts)->by;
    float *g = dt_model_grads(c->model);
    for (size_t i = 0; i < dt_model_num_params(c->model); i++) g[i] *= k;
    halved_calls++;
    return DT_OK;
}

static const dt_scheme_ops halve_ops = {.after_backward = halve_after_backward};

static dt_status halve_create(dt_scheme *s) {
    s->ops = &halve_ops;
    return DT_OK;
}

static const dt_scheme_def halve = {
    .name = "halve", .summary = "steps along half the gradient (a test's)", DT_SCHEME_FLAGS(halve_flags, halve_opts),
    .create = halve_create,
};

static void small(dt_train_config *c) {
    dt_train_config_defaults(c);
    c->model = "mlp";
    c->epochs = 1;
    c->batch = 32;
    c->train_limit = 3000;
    c->test_limit = 1000;
    c->quiet = 1;
}

int main(void) {
    dt_runtime_init();
    dt_train_config c;
    dt_train_result r;

    /* the defaults are the command's: a zero-initialised flag set means the declared defaults */
    dt_train_config_defaults(&c);
    CHECK(!strcmp(c.model, "cnn1") && !strcmp(c.data, "mnist") && c.epochs == 10 && c.batch == 64 &&
          c.lr == 0.05f && c.seed == 1 && c.eval_every == 1 && c.scheme.name == NULL && c.scheme.nset == 0 &&
          c.val == 0 && c.images == 0 && c.progress == 0);

    small(&c);
    dt_status st = dt_train(&c, &r);
    CHECK_MSG(st == DT_OK, "dt_train: %s", dt_last_error());
    CHECK_MSG(r.test_acc > 0.80 && r.test_acc <= 1.0, "mlp on 3000 MNIST images, 1 epoch: test accuracy %.4f", r.test_acc);
    CHECK_MSG(r.steps == (3000 + 31) / 32, "steps %ld, expected %d", r.steps, (3000 + 31) / 32);
    CHECK(r.msgs_sent == 0);
    CHECK_MSG(r.val_acc == -1 && r.val_loss == -1, "no validation set: val_acc %g", r.val_acc);

    /* the same configuration gives the same run */
    dt_train_result again;
    CHECK(dt_train(&c, &again) == DT_OK && again.test_acc == r.test_acc && again.test_loss == r.test_loss);
    /* ... and another seed another one (the comparison can fail) */
    c.seed = 2;
    CHECK(dt_train(&c, &again) == DT_OK && again.test_loss != r.test_loss);

    /* val: the last 1000 of the 3000 held out: 2000 left to train on, evaluated apart */
    small(&c);
    c.val = 1000;
    CHECK_MSG(dt_train(&c, &again) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(again.steps == (2000 + 31) / 32, "--val 1000: steps %ld, expected %d", again.steps, (2000 + 31) / 32);
    CHECK_MSG(again.val_acc > 0.5 && again.val_acc <= 1 && again.val_acc != again.test_acc && again.val_loss > 0,
              "val_acc %g, test_acc %g", again.val_acc, again.test_acc);
    c.val = 3000;
    CHECK(dt_train(&c, &again) == DT_ERR_ARG && strstr(dt_last_error(), "--val 3000: must be smaller"));
    /* images: ceil(5000 / 32) = 157 steps, 94 of them in a first epoch (3000 / 32 rounded up), the
     * epochs given are not used */
    small(&c);
    c.images = 5000;
    c.epochs = 7;
    CHECK_MSG(dt_train(&c, &again) == DT_OK && again.steps == 157, "--images 5000: steps %ld: %s", again.steps,
              dt_last_error());
    c.max_steps = 10;
    CHECK(dt_train(&c, &again) == DT_ERR_ARG && strstr(dt_last_error(), "not with --max-steps"));

    /* errors a program meets: one message each, naming what is wrong */
    small(&c);
    CHECK(dt_scheme_config_set(&c.scheme, "no-such-flag", "1") == DT_ERR_ARG && strstr(dt_last_error(), "--no-such-flag"));
    c.scheme.name = "nosuch";
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--algo nosuch: unknown scheme"));
    small(&c);
    c.scheme.name = "allreduce"; /* another scheme's flag: refused, not ignored */
    CHECK(dt_scheme_config_set(&c.scheme, "local-steps", "5") == DT_OK);
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--local-steps: a flag of fedavg, not of --algo allreduce"));
    CHECK(dt_version()[0] >= '0' && dt_version()[0] <= '9' && strstr(dt_version(), " (commit ")); /* "0.9.0 (commit X)" */
    small(&c);
    c.scheme.name = "eventgrad";
    CHECK(dt_scheme_config_set(&c.scheme, "history", "0") == DT_OK);
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--history 0: expected an integer >= 1"));
    small(&c);
    c.scheme.name = "allreduce";
    c.scheme.compress = "zip";
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--compress zip"));
    small(&c);
    c.scheme.name = "allreduce"; /* a distributed scheme on one process trains like local */
    CHECK_MSG(dt_train(&c, &again) == DT_OK, "%s", dt_last_error());
    small(&c);
    c.data_dir = "/nonexistent";
    CHECK(dt_train(&c, &r) != DT_OK && strstr(dt_last_error(), "/nonexistent"));

    /* callbacks: on_epoch after each epoch's evaluation, on_eval after every evaluation (an
     * epoch's, and those between steps: 94 steps an epoch, every 20 steps: 20, 40, ..., 180) */
    heard h = {0};
    void *user[2] = {&h, (void *)tag};
    small(&c);
    c.epochs = 2;
    c.eval_every_steps = 20;
    c.on_epoch = on_epoch;
    c.on_eval = on_eval;
    c.user = user;
    CHECK_MSG(dt_train(&c, &r) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(h.epochs == 2 && h.epoch_seen[0] == 1 && h.epoch_seen[1] == 2 && h.epoch_step[0] == 94 &&
              h.epoch_step[1] == 188, "on_epoch: %d calls, epochs %d %d, steps %ld %ld", h.epochs, h.epoch_seen[0],
              h.epoch_seen[1], h.epoch_step[0], h.epoch_step[1]);
    CHECK_MSG(h.evals == 11 && h.between == 9, "on_eval: %d calls, %d between steps (expected 11, 9)", h.evals, h.between);
    CHECK(!h.bad_user);
    CHECK_MSG(h.last_epoch.test_acc == r.test_acc && h.last_epoch.test_loss == r.test_loss && h.last_epoch.train_acc > 0.5 &&
              h.last_epoch.train_loss > 0 && h.last_epoch.val_acc == -1 && h.last_epoch.lr == c.lr &&
              h.last_epoch.train_s > 0 && !h.last_epoch.between_steps,
              "the last epoch's figures: test %g (run %g), train %g, val %g", h.last_epoch.test_acc, r.test_acc,
              h.last_epoch.train_acc, h.last_epoch.val_acc);
    CHECK(h.last_eval.test_acc == r.test_acc && h.last_eval.epoch == 2); /* the last evaluation is the last epoch's */
    /* without callbacks the run is the same, bit for bit (they only listen) */
    c.on_epoch = c.on_eval = NULL;
    CHECK(dt_train(&c, &again) == DT_OK && again.test_loss == r.test_loss);

    /* a scheme registered at run time trains through dt_train, its flag read and checked */
    CHECK_MSG(dt_scheme_register(&halve) == DT_OK, "%s", dt_last_error());
    CHECK(dt_scheme_register(&halve) == DT_OK); /* the same def again: once */
    CHECK(strstr(dt_scheme_names(), "halve") != NULL);
    small(&c);
    c.scheme.name = "halve";
    CHECK(dt_scheme_config_set(&c.scheme, "halve-by", "0.25") == DT_OK);
    CHECK_MSG(dt_train(&c, &r) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(halved_calls == 94 && r.test_acc > 0.5, "halve: %d calls, test accuracy %g", halved_calls, r.test_acc);
    CHECK(dt_scheme_config_set(&c.scheme, "halve-by", "2") == DT_OK);
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--halve-by 2: expected a number > 0 and <= 1"));
    /* what dt_scheme_register refuses, in one line each */
    dt_scheme_def bad = halve;
    bad.name = "Halve 2";
    CHECK(dt_scheme_register(&bad) == DT_ERR_ARG && strstr(dt_last_error(), "'Halve 2' is not a scheme name"));
    bad.name = "allreduce";
    CHECK(dt_scheme_register(&bad) == DT_ERR_ARG && strstr(dt_last_error(), "allreduce: a scheme of that name exists"));
    bad.name = "halve2";
    bad.create = NULL;
    CHECK(dt_scheme_register(&bad) == DT_ERR_ARG && strstr(dt_last_error(), "no create function"));
    static const dt_flag clash[] = {{"topology", DT_AT_INT(halve_opts, other), .def = "1", .help = "not dpsgd's"}};
    bad = halve;
    bad.name = "halve2";
    bad.flags = clash;
    CHECK(dt_scheme_register(&bad) == DT_ERR_ARG && strstr(dt_last_error(), "--topology is a flag of dpsgd with another kind"));
    static const dt_flag outside[] = {{"halve-more", DT_AT_FLOAT(halve_opts, by), .def = "0.5", .help = "x"}};
    bad.flags = outside;
    bad.opts_size = 0; /* a table without its struct */
    CHECK(dt_scheme_register(&bad) == DT_ERR_ARG && strstr(dt_last_error(), "lies outside the options struct"));
    static const dt_flag bad_default[] = {{"halve-more", DT_AT_FLOAT(halve_opts, by), .def = "half", .help = "x"}};
    bad.flags = bad_default;
    bad.opts_size = sizeof(halve_opts);
    CHECK_MSG(dt_scheme_register(&bad) == DT_ERR_ARG &&
              strstr(dt_last_error(), "dt_scheme_register halve2: --halve-more: its declared default 'half'"), "%s",
              dt_last_error());
    CHECK(!strstr(dt_scheme_names(), "halve2"));

    /* a checkpoint whose numbers are forged under a valid checksum is refused, not cast */
    char dir[] = "/tmp/dtrain-api-XXXXXX", ck[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(ck, sizeof ck, "%s/ck", dir);
    small(&c);
    c.checkpoint = ck;
    CHECK_MSG(dt_train(&c, &r) == DT_OK, "%s", dt_last_error());
    const float forged[] = {NAN, 1e10f, -5.0f, 1.5f};
    for (int i = 0; i < 4; i++) {
        dt_tfile f;
        CHECK(dt_tfile_read(ck, &f) == DT_OK);
        dt_record *p = (dt_record *)dt_tfile_find(&f, "train:progress");
        CHECK(p && p->numel == 2);
        if (p) p->data[0] = forged[i];
        CHECK(dt_tfile_write(ck, f.recs, f.n) == DT_OK);
        dt_tfile_free(&f);
        small(&c);
        c.epochs = 2;
        c.resume = ck;
        CHECK_MSG(dt_train(&c, &r) == DT_ERR_FORMAT && strstr(dt_last_error(), "train:progress holds epoch"),
                  "epoch %g: %s", (double)forged[i], dt_last_error());
    }
    unlink(ck);
    rmdir(dir);

    dt_comm_finalize();
    return test_summary("test_train_api");
}
