/* Saving and loading a model's parameters and state by tensor name. */
#include "core/alloc.h"
#include "core/safetensors.h"
#include "core/tensorfile.h"
#include "models/model.h"
#include "models/model_struct.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void view_record(dt_record *r, const dt_tensor_view *v, float *base) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", v->name);
    r->ndim = v->ndim;
    memcpy(r->shape, v->shape, sizeof r->shape);
    r->numel = v->numel;
    r->data = base + v->offset;
}

int dt_model_records(dt_model *m, dt_record *out) {
    for (int i = 0; i < m->nviews; i++) view_record(&out[i], &m->views[i], m->params);
    for (int i = 0; i < m->nsviews; i++) view_record(&out[m->nviews + i], &m->sviews[i], m->state);
    return m->nviews + m->nsviews;
}

/* As dt_model_open tells a spec file from a built-in name. */
static int spec_file(const char *model) {
    struct stat sb;
    return strchr(model, '/') || strstr(model, ".spec") || (stat(model, &sb) == 0 && S_ISREG(sb.st_mode));
}

char *dt_model_spec_of(const char *model) {
    if (!spec_file(model)) return dt_model_spec_text(model);
    char *text = NULL;
    return dt_model_spec_read(model, &text) == DT_OK ? text : NULL;
}

dt_status dt_weights_meta_put(dt_records *l, const char *model, const char *data, const char *scheme) {
    char *spec = dt_model_spec_of(model);
    dt_status st = dt_records_add_text(l, "meta:model", model);
    if (st == DT_OK && spec) st = dt_records_add_text(l, "meta:spec", spec);
    if (st == DT_OK && data) st = dt_records_add_text(l, "meta:data", data);
    if (st == DT_OK && scheme) st = dt_records_add_text(l, "meta:algo", scheme); /* --algo NAME */
    free(spec);
    return st;
}

dt_status dt_weights_meta_get(const dt_tfile *f, dt_weights_meta *out) {
    const char *names[4] = {"meta:model", "meta:spec", "meta:data", "meta:algo"};
    char **slots[4] = {&out->model, &out->spec, &out->data, &out->scheme};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 4; i++)
        if (dt_tfile_find(f, names[i]) && !(*slots[i] = dt_tfile_text(f, names[i]))) {
            dt_weights_meta_free(out);
            return dt_nomem("the %s record", names[i]);
        }
    return DT_OK;
}

void dt_weights_meta_free(dt_weights_meta *w) {
    free(w->model); free(w->spec); free(w->data); free(w->scheme);
    memset(w, 0, sizeof *w);
}

dt_status dt_weights_meta_read(const char *path, dt_weights_meta *out) {
    memset(out, 0, sizeof *out);
    dt_tfile f;
    dt_status st = dt_weights_read(path, &f);
    if (st == DT_OK) st = dt_weights_meta_get(&f, out);
    dt_tfile_free(&f);
    return st;
}

/* By spec text, not by name: a renamed or copied spec file is the same model, and a file
 * edited since is not. */
int dt_weights_meta_same_model(const dt_weights_meta *w, const char *model) {
    if (!w->spec) return !w->model || !strcmp(w->model, model);
    char *spec = dt_model_spec_of(model);
    const int same = !spec || !strcmp(spec, w->spec);
    free(spec);
    return same;
}

dt_status dt_weights_read(const char *path, dt_tfile *out) {
    return dt_is_safetensors(path) ? dt_safetensors_read(path, out) : dt_tfile_read(path, out);
}

/* PyTorch's BatchNorm2d has a third buffer, num_batches_tracked (int64), that
 * load_state_dict(strict=True) requires: one per batch norm (a state tensor NAME.running_mean),
 * written as 0 since dtrain keeps no such count (PyTorch reads it only with momentum=None). */
static dt_status save_safetensors(const dt_model *m, const char *path, const dt_records *l) {
    dt_st_i64 *nbt;
    DT_TRY(dt_calloc(nbt, (size_t)m->nsviews + 1, "the batch norms' counts"));
    int k = 0;
    const char *suffix = ".running_mean";
    for (int i = 0; i < m->nsviews; i++) {
        const char *name = m->sviews[i].name;
        const size_t nl = strlen(name), sl = strlen(suffix);
        if (nl <= sl || strcmp(name + nl - sl, suffix) != 0) continue;
        if (nl - sl + strlen(".num_batches_tracked") >= sizeof nbt[k].name) continue; /* cannot be named */
        snprintf(nbt[k].name, sizeof nbt[k].name, "%.*s.num_batches_tracked", (int)(nl - sl), name);
        nbt[k++].value = 0;
    }
    dt_status st = dt_safetensors_write(path, l->r, l->n, nbt, k);
    free(nbt);
    return st;
}

/* A tied weight (linear tie=NAME) is one tensor of the model, NAME.weight; PyTorch's state_dict
 * names it twice (nanoGPT: transformer.wte.weight and lm_head.weight), and load_state_dict
 * (strict=True) wants both. So a weights file carries it under the tied layer's name too (the
 * same values), and reading accepts that name: equal to the other, or standing in for it. */
static const dt_node *tied_node(const dt_model *m, const char *name) {
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        const size_t len = strlen(n->name);
        if (n->tie && !strncmp(name, n->name, len) && !strcmp(name + len, ".weight")) return n;
    }
    return NULL;
}

/* The tied layer's name of the owner's weight view v ("lm_head.weight" for
 * "transformer.wte.weight"), or NULL. */
