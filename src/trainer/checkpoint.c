/* Checkpoints: after every epoch each rank saves its model, optimiser state, progress, counters and
 * its scheme's own state (and, when a stop was asked within an epoch, where in it the run
 * stands: "train:position"); --resume restores them, so a resumed run repeats the
 * uninterrupted one. One process writes one file; several ranks write a set, committed by rank 0's
 * manifest once every part is durable (ckset.h), so all ranks always resume from one epoch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/paths.h"
#include "models/model.h"
#include "optim/optim.h"
#include "trainer/ckset.h"
#include "trainer/trainer.h"

/* Which run wrote a checkpoint: resuming it under another scheme, codec or number of ranks
 * would mix state that does not belong together. */
static void run_signature(const dt_trainer *t, char out[64]) {
    memset(out, 0, 64);
    const char *c = t->cfg->scheme.compress ? t->cfg->scheme.compress : "none";
    snprintf(out, 64, "--algo %s --compress %s on %d ranks", t->scheme->def->name, c, t->comm.size);
}

static dt_status signature_check(const dt_trainer *t, const char *path, const char *saved) {
    char sig[64];
    run_signature(t, sig);
    if (strcmp(saved, sig) != 0)
        return dt_fail(DT_ERR_ARG, "--resume %s: saved by a run with %s, this run has %s", path, saved, sig);
    return DT_OK;
}

/* What orders the examples within an epoch (record "train:data"): a set saved within an epoch
 * continues that epoch's order, made by the seed, the split, the batch and the examples the
 * ranks train on. Another --seed or --split there would train some examples twice and others
 * never, silently. */
typedef struct {
    uint64_t seed;
    int32_t batch, examples; /* per rank; after --train-limit and --val */
    char split[16];
} data_sig;

static void data_signature(const dt_trainer *t, data_sig *d) {
    memset(d, 0, sizeof *d);
    d->seed = t->cfg->seed;
    d->batch = t->cfg->batch;
    d->examples = t->train.n;
    snprintf(d->split, sizeof d->split, "%s", t->cfg->split ? t->cfg->split : "random");
}

/* Only within an epoch: from an epoch's end a run may go on with another seed or split. A
 * checkpoint of an earlier build has no such record: its position is checked as before. */
static dt_status data_check(const dt_trainer *t, const char *path, const dt_tfile *f) {
    if (!t->at.mid_epoch || !dt_tfile_find(f, "train:data")) return DT_OK;
    data_sig saved, mine;
    dt_status st = dt_tfile_take(f, path, "train:data", &saved, sizeof saved);
    if (st != DT_OK) return st;
    saved.split[sizeof saved.split - 1] = 0;
    data_signature(t, &mine);
    const char *why = "a run resumed within an epoch continues that epoch's order of examples: resume with the flags "
                      "that saved it";
    if (saved.seed != mine.seed)
        return dt_fail(DT_ERR_ARG, "--seed: %s was saved within epoch %d by a run with --seed %llu, this run has --seed %llu "
                       "(%s)", path, t->start_epoch + 1, (unsigned long long)saved.seed, (unsigned long long)mine.seed, why);
    if (strcmp(saved.split, mine.split) != 0)
        return dt_fail(DT_ERR_ARG, "--split: %s was saved within epoch %d by a run with --split %s, this run has --split %s "
                       "(%s)", path, t->start_epoch + 1, saved.split, mine.split, why);
    if (saved.batch != mine.batch)
        return dt_fail(DT_ERR_ARG, "--batch: %s was saved within epoch %d by a run with --batch %d, this run has --batch %d "
                       "(%s)", path, t->start_epoch + 1, (int)saved.batch, (int)mine.batch, why);
    if (saved.examples != mine.examples)
        return dt_fail(DT_ERR_ARG, "--train-limit, --val: %s was saved within epoch %d by a run training on %d examples, "
                       "this run trains on %d (%s)", path, t->start_epoch + 1, (int)saved.examples, (int)mine.examples, why);
    return DT_OK;
}

/* What is at path, in words, for the line that refuses to replace it; 1 when it is a
 * checkpoint (a set's manifest, or one process's file). full 0: from its first bytes only. */
