/* Gradient tracking (tracking.h). */
#include "schemes/tracking.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

struct dt_tracking {
    dt_gossip *g;   /* the neighbours' y */
    size_t np;
    float *y;       /* this rank's tracker */
    float *g_prev;  /* its gradient of the step before */
    int T, *send;   /* the tensors to send this step */
    dt_trigger trig;
    int triggered;  /* 0: every tensor every step */
};

dt_status dt_tracking_create(dt_step_ctx *c, const char *topology, const dt_codec_spec *spec,
                             const dt_trigger_opts *trig, dt_tracking **out) {
    DT_TRY(dt_calloc(*out, 1, "gradient tracking"));
    dt_tracking *t = *out;
    t->np = dt_model_num_params(c->model);
    t->T = dt_model_num_tensors(c->model);
    DT_TRY(dt_calloc(t->y, t->np, "the gradient tracker of %zu parameters", t->np));
    DT_TRY(dt_calloc(t->g_prev, t->np, "the last gradient of %zu parameters", t->np));
    DT_TRY(dt_malloc(t->send, (size_t)t->T, "the tracker's send list of %d tensors", t->T));
    for (int i = 0; i < t->T; i++) t->send[i] = i;
    dt_status st = DT_OK;
    if (trig) {
        if ((st = dt_trigger_init(&t->trig, t->T, trig)) != DT_OK) return st;
        t->trig.tracker = 1;
        t->triggered = 1;
    }
    st = dt_gossip_create(c, topology, spec, &t->g);
    if (st == DT_OK) st = dt_gossip_keep_own_copy(t->g, t->y);
    if (st == DT_OK) dt_gossip_zero_copies(t->g); /* every rank's y(-1) is 0 */
    return st;
}

void dt_tracking_free(dt_tracking *t) {
    if (!t) return;
    dt_gossip_free(t->g);
    if (t->triggered) dt_trigger_free(&t->trig);
    free(t->y);
    free(t->g_prev);
    free(t->send);
    free(t);
}

/* the tensors of y whose norm moved past their thresholds (all without a rule) */
static int choose(dt_tracking *t, const dt_step_ctx *c) {
    if (!t->triggered) return t->T;
    int n = 0;
    for (int i = 0; i < t->T; i++) {
        const dt_tensor_view *v = dt_model_tensor(c->model, i);
        double s = 0;
        for (size_t p = 0; p < v->numel; p++) s += (double)t->y[v->offset + p] * t->y[v->offset + p];
        if (dt_trigger_decide(&t->trig, i, c->step, sqrt(s))) t->send[n++] = i;
    }
    return n;
}

dt_status dt_tracking_step(dt_tracking *t, dt_step_ctx *c, int sync) {
    const int n = choose(t, c);
    dt_status st = dt_gossip_send(t->g, c->comm, t->send, n, t->y);
    if (st == DT_OK) st = sync ? dt_gossip_receive_sync(t->g, c->comm) : dt_gossip_receive(t->g, c->comm);
    if (st != DT_OK) return st;
    /* y + W sum_j (yhat_j - yhat_self): W (y + sum_j yhat_j) when every tensor went this step;
     * when a trigger held some back, a pull between copies, which keeps the ranks' sum of y (on
     * a graph whose ranks have one degree), where mixing stale copies would not */
    dt_gossip_mix_consensus(t->g, t->y, 1.0f);
    float *g = dt_model_grads(c->model);
    for (size_t i = 0; i < t->np; i++) {
        t->y[i] += g[i] - t->g_prev[i];
        t->g_prev[i] = g[i];
        g[i] = t->y[i];
    }
    return DT_OK;
}

dt_status dt_tracking_finish(dt_tracking *t, dt_step_ctx *c) { return dt_gossip_drain(t->g, c->comm); }

void dt_tracking_abandon(dt_tracking *t) {
    if (t) dt_gossip_abandon(t->g);
}

dt_status dt_tracking_save(const dt_tracking *t, dt_records *out) {
    dt_status st = dt_records_add(out, "tracker", t->y, t->np);
    if (st == DT_OK) st = dt_records_add(out, "tracker_last_grad", t->g_prev, t->np);
    if (st == DT_OK && t->triggered) st = dt_trigger_save((dt_trigger *)&t->trig, out);
    return st == DT_OK ? dt_gossip_save_copies(t->g, "tracker_neighbours", "tracker_own_copy", out) : st;
}

dt_status dt_tracking_load(dt_tracking *t, const dt_tfile *f, const char *path) {
    dt_status st = dt_tfile_take(f, path, "tracker", t->y, t->np * sizeof(float));
    if (st == DT_OK) st = dt_tfile_take(f, path, "tracker_last_grad", t->g_prev, t->np * sizeof(float));
    if (st == DT_OK && t->triggered) st = dt_trigger_load(&t->trig, f, path);
    return st == DT_OK ? dt_gossip_load_copies(t->g, "tracker_neighbours", "tracker_own_copy", f, path) : st;
}