static const char *alias_of(const dt_model *m, const dt_tensor_view *v, char *buf, size_t cap) {
    for (int i = 0; i < m->nn; i++) {
        const dt_node *n = &m->nodes[i];
        if (!n->tie || m->nodes[n->tie - 1].w[0] != m->params + v->offset) continue;
        snprintf(buf, cap, "%s.weight", n->name);
        return buf;
    }
    return NULL;
}

dt_status dt_model_save_meta(const dt_model *m, const char *path, const char *model, const char *data, const char *scheme) {
    int n = m->nviews + m->nsviews;
    dt_record *recs;
    DT_TRY(dt_calloc(recs, (size_t)n + 1, "the records of %d tensors", n));
    dt_model_records((dt_model *)m, recs); /* only read from: the file is written from them */
    dt_records l = {0};
    dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) st = dt_records_put(&l, &recs[i]);
    for (int i = 0; i < m->nviews && st == DT_OK; i++) {
        dt_record alias = recs[i];
        if (alias_of(m, &m->views[i], alias.name, sizeof alias.name)) st = dt_records_put(&l, &alias);
    }
    if (st == DT_OK && model) st = dt_weights_meta_put(&l, model, data, scheme);
    if (st == DT_OK && dt_is_safetensors(path)) st = save_safetensors(m, path, &l);
    else if (st == DT_OK) st = dt_tfile_write(path, l.r, l.n);
    dt_records_free(&l);
    free(recs);
    return st;
}

dt_status dt_model_save(const dt_model *m, const char *path) { return dt_model_save_meta(m, path, NULL, NULL, NULL); }

static void shape_str(char *buf, size_t len, int ndim, const int *shape) {
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, d ? ",%d" : "%d", shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* v: a parameter (param 1) or state view; its values into base (a copy of the buffer) */
static dt_status copy_in(const dt_model *m, const dt_tfile *f, const char *path, const dt_tensor_view *v, int param,
                         float *base) {
    const dt_record *r = dt_tfile_find(f, v->name);
    char alias[80];
    const dt_record *a = param && alias_of(m, v, alias, sizeof alias) ? dt_tfile_find(f, alias) : NULL;
    if (r && a && (r->numel != a->numel || memcmp(r->data, a->data, r->numel * sizeof(float)) != 0))
        return dt_fail(DT_ERR_FORMAT, "%s: tensors '%s' and '%s' differ, and this model ties them (one weight)", path,
                       v->name, alias);
    if (!r) r = a;
    if (!r) return dt_fail(DT_ERR_FORMAT, "%s: has no tensor '%s' (weights of another model?)", path, v->name);
    if (r->ndim != v->ndim || memcmp(r->shape, v->shape, sizeof(int) * (size_t)v->ndim) != 0) {
        char a[64], b[64];
        shape_str(a, sizeof a, r->ndim, r->shape);
        shape_str(b, sizeof b, v->ndim, v->shape);
        return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' has shape %s, the model expects %s", path, v->name, a, b);
    }
    /* training never writes a NaN or an infinity (it stops as diverged): such a file was
     * made elsewhere or damaged, and would evaluate to a meaningless figure */
    for (size_t k = 0; k < r->numel; k++)
        if (!isfinite(r->data[k]))
            return dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value (%g at index %zu); weights are "
                           "finite numbers", path, v->name, (double)r->data[k], k);
    memcpy(base + v->offset, r->data, v->numel * sizeof(float));
    return DT_OK;
}

dt_status dt_model_load_records(dt_model *m, const dt_tfile *f, const char *path) {
    dt_status st = DT_OK;
    /* all-or-nothing: check everything before touching the model */
    float *p = malloc((m->np ? m->np : 1) * sizeof(float)), *s = malloc((m->ns ? m->ns : 1) * sizeof(float));
    if (!p || !s) st = dt_nomem("a copy of %zu parameters and %zu state values", m->np, m->ns);
    for (int i = 0; st == DT_OK && i < m->nviews; i++) st = copy_in(m, f, path, &m->views[i], 1, p);
    for (int i = 0; st == DT_OK && i < m->nsviews; i++) st = copy_in(m, f, path, &m->sviews[i], 0, s);
    int known = m->nviews + m->nsviews;
    for (int i = 0; st == DT_OK && i < f->n; i++) {
        /* checkpoint extras (optimiser, trainer, the scheme's state: "owner:what") are not the
         * model's business; model tensors are named "layer.what" */
        if (strchr(f->recs[i].name, ':')) continue;
        int found = 0;
        for (int j = 0; j < m->nviews && !found; j++) found = !strcmp(m->views[j].name, f->recs[i].name);
        for (int j = 0; j < m->nsviews && !found; j++) found = !strcmp(m->sviews[j].name, f->recs[i].name);
        found = found || tied_node(m, f->recs[i].name);
        if (!found)
            st = dt_fail(DT_ERR_FORMAT, "%s: tensor '%s' is not part of this model (%d tensors expected)", path, f->recs[i].name, known);
    }
    if (st == DT_OK) {
        memcpy(m->params, p, m->np * sizeof(float));
        memcpy(m->state, s, m->ns * sizeof(float));
    }
    free(p);
    free(s);
    return st;
}

dt_status dt_model_load(dt_model *m, const char *path) {
    dt_tfile f;
    dt_status st = dt_weights_read(path, &f);
    if (st != DT_OK) return st;
    st = dt_model_load_records(m, &f, path);
    dt_tfile_free(&f);
    return st;
}
