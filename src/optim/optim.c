/* The run's optimiser (dtrain.h: dt_optim): SGD or AdamW over a model's parameters in their
 * order, whole or a slice at a time, with weight decay on the tensors --decay-on names, and
 * global-norm gradient clipping. The arithmetic is in sgd.c and adamw.c; this file keeps the
 * state and walks a slice through the runs of parameters that decay and that do not. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "optim/optim.h"

const char *const dt_optim_names[] = {"sgd", "adamw", NULL};
const char *const dt_decay_on_names[] = {"auto", "weights", "matrices", "all", NULL};

void dt_optim_config_defaults(dt_optim_config *c) {
    *c = (dt_optim_config){.kind = DT_OPTIM_SGD, .decay_on = DT_DECAY_AUTO, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

/* Values are checked here too, not only by the command's flags: dt_train takes them from C. */
dt_status dt_optim_config_check(const dt_optim_config *c) {
    if (c->kind != DT_OPTIM_SGD && c->kind != DT_OPTIM_ADAMW)
        return dt_fail(DT_ERR_ARG, "--optim: expected sgd or adamw (dt_optim_kind %d)", (int)c->kind);
    if ((int)c->decay_on < DT_DECAY_AUTO || c->decay_on > DT_DECAY_ALL)
        return dt_fail(DT_ERR_ARG, "--decay-on: expected auto, weights, matrices or all (dt_decay_on %d)", (int)c->decay_on);
    if (!(c->weight_decay >= 0)) return dt_fail(DT_ERR_ARG, "--weight-decay %g: must be >= 0", (double)c->weight_decay);
    if (!(c->clip >= 0)) return dt_fail(DT_ERR_ARG, "--clip %g: must be >= 0 (0: no clipping)", (double)c->clip);
    if (c->kind == DT_OPTIM_SGD) {
        if (!(c->momentum >= 0 && c->momentum < 1))
            return dt_fail(DT_ERR_ARG, "--momentum %g: must be in [0, 1)", (double)c->momentum);
        if (c->nesterov && c->momentum == 0) return dt_fail(DT_ERR_ARG, "--nesterov: needs --momentum > 0");
        return DT_OK;
    }
    /* AdamW's momentum is its first moment: an sgd flag given with it would be ignored */
    if (c->momentum != 0)
        return dt_fail(DT_ERR_ARG, "--momentum %g: an sgd flag; --optim adamw's first moment decays by --beta1",
                       (double)c->momentum);
    if (c->nesterov) return dt_fail(DT_ERR_ARG, "--nesterov: an sgd flag, not with --optim adamw");
    if (!(c->beta1 >= 0 && c->beta1 < 1)) return dt_fail(DT_ERR_ARG, "--beta1 %g: must be in [0, 1)", c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1)) return dt_fail(DT_ERR_ARG, "--beta2 %g: must be in [0, 1)", c->beta2);
    if (!(c->eps >= 0 && isfinite(c->eps))) return dt_fail(DT_ERR_ARG, "--eps %g: must be >= 0", c->eps);
    return DT_OK;
}

static int tensor_decays(const dt_model *m, int i, dt_decay_on on) {
    switch (on) {
    case DT_DECAY_WEIGHTS: return dt_model_tensor_decays(m, i);
    case DT_DECAY_MATRICES: return dt_model_tensor(m, i)->ndim >= 2;
    default: return 1;
    }
}

/* The parameters that decay as ranges [lo, hi) in order, neighbours merged: sgd's default (all)
 * is one range, so its step is one loop over the buffer, as dt_sgd's. */
static dt_status decay_ranges(dt_optim *o, const dt_model *m) {
    const int T = dt_model_num_tensors(m);
    DT_TRY(dt_malloc(o->decay, 2 * (size_t)T, "the weight decay's %d ranges", T));
    for (int i = 0; i < T; i++) {
        if (!tensor_decays(m, i, o->cfg.decay_on)) continue;
        const dt_tensor_view *v = dt_model_tensor(m, i);
        if (o->ndecay > 0 && o->decay[2 * o->ndecay - 1] == v->offset) o->decay[2 * o->ndecay - 1] += v->numel;
        else {
            o->decay[2 * o->ndecay] = v->offset;
            o->decay[2 * o->ndecay + 1] = v->offset + v->numel;
            o->ndecay++;
        }
    }
    return DT_OK;
}