static int describe(const char *path, int full, char *what, size_t len) {
    char head[sizeof DT_CKSET_MAGIC] = "";
    FILE *f;
    if (dt_open_regular(path, &f, NULL) != DT_OK) { snprintf(what, len, "a file dtrain cannot read"); return 0; }
    const size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    const int manifest = dt_ckset_is_manifest(head, got), tensors = got >= 8 && !memcmp(head, "DTRTNS01", 8);
    if (!manifest && !tensors) { snprintf(what, len, "a file dtrain did not write"); return 0; }
    snprintf(what, len, manifest ? "a checkpoint set" : "a checkpoint of one process");
    if (!full) return 1;
    char *text = NULL;
    size_t n = 0;
    dt_ckset set;
    dt_tfile tf = {0};
    int ours = 1;
    if (manifest && dt_ckset_slurp(path, &text, &n) == DT_OK && dt_ckset_parse(text, n, path, -1, &set) == DT_OK)
        snprintf(what, len, "a checkpoint set of %d ranks (after epoch %d)", set.ranks, set.epoch);
    else if (tensors && dt_tfile_read(path, &tf) == DT_OK) {
        const dt_record *prog = dt_tfile_find(&tf, "train:progress");
        ours = prog && prog->numel == 2;
        if (ours) snprintf(what, len, "a checkpoint of one process (after epoch %g)", (double)prog->data[0]);
        else snprintf(what, len, "a weights file");
    }
    free(text);
    dt_tfile_free(&tf);
    return ours;
}

dt_status dt_checkpoint_check_target(const dt_train_config *cfg) {
    const char *path = cfg->checkpoint;
    struct stat cs, rs;
    if (!path || stat(path, &cs) != 0) return DT_OK; /* nothing there yet */
    const int resumed = cfg->resume && stat(cfg->resume, &rs) == 0 && rs.st_dev == cs.st_dev && rs.st_ino == cs.st_ino;
    char what[128];
    /* the file this run resumes is read as its checkpoint before anything is written (its
     * run, model and data checked): here only what is no checkpoint at all */
    const int checkpoint = describe(path, !resumed, what, sizeof what);
    if (!checkpoint)
        return dt_fail(DT_ERR_ARG, "--checkpoint %s: exists and is not a checkpoint (%s): not replaced; give a path where "
                       "no file is", path, what);
    if (resumed) return DT_OK;
    if (cfg->resume)
        return dt_fail(DT_ERR_ARG, "--checkpoint %s: holds %s, and this run resumes another (--resume %s): its first save "
                       "would replace it; resume %s itself, or give another --checkpoint", path, what, cfg->resume, path);
    return dt_fail(DT_ERR_ARG, "--checkpoint %s: holds %s, which this run's first save would replace: resume it (--resume "
                   "%s, or --resume auto), or give another --checkpoint", path, what, path);
}

/* Collective (several ranks): every part is durable before rank 0's manifest names it, and a
 * rank's older parts go only once the new set is committed. A rank whose part failed returns
 * its error (the job stops); the others keep the previous set as it was. */
