/* The optimiser's records in a checkpoint: sgd's momentum buffer ("optim:momentum", as before),
 * AdamW's moments ("optim:exp_avg", "optim:exp_avg_sq", PyTorch's names) and "train:optim": which
 * optimiser saved them, its betas and its step count (AdamW's bias correction goes on from it).
 * The moments are floats that dtrain diff compares; the head is raw ("train:", which it skips). */
#include <string.h>

#include "optim/optim.h"

dt_status dt_optim_save(const dt_optim *o, dt_optim_head *head, dt_records *l) {
    const int adamw = o->cfg.kind == DT_OPTIM_ADAMW;
    *head = (dt_optim_head){.kind = (int32_t)o->cfg.kind, .beta1 = adamw ? o->cfg.beta1 : 0,
                            .beta2 = adamw ? o->cfg.beta2 : 0, .steps = o->steps};
    dt_status st = dt_records_add_raw(l, "train:optim", head, sizeof *head);
    if (st == DT_OK && !adamw && o->m) st = dt_records_add(l, "optim:momentum", o->m, o->n);
    if (st == DT_OK && adamw) st = dt_records_add(l, "optim:exp_avg", o->m, o->n);
    if (st == DT_OK && adamw) st = dt_records_add(l, "optim:exp_avg_sq", o->v, o->n);
    return st;
}

/* The state means something only to the optimiser that made it: AdamW's second moment is an
 * average under beta2, its bias correction assumes it; sgd's momentum is not AdamW's first moment. */
static dt_status same_optimiser(const dt_optim *o, const dt_optim_head *h, const char *path) {
    const char *saved = h->kind == DT_OPTIM_SGD ? "sgd" : h->kind == DT_OPTIM_ADAMW ? "adamw" : NULL;
    if (!saved)
        return dt_fail(DT_ERR_FORMAT, "%s: train:optim names optimiser %d (a corrupt or forged checkpoint)", path,
                       (int)h->kind);
    if (h->kind != (int32_t)o->cfg.kind)
        return dt_fail(DT_ERR_ARG, "--optim %s: --resume %s was saved by a run with --optim %s (its optimiser state is "
                       "another optimiser's)", dt_optim_names[o->cfg.kind], path, saved);
    if (o->cfg.kind != DT_OPTIM_ADAMW) return DT_OK;
    if (h->beta1 != o->cfg.beta1)
        return dt_fail(DT_ERR_ARG, "--beta1 %g: --resume %s was saved with --beta1 %g (its first moments average under it)",
                       o->cfg.beta1, path, h->beta1);
    if (h->beta2 != o->cfg.beta2)
        return dt_fail(DT_ERR_ARG, "--beta2 %g: --resume %s was saved with --beta2 %g (its second moments average under it)",
                       o->cfg.beta2, path, h->beta2);
    return DT_OK;
}

dt_status dt_optim_load(dt_optim *o, const dt_tfile *f, const char *path) {
    dt_optim_head h = {.kind = DT_OPTIM_SGD}; /* a checkpoint of an older build: sgd's */
    const int has_head = dt_tfile_find(f, "train:optim") != NULL;
    dt_status st = has_head ? dt_tfile_take(f, path, "train:optim", &h, sizeof h) : DT_OK;
    if (st == DT_OK) st = same_optimiser(o, &h, path);
    if (st != DT_OK) return st;
    /* a number read from a file is checked before it is used, even under a valid checksum */
    if (!(h.steps >= 0 && h.steps <= (int64_t)1e15))
        return dt_fail(DT_ERR_FORMAT, "%s: train:optim holds %lld steps (a corrupt or forged checkpoint)", path,
                       (long long)h.steps);
    if (o->cfg.kind == DT_OPTIM_ADAMW) {
        st = dt_tfile_take(f, path, "optim:exp_avg", o->m, o->n * sizeof(float));
        if (st == DT_OK) st = dt_tfile_take(f, path, "optim:exp_avg_sq", o->v, o->n * sizeof(float));
        if (st == DT_OK) o->steps = h.steps;
        return st;
    }
    if (!o->m) return DT_OK;
    const dt_record *mom = dt_tfile_find(f, "optim:momentum");
    if (!mom || mom->numel != o->n)
        return dt_fail(DT_ERR_FORMAT, "%s: has no momentum buffer for this model (saved with --momentum 0?)", path);
    memcpy(o->m, mom->data, o->n * sizeof(float));
    /* an older build's checkpoint had a started buffer: its next step is not the first */
    o->steps = has_head ? h.steps : 1;
    return DT_OK;
}
