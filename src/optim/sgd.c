/* SGD with momentum, Nesterov and weight decay (PyTorch semantics): dt_sgd over one buffer, and
 * the loop dt_optim's sgd runs over its slices (optim.h). */
#include "core/alloc.h"
#include "dtrain.h"
#include "optim/optim.h"

#include <stdlib.h>
#include <string.h>

dt_status dt_sgd_init(dt_sgd *o, size_t n, float momentum, float weight_decay, int nesterov) {
    memset(o, 0, sizeof *o);
    if (momentum < 0 || momentum >= 1) return dt_fail(DT_ERR_ARG, "momentum %g must be in [0, 1)", (double)momentum);
    if (weight_decay < 0) return dt_fail(DT_ERR_ARG, "weight decay %g must be >= 0", (double)weight_decay);
    if (nesterov && momentum == 0) return dt_fail(DT_ERR_ARG, "Nesterov needs momentum > 0");
    o->n = n;
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    o->nesterov = nesterov;
    if (momentum > 0) {
        DT_TRY(dt_calloc(o->buf, n, "the momentum buffer"));
    }
    return DT_OK;
}

void dt_sgd_run(float *w, const float *g, float *buf, size_t n, float lr, float wd, float mu, int nesterov, int first) {
    if (mu == 0.0f) {
        for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
        return;
    }
    if (first) {
        /* PyTorch starts the buffer at the first gradient, not at zero times momentum */
        for (size_t i = 0; i < n; i++) buf[i] = g[i] + wd * w[i];
    } else {
        for (size_t i = 0; i < n; i++) buf[i] = mu * buf[i] + (g[i] + wd * w[i]);
    }
    if (nesterov)
        for (size_t i = 0; i < n; i++) w[i] -= lr * ((g[i] + wd * w[i]) + mu * buf[i]);
    else
        for (size_t i = 0; i < n; i++) w[i] -= lr * buf[i];
}

void dt_sgd_step(dt_sgd *o, float *w, const float *g, float lr) {
    dt_sgd_run(w, g, o->buf, o->n, lr, o->weight_decay, o->momentum, o->nesterov, !o->started);
    if (o->momentum != 0.0f) o->started = 1;
}

void dt_sgd_free(dt_sgd *o) {
    free(o->buf);
    memset(o, 0, sizeof *o);
}
