/* libFuzzer target: what --resume does with a checkpoint part once read (dt_trainer_read_part,
 * src/trainer/checkpoint.c): every record checked before it is used (the model's tensors, the
 * momentum, train:progress, train:position, train:run, train:counters, train:data), then where
 * the run stands taken; as one process's file and as a part its manifest names (epoch 1, step
 * 10). And what --checkpoint finds at its path (dt_checkpoint_check_target): a file there is
 * refused unless it is the checkpoint the run resumes. Each input is read with its correct
 * CRC-32 appended, so fuzzed record lists reach the checks (fuzz_tfile fuzzes the reader).
 * What it accepts must hold together: a whole epoch, a step, a position inside the epoch.
 *
 * The run it resumes into is one process of --algo local on a model of three small layers,
 * with momentum; its seeds are checkpoints the trainer's own writer made of that run (an
 * epoch's end, and within an epoch): DTRAIN_FUZZ_SEEDS=DIR fuzz_resume writes them into DIR. */
#include <sys/stat.h>
#include <zlib.h>

#include "dtrain.h"
#include "fuzz_util.h"
#include "models/model.h"
#include "trainer/trainer.h"

static const char SPEC[] = "input c=1 h=4 w=4\nconv out=2 k=3 pad=1\nbatchnorm\nrelu\nflatten\nlinear out=3\n";
enum { STEPS = 10 }; /* per epoch */

static dt_train_config cfg;
static dt_trainer t;

static void make_run(void) {
    dt_train_config_defaults(&cfg);
    cfg.model = "cnn1"; /* the name the files give (meta:model); the tensors are SPEC's */
    cfg.data = "mnist";
    cfg.scheme.name = "local";
    cfg.momentum = 0.9f;
    cfg.resume = "ck";
    t.own = cfg;
    t.cfg = &t.own;
    t.comm.size = 1;
    t.ctx.run.steps_per_epoch = STEPS;
    t.train.n = 100;
    dt_optim_config oc;
    dt_train_optim_config(&t.own, &oc);
    if (dt_model_from_spec(SPEC, "fuzz", &t.model) != DT_OK || dt_scheme_make(&t.own.scheme, &t.scheme) != DT_OK ||
        dt_optim_init(&t.opt, &oc, t.model) != DT_OK)
        abort();
    dt_model_init(t.model, 1);
}

/* A seed: the checkpoint the trainer writes, less its checksum (each input gets its own). */
static void write_seed(const char *dir, const char *name, const dt_resume_point *at) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    t.own.checkpoint = path;
    struct stat sb;
    if (dt_trainer_save_checkpoint(&t, at) != DT_OK || stat(path, &sb) != 0 || truncate(path, sb.st_size - 4) != 0) {
        fprintf(stderr, "%s: %s\n", path, dt_last_error());
        exit(1);
    }
}

/* the seeds: this run's checkpoint at the end of epoch 2 (step 20), and within epoch 3 */
static void write_seeds(const char *dir) {
    t.ctx.epoch = 1;
    t.ctx.step = 2 * STEPS;
    write_seed(dir, "epoch-end", NULL);
    t.ctx.epoch = 2;
    t.ctx.step = 2 * STEPS + 4;
    const dt_resume_point at = {.mid_epoch = 1, .epoch_step = 4, .loss_sum = 3.5, .seen = 16, .correct = 9, .bad_step = -1};
    write_seed(dir, "mid-epoch", &at);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    make_run();
    const char *seeds = getenv("DTRAIN_FUZZ_SEEDS");
    if (seeds) write_seeds(seeds);
    return 0;
}

/* what an accepted part leaves: a whole epoch and step, a position inside its epoch */
static void accepted(void) {
    if (t.start_epoch < 0 || t.start_epoch > 1000000 || t.ctx.step < 0) abort();
    if (t.at.mid_epoch && (t.at.epoch_step < 1 || t.at.epoch_step >= STEPS || t.at.seen < 0 || t.at.correct > t.at.seen))
        abort();
    if (!t.at.mid_epoch && t.start_epoch < 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size + 4);
    if (!buf) abort();
    memcpy(buf, data, size);
    const uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)size);
    memcpy(buf + size, &crc, 4); /* little-endian host, as the writer */
    const char *path = dt_fuzz_write("part", buf, size + 4);
    free(buf);
    dt_tfile f;
    if (dt_tfile_read(path, &f) == DT_OK) {
        if (dt_trainer_read_part(&t, &f, path, NULL) == DT_OK) accepted();
        const dt_ckset set = {.epoch = 1, .step = STEPS, .ranks = 2};
        if (dt_trainer_read_part(&t, &f, path, &set) == DT_OK) {
            accepted();
            if (t.start_epoch != 1 || t.ctx.step != STEPS) abort(); /* only the set's own epoch and step */
        }
        dt_tfile_free(&f);
    }
    /* found at --checkpoint's path: refused unless resumed; resumed, refused unless it looks
     * like a checkpoint (its records are --resume's to check) */
    t.own.checkpoint = path;
    t.own.resume = NULL;
    if (dt_checkpoint_check_target(&t.own) == DT_OK) abort();
    t.own.resume = path;
    (void)dt_checkpoint_check_target(&t.own);
    path = dt_fuzz_write("raw", data, size);
    t.own.checkpoint = path;
    (void)dt_checkpoint_check_target(&t.own);
    t.own.resume = "ck";
    return 0;
}
