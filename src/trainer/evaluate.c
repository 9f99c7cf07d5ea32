/* Evaluation: test accuracy of a model, and the model all ranks agree to evaluate and keep.
 * Measurement traffic (gathering the models) uses plain MPI calls and is not counted as the
 * scheme's communication. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/sim.h"
#include "trainer/trainer.h"

/* Accuracy: the share of predictions that are right (a language model's: of its next tokens);
 * loss: their mean cross-entropy in nats. A text's windows are its fixed ones (no offsets). */
dt_status dt_evaluate(dt_model *m, const dt_dataset *d, int batch, int limit, double *acc, double *loss) {
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    if (c != d->c || h != d->h || w != d->w)
        return dt_fail(DT_ERR_ARG, "the model takes %dx%dx%d inputs, %s %s are %dx%dx%d", c, h, w,
                       d->name, d->text ? "windows" : "images", d->c, d->h, d->w);
    const int positions = dt_model_positions(m);
    if (positions != dt_dataset_positions(d))
        return dt_fail(DT_ERR_ARG, "the model predicts %d position(s) an example, %s has targets for %d", positions,
                       d->name, dt_dataset_positions(d));
    int n = limit > 0 && limit < d->n ? limit : d->n;
    float *x = malloc((size_t)batch * c * h * w * sizeof(float));
    uint16_t *y = malloc((size_t)batch * (size_t)positions * sizeof *y);
    int *idx = malloc((size_t)batch * sizeof(int));
    dt_status st = (x && y && idx) ? dt_model_reserve(m, batch) : dt_nomem("the eval batch of %d", batch);
    long correct = 0;
    double lsum = 0;
    for (int b = 0; st == DT_OK && b < n; b += batch) {
        int cnt = n - b < batch ? n - b : batch, ok = 0;
        for (int i = 0; i < cnt; i++) idx[i] = b + i;
        dt_batch_fill_targets(d, idx, cnt, x, y, 0, NULL);
        dt_model_forward(m, x, cnt, 0);
        /* a replay's forward calculates nothing: its figures are the log's (trainer/replay.c) */
        if (!dt_sim_replay()) lsum += (double)dt_model_loss_targets(m, y, &ok) * cnt;
        correct += ok;
    }
    free(x); free(y); free(idx);
    if (st == DT_OK) {
        *acc = n ? (double)correct / ((double)n * positions) : 0;
        *loss = n ? lsum / n : 0;
    }
    return st;
}

/* The mean of the training ranks' models (servers contribute zeros). */
static dt_status mean_model(dt_trainer *t) {
    dt_model *m = t->model;
    const size_t np = dt_model_num_params(m), ns = dt_model_num_state(m);
    const int trains = t->ctx.run.worker >= 0;
    for (size_t i = 0; i < np; i++) t->eval_params[i] = trains ? dt_model_params(m)[i] : 0.0f;
    for (size_t i = 0; i < ns; i++) t->eval_state[i] = trains ? dt_model_state(m)[i] : 0.0f;
    /* beside the payloads (an evaluation, not training), counted as an allreduce is */
    const int N = t->comm.size;
    if (N > 1) dt_count_other(&t->comm, 2 * (uint64_t)(N - 1) * (np + ns) * sizeof(float) / (uint64_t)N);
    int err = MPI_Allreduce(MPI_IN_PLACE, t->eval_params, (int)np, MPI_FLOAT, MPI_SUM, t->comm.comm);
    if (err == MPI_SUCCESS && ns) err = MPI_Allreduce(MPI_IN_PLACE, t->eval_state, (int)ns, MPI_FLOAT, MPI_SUM, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (model average)");
    const float inv = 1.0f / (float)t->ctx.run.nworkers;
    for (size_t i = 0; i < np; i++) t->eval_params[i] *= inv;
    for (size_t i = 0; i < ns; i++) t->eval_state[i] *= inv;
    return DT_OK;
}

dt_status dt_trainer_agreed_model(dt_trainer *t, double *spread) {
    dt_model *m = t->model;
    const size_t np = dt_model_num_params(m);
    dt_scheme *s = t->scheme;
    dt_status st = s->ops->model_for_eval ? s->ops->model_for_eval(s, &t->ctx, t->eval_params, t->eval_state)
                                          : mean_model(t);
    double d2 = 0;
    if (t->ctx.run.worker >= 0)
        for (size_t i = 0; i < np; i++) {
            double d = (double)dt_model_params(m)[i] - t->eval_params[i];
            d2 += d * d;
        }
    double mine = sqrt(d2), worst = 0;
    int err = MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, t->comm.comm);
    if (st == DT_OK && err != MPI_SUCCESS) st = dt_mpi_check(err, "MPI_Allreduce (spread of the models)");
    *spread = worst;
    return st;
}

dt_status dt_trainer_eval_rank0(dt_trainer *t, const float *params, const float *state, double *acc, double *loss,
                                double val[2]) {
    dt_model *m = t->model;
    const size_t np = dt_model_num_params(m), ns = dt_model_num_state(m);
    float *keep = malloc((np + ns + 1) * sizeof(float));
    if (!keep) return dt_nomem("a copy of %zu parameters and %zu state values", np, ns);
    memcpy(keep, dt_model_params(m), np * sizeof(float));
    memcpy(keep + np, dt_model_state(m), ns * sizeof(float));
    memcpy(dt_model_params(m), params, np * sizeof(float));
    memcpy(dt_model_state(m), state, ns * sizeof(float));
    dt_status st = dt_evaluate(m, &t->test, t->cfg->batch, 0, acc, loss);
    if (st == DT_OK && t->val.n) st = dt_evaluate(m, &t->val, t->cfg->batch, 0, &val[0], &val[1]);
    memcpy(dt_model_params(m), keep, np * sizeof(float));
    memcpy(dt_model_state(m), keep + np, ns * sizeof(float));
    free(keep);
    return st;
}
