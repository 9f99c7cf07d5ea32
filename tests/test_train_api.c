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
#include "comm/comm.h"
#include "core/tensorfile.h"
#include "dtrain.h"

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
          c.lr == 0.05f && c.seed == 1 && c.eval_every == 1 && c.algo.algo == NULL && c.algo.nset == 0 &&
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
    CHECK(dt_algo_config_set(&c.algo, "no-such-flag", "1") == DT_ERR_ARG && strstr(dt_last_error(), "--no-such-flag"));
    c.algo.algo = "nosuch";
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--algo nosuch: unknown algorithm"));
    small(&c);
    c.algo.algo = "allreduce"; /* another scheme's flag: refused, not ignored */
    CHECK(dt_algo_config_set(&c.algo, "local-steps", "5") == DT_OK);
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--local-steps: a flag of fedavg, not of --algo allreduce"));
    CHECK(dt_version()[0] >= '0' && dt_version()[0] <= '9' && strstr(dt_version(), " (commit ")); /* "0.9.0 (commit X)" */
    small(&c);
    c.algo.algo = "eventgrad";
    CHECK(dt_algo_config_set(&c.algo, "history", "0") == DT_OK);
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--history 0: expected an integer >= 1"));
    small(&c);
    c.algo.algo = "allreduce";
    c.algo.compress = "zip";
    CHECK(dt_train(&c, &r) == DT_ERR_ARG && strstr(dt_last_error(), "--compress zip"));
    small(&c);
    c.algo.algo = "allreduce"; /* a distributed scheme on one process trains like local */
    CHECK_MSG(dt_train(&c, &again) == DT_OK, "%s", dt_last_error());
    small(&c);
    c.data_dir = "/nonexistent";
    CHECK(dt_train(&c, &r) != DT_OK && strstr(dt_last_error(), "/nonexistent"));

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