dt_status dt_optim_init(dt_optim *o, const dt_optim_config *c, const dt_model *m) {
    memset(o, 0, sizeof *o);
    dt_status st = dt_optim_config_check(c);
    if (st != DT_OK) return st;
    o->cfg = *c;
    if (o->cfg.decay_on == DT_DECAY_AUTO) o->cfg.decay_on = c->kind == DT_OPTIM_ADAMW ? DT_DECAY_WEIGHTS : DT_DECAY_ALL;
    const size_t n = o->n = dt_model_num_params(m);
    if ((st = decay_ranges(o, m)) != DT_OK) return st;
    if (c->kind == DT_OPTIM_ADAMW) {
        if ((st = dt_calloc(o->m, n, "AdamW's first moments of %zu parameters", n)) == DT_OK)
            st = dt_calloc(o->v, n, "AdamW's second moments of %zu parameters", n);
    } else if (c->momentum > 0) {
        st = dt_calloc(o->m, n, "the momentum buffer of %zu parameters", n);
    }
    if (st != DT_OK) dt_optim_free(o);
    return st;
}

void dt_optim_free(dt_optim *o) {
    dt_free_all(o->m, o->v, o->decay);
    memset(o, 0, sizeof *o);
}

void dt_optim_begin(dt_optim *o) { o->steps++; }

/* One run of parameters [at, at + n) that all decay (decays) or all do not. */
static void run(dt_optim *o, size_t at, size_t n, float *w, const float *g, float lr, int decays) {
    const dt_optim_config *c = &o->cfg;
    const float wd = decays ? c->weight_decay : 0.0f;
    if (c->kind == DT_OPTIM_SGD) {
        dt_sgd_run(w, g, o->m ? o->m + at : NULL, n, lr, wd, c->momentum, c->nesterov, o->steps == 1);
        return;
    }
    dt_adamw_k k;
    dt_adamw_scalars(&k, lr, wd, c->beta1, c->beta2, c->eps, o->steps);
    dt_adamw_run(w, g, o->m + at, o->v + at, n, &k);
}

void dt_optim_apply(dt_optim *o, size_t off, size_t n, float *w, const float *g, float lr) {
    assert(off <= o->n && n <= o->n - off);
    assert(o->steps >= 1); /* dt_optim_begin first */
    const size_t end = off + n;
    size_t p = off;
    int r = 0; /* the first range that ends after p */
    while (p < end) {
        while (r < o->ndecay && o->decay[2 * r + 1] <= p) r++;
        const int in = r < o->ndecay && o->decay[2 * r] <= p;
        size_t stop = in ? o->decay[2 * r + 1] : r < o->ndecay ? o->decay[2 * r] : end;
        if (stop > end) stop = end;
        run(o, p, stop - p, w + (p - off), g + (p - off), lr, in);
        p = stop;
    }
}

void dt_optim_step(dt_optim *o, float *w, float *g, float lr) {
    if (o->cfg.clip > 0) dt_clip_grad_norm(g, o->n, o->cfg.clip);
    dt_optim_begin(o);
    dt_optim_apply(o, 0, o->n, w, g, lr);
}

/* torch.nn.utils.clip_grad_norm_ (PyTorch 1.13): clip_coef = max_norm / (total_norm + 1e-6) in
 * float, which Python's scalar / tensor takes as the reciprocal times max_norm; the gradients are
 * multiplied by min(clip_coef, 1) (by 1: left as they are). The norm's sum is taken in double. */
float dt_clip_grad_norm(float *g, size_t n, float max_norm) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)g[i] * g[i];
    const float norm = (float)sqrt(sum);
    const float coef = 1.0f / (norm + 1e-6f) * max_norm;
    if (coef < 1.0f)
        for (size_t i = 0; i < n; i++) g[i] *= coef;
    return norm;
}
