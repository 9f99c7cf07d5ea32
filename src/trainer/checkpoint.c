/* Checkpoints: after every epoch each rank saves its model, momentum, progress, counters and
 * its scheme's own state (FILE.rankR with several ranks); --resume restores them, so a
 * resumed run repeats the uninterrupted one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "trainer/trainer.h"

void dt_trainer_rank_path(const dt_trainer *t, const char *base, char *out, size_t len) {
    if (t->comm.size > 1) snprintf(out, len, "%s.rank%d", base, t->comm.rank);
    else snprintf(out, len, "%s", base);
}

/* Which run wrote a checkpoint: resuming it under another scheme, codec or number of ranks
 * would mix state that does not belong together. */
static void run_signature(const dt_trainer *t, char out[64]) {
    memset(out, 0, 64);
    const char *c = t->cfg->algo.compress ? t->cfg->algo.compress : "none";
    snprintf(out, 64, "--algo %s --compress %s on %d ranks", t->strategy->scheme->name, c, t->comm.size);
}

dt_status dt_trainer_save_checkpoint(dt_trainer *t) {
    char path[1100], sig[64];
    dt_trainer_rank_path(t, t->cfg->checkpoint, path, sizeof path);
    run_signature(t, sig);
    dt_model *m = t->model;
    dt_record *mr = calloc((size_t)(dt_model_num_tensors(m) + dt_model_num_state_tensors(m)), sizeof *mr);
    if (!mr) return dt_fail(DT_ERR_NOMEM, "out of memory");
    const int nm = dt_model_records(m, mr);
    float progress[2] = {(float)(t->ctx.epoch + 1), (float)t->ctx.step};
    dt_records l = {0};
    dt_status st = DT_OK;
    for (int i = 0; i < nm && st == DT_OK; i++) st = dt_records_put(&l, &mr[i]);
    if (st == DT_OK && t->opt.buf) st = dt_records_add(&l, "optim:momentum", t->opt.buf, t->opt.n);
    if (st == DT_OK) st = dt_records_add(&l, "train:progress", progress, 2);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:run", sig, sizeof sig);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:counters", &t->comm.c, sizeof t->comm.c);
    if (st == DT_OK && t->strategy->ops->save_state) st = t->strategy->ops->save_state(t->strategy, &t->ctx, &l);
    if (st == DT_OK) st = dt_tfile_write(path, l.r, l.n);
    dt_records_free(&l);
    free(mr);
    return st;
}

dt_status dt_trainer_load_checkpoint(dt_trainer *t) {
    char *path = t->resume_path;
    dt_tfile *f = &t->resume_file;
    dt_trainer_rank_path(t, t->cfg->resume, path, sizeof t->resume_path);
    dt_status st = dt_tfile_read(path, f);
    if (st == DT_OK) st = dt_model_load_records(t->model, f, path);
    if (st != DT_OK) return st;
    const dt_record *prog = dt_tfile_find(f, "train:progress");
    const dt_record *mom = dt_tfile_find(f, "optim:momentum");
    const dt_record *run = dt_tfile_find(f, "train:run");
    char sig[64];
    run_signature(t, sig);
    if (!prog || prog->numel != 2)
        return dt_fail(DT_ERR_FORMAT, "%s: not a checkpoint (no train:progress; a weights file?)", path);
    if (run && (run->numel * sizeof(float) != sizeof sig || memcmp(run->data, sig, sizeof sig) != 0)) {
        char saved[64] = "";
        memcpy(saved, run->data, run->numel * sizeof(float) < sizeof saved ? run->numel * sizeof(float) : sizeof saved);
        saved[63] = 0;
        return dt_fail(DT_ERR_ARG, "--resume %s: saved by a run with %s, this run has %s", path, saved, sig);
    }
    if (t->opt.buf && (!mom || mom->numel != t->opt.n))
        return dt_fail(DT_ERR_FORMAT, "%s: has no momentum buffer for this model (saved with --momentum 0?)", path);
    /* numbers read from a file are checked before they are used (a NaN cast to int is
     * undefined), even under a valid checksum */
    const float epoch = prog->data[0], step = prog->data[1];
    if (!(epoch >= 1 && epoch <= 1e6f && epoch == floorf(epoch)) || !(step >= 0 && step <= 1e15f && step == floorf(step)))
        return dt_fail(DT_ERR_FORMAT, "%s: train:progress holds epoch %g and step %g, expected a whole epoch >= 1 and "
                       "step >= 0 (a corrupt or forged checkpoint)", path, (double)epoch, (double)step);
    t->start_epoch = (int)epoch;
    t->ctx.step = (long)step;
    if (t->opt.buf) { memcpy(t->opt.buf, mom->data, t->opt.n * sizeof(float)); t->opt.started = 1; }
    return DT_OK;
}

/* After the scheme started (its buffers exist, its set-up exchanges are done): the counters
 * and the scheme's own state, which overwrite what start set up. */
dt_status dt_trainer_load_run_state(dt_trainer *t) {
    const dt_tfile *f = &t->resume_file;
    if (dt_tfile_find(f, "train:counters")) {
        dt_status st = dt_tfile_take(f, t->resume_path, "train:counters", &t->comm.c, sizeof t->comm.c);
        if (st != DT_OK) return st;
    }
    const dt_strategy *s = t->strategy;
    return s->ops->load_state ? s->ops->load_state(t->strategy, &t->ctx, f, t->resume_path) : DT_OK;
}