static dt_status commit_set(dt_trainer *t, dt_status st, int epoch, long mid, uint32_t crc) {
    const int rank = t->comm.rank, size = t->comm.size;
    uint32_t mine[2] = {st == DT_OK, crc}, *all = NULL;
    if (rank == 0) DT_TRY(dt_malloc(all, 2 * (size_t)size, "the ranks' checkpoint parts"));
    int err = MPI_Gather(mine, 2, MPI_UINT32_T, all, 2, MPI_UINT32_T, 0, t->comm.comm);
    if (err != MPI_SUCCESS) { free(all); return dt_mpi_check(err, "MPI_Gather (the checkpoint set's parts)"); }
    int committed = 0;
    if (rank == 0 && st == DT_OK) {
        int whole = 1;
        for (int r = 0; r < size; r++) {
            whole &= all[2 * r] == 1;
            all[r] = all[2 * r + 1]; /* the checksums, in rank order */
        }
        char sig[64];
        run_signature(t, sig);
        if (whole) st = dt_ckset_write(t->cfg->checkpoint, epoch, t->ctx.step, mid, sig, size, all);
        committed = whole && st == DT_OK;
    }
    free(all);
    err = MPI_Bcast(&committed, 1, MPI_INT, 0, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Bcast (the checkpoint set's commit)");
    if (committed) dt_ckset_remove_others(t->cfg->checkpoint, rank, epoch, mid);
    return st;
}

dt_status dt_trainer_save_checkpoint(dt_trainer *t, const dt_resume_point *at) {
    /* the epochs done; within an epoch, the set is named by its step too */
    const int epoch = at ? t->ctx.epoch : t->ctx.epoch + 1;
    const long mid = at ? t->ctx.step : -1;
    char path[1100], sig[64];
    if (t->comm.size > 1) dt_ckset_part_path(t->cfg->checkpoint, epoch, mid, t->comm.rank, path, sizeof path);
    else snprintf(path, sizeof path, "%s", t->cfg->checkpoint);
    run_signature(t, sig);
    dt_model *m = t->model;
    const size_t nrec = (size_t)(dt_model_num_tensors(m) + dt_model_num_state_tensors(m));
    dt_record *mr;
    DT_TRY(dt_calloc(mr, nrec, "the checkpoint's %zu records", nrec));
    const int nm = dt_model_records(m, mr);
    float progress[2] = {(float)epoch, (float)t->ctx.step};
    dt_records l = {0};
    dt_status st = DT_OK;
    uint32_t crc = 0;
    for (int i = 0; i < nm && st == DT_OK; i++) st = dt_records_put(&l, &mr[i]);
    dt_optim_head head;
    if (st == DT_OK) st = dt_optim_save(&t->opt, &head, &l);
    if (st == DT_OK) st = dt_records_add(&l, "train:progress", progress, 2);
    if (st == DT_OK && at) st = dt_records_add_raw(&l, "train:position", at, sizeof *at);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:run", sig, sizeof sig);
    if (st == DT_OK) st = dt_weights_meta_put(&l, t->cfg->model, t->cfg->data, t->scheme->def->name);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:counters", &t->comm.c, sizeof t->comm.c);
    data_sig data;
    data_signature(t, &data);
    if (st == DT_OK) st = dt_records_add_raw(&l, "train:data", &data, sizeof data);
    if (st == DT_OK && t->scheme->ops->save_state) {
        l.prefix = t->scheme->def->name; /* the scheme's records are "<scheme>:name" */
        st = t->scheme->ops->save_state(t->scheme, &t->ctx, &l);
        l.prefix = NULL;
    }
    if (st == DT_OK) st = dt_tfile_write_crc(path, l.r, l.n, &crc);
    dt_records_free(&l);
    free(mr);
    return t->comm.size > 1 ? commit_set(t, st, epoch, mid, crc) : st;
}

/* Collective (several ranks): rank 0 reads the manifest and every rank gets its text, so the
 * parts may sit on each rank's own disk. Every rank joins, whatever its own set-up said. */
static dt_status read_manifest(dt_trainer *t, dt_status st, dt_ckset *set) {
    const char *path = t->cfg->resume;
    char *text = NULL;
    size_t len = 0;
    long long n = -1; /* rank 0: the manifest's length, -1 when it could not be read */
    if (t->comm.rank == 0) {
        dt_status rs = dt_ckset_slurp(path, &text, &len);
        if (rs == DT_OK && !dt_ckset_is_manifest(text, len) && len >= 8 && !memcmp(text, "DTRTNS01", 8))
            rs = dt_fail(DT_ERR_ARG, "--resume %s: a checkpoint of one process, this run has %d ranks", path, t->comm.size);
        if (rs == DT_OK) n = (long long)len;
        else if (st == DT_OK) st = rs;
    }
    int err = MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, t->comm.comm);
    if (err != MPI_SUCCESS) { free(text); return dt_mpi_check(err, "MPI_Bcast (the checkpoint manifest)"); }
    if (n < 0) { free(text); return st != DT_OK ? st : dt_fail(DT_ERR_IO, "--resume %s: rank 0 could not read it", path); }
    if (t->comm.rank != 0 && !(text = malloc((size_t)n + 1))) st = dt_nomem("the checkpoint manifest (%lld bytes)", n);
    /* chunks under INT_MAX bytes; a rank that could not allocate still takes part */
    static char sink[1 << 16];
    for (long long off = 0; off < n && err == MPI_SUCCESS; off += 1 << 16) {
        const int cnt = (int)(n - off < (1 << 16) ? n - off : (1 << 16));
        err = MPI_Bcast(text ? text + off : sink, cnt, MPI_CHAR, 0, t->comm.comm);
    }
    if (err != MPI_SUCCESS) st = dt_mpi_check(err, "MPI_Bcast (the checkpoint manifest)");
    if (st == DT_OK) st = dt_ckset_parse(text, (size_t)n, path, t->comm.rank, set);
    free(text);
    return st;
}

/* One process: the file itself, unless it is a manifest (the checkpoint of several ranks). */
static dt_status single_file(dt_trainer *t, dt_ckset *set) {
    const char *path = t->cfg->resume;
    char head[sizeof DT_CKSET_MAGIC] = "";
    FILE *f;
    dt_status st = dt_open_regular(path, &f, NULL); /* a FIFO must not make us wait */
    if (st != DT_OK) return st;
    const size_t got = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    memset(set, 0, sizeof *set);
    snprintf(set->part, sizeof set->part, "%s", path);
    if (!dt_ckset_is_manifest(head, got)) return DT_OK;
    char *text;
    size_t len;
    dt_ckset whole;
    st = dt_ckset_slurp(path, &text, &len);
    if (st == DT_OK) st = dt_ckset_parse(text, len, path, -1, &whole);
    free(text);
    return st != DT_OK ? st : signature_check(t, path, whole.run);
}

/* A checkpoint of another model or dataset is refused by name, before its shapes would be
 * (checkpoints of older builds say neither: their shapes still are checked). */
static dt_status meta_check(const dt_trainer *t, const char *path, const dt_tfile *f) {
    dt_weights_meta w;
    dt_status st = dt_weights_meta_get(f, &w);
    if (st == DT_OK && w.data && strcmp(w.data, t->cfg->data) != 0)
        st = dt_fail(DT_ERR_ARG, "--resume %s: a checkpoint of a run on %s, this run trains on --data %s", path, w.data,
                     t->cfg->data);
    if (st == DT_OK && !dt_weights_meta_same_model(&w, t->cfg->model))
        st = dt_fail(DT_ERR_ARG, "--resume %s: a checkpoint of model %s, this run trains --model %s", path,
                     w.model ? w.model : "(unnamed)", t->cfg->model);
    dt_weights_meta_free(&w);
    return st;
}

/* A record every checkpoint dtrain writes holds: without it, a file forged or cut down. */
static dt_status missing(const char *path, const char *record, const char *what) {
    return dt_fail(DT_ERR_FORMAT, "%s: checkpoint has no record '%s' (%s; every checkpoint dtrain writes has it: a "
                   "forged or cut-down file)", path, record, what);
}

dt_status dt_trainer_read_part(dt_trainer *t, const dt_tfile *f, const char *path, const dt_ckset *set) {
    dt_status st = meta_check(t, path, f);
    if (st == DT_OK) st = dt_model_load_records(t->model, f, path);
    if (st != DT_OK) return st;
    const dt_record *prog = dt_tfile_find(f, "train:progress");
    const dt_record *run = dt_tfile_find(f, "train:run");
    if (!prog || prog->numel != 2)
        return dt_fail(DT_ERR_FORMAT, "%s: not a checkpoint (no train:progress; a weights file?)", path);
    if (!run) return missing(path, "train:run", "the --algo, --compress and ranks of the run that saved it");
    if (!dt_tfile_find(f, "train:counters")) return missing(path, "train:counters", "the messages and bytes counted so far");
    char saved[64] = "", counters[sizeof t->comm.c];
    memcpy(saved, run->data, run->numel * sizeof(float) < sizeof saved ? run->numel * sizeof(float) : sizeof saved);
    saved[63] = 0;
    if ((st = signature_check(t, path, saved)) != DT_OK) return st;
    /* its size now, before training; taken after the scheme's start (dt_trainer_load_run_state) */
    if ((st = dt_tfile_take(f, path, "train:counters", counters, sizeof counters)) != DT_OK) return st;
    if ((st = dt_optim_load(&t->opt, f, path)) != DT_OK) return st;
    /* numbers read from a file are checked before they are used (a NaN cast to int is
     * undefined), even under a valid checksum */
    const float epoch = prog->data[0], step = prog->data[1];
    /* a set saved within an epoch: where in it (an epoch's end: none) */
    memset(&t->at, 0, sizeof t->at);
    if (dt_tfile_find(f, "train:position") && (st = dt_tfile_take(f, path, "train:position", &t->at, sizeof t->at)) != DT_OK)
        return st;
    if (!(epoch >= (t->at.mid_epoch ? 0 : 1) && epoch <= 1e6f && epoch == floorf(epoch)) || !(step >= 0 && step <= 1e15f && step == floorf(step)))
        return dt_fail(DT_ERR_FORMAT, "%s: train:progress holds epoch %g and step %g, expected a whole epoch >= 1 (0 within the first) and "
                       "step >= 0 (a corrupt or forged checkpoint)", path, (double)epoch, (double)step);
    t->start_epoch = (int)epoch;
    /* another --seed, --split, --batch: said as such, before the position they make wrong */
    if ((st = data_check(t, path, f)) != DT_OK) return st;
    if (t->at.mid_epoch && !(t->at.epoch_step >= 1 && t->at.epoch_step < t->ctx.run.steps_per_epoch && t->at.seen >= 0 &&
                             t->at.correct >= 0 && t->at.correct <= t->at.seen && isfinite(t->at.loss_sum)))
        return dt_fail(DT_ERR_FORMAT, "%s: train:position holds step %d of an epoch of %d steps (%lld examples seen): "
                       "not this run's (another --batch or --split?) or a corrupt checkpoint", path, (int)t->at.epoch_step,
                       t->ctx.run.steps_per_epoch, (long long)t->at.seen);
    if (set && ((int)epoch != set->epoch || (long)step != set->step))
        return dt_fail(DT_ERR_FORMAT, "--resume %s: part %s is from epoch %d (step %ld), the set from epoch %d (step %ld): "
                       "a set mixed from two epochs", t->cfg->resume, path, (int)epoch, (long)step, set->epoch, set->step);
    t->ctx.step = (long)step;
    return DT_OK;
}

dt_status dt_trainer_load_checkpoint(dt_trainer *t, dt_status st) {
    dt_ckset set;
    const int several = t->comm.size > 1;
    st = several ? read_manifest(t, st, &set) : st != DT_OK ? st : single_file(t, &set);
    if (st != DT_OK) return st;
    if (several && (st = signature_check(t, t->cfg->resume, set.run)) != DT_OK) return st;
    char *path = t->resume_path;
    dt_tfile *f = &t->resume_file;
    snprintf(path, sizeof t->resume_path, "%s", set.part);
    st = dt_tfile_read(path, f);
    if (st != DT_OK && several) {
        /* a part's own message names the part: say which flag and manifest named it */
        char why[900];
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_fail(st, "--resume %s: part %s", t->cfg->resume, why);
    }
    if (st == DT_OK && several && f->crc != set.crc)
        st = dt_fail(DT_ERR_FORMAT, "--resume %s: part %s has checksum %08x, the manifest names %08x: it was replaced "
                     "after the set of epoch %d was committed (a set mixed from two epochs or runs)",
                     t->cfg->resume, path, (unsigned)f->crc, (unsigned)set.crc, set.epoch);
    return st != DT_OK ? st : dt_trainer_read_part(t, f, path, several ? &set : NULL);
}

/* After the scheme started (its buffers exist, its set-up exchanges are done): the counters
 * and the scheme's own state, which overwrite what start set up. */
dt_status dt_trainer_load_run_state(dt_trainer *t) {
    dt_tfile *f = &t->resume_file;
    dt_status st = dt_tfile_take(f, t->resume_path, "train:counters", &t->comm.c, sizeof t->comm.c);
    if (st != DT_OK) return st;
    const dt_scheme *s = t->scheme;
    if (!s->ops->load_state) return DT_OK;
    f->prefix = s->def->name; /* as saved: "<scheme>:name" */
    st = s->ops->load_state(t->scheme, &t->ctx, f, t->resume_path);
    f->prefix = NULL;
    return st;
}
