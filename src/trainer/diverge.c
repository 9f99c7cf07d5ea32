/* Has the run diverged? Non-finite values in any rank's loss or model (collective, at every
 * epoch's end, and in the final model), which stop the run; the ranks' models drifting apart
 * (decentralized schemes), which rank 0 says once. Each writes its record into the log. */
#include <math.h>
#include <stdio.h>

#include "trainer/trainer.h"

/* The first tensor of x (the model's parameters, or their gradients) holding a non-finite
 * value, or NULL. */
static const char *nonfinite_in(const dt_model *m, const float *x) {
    for (int i = 0; i < dt_model_num_tensors(m); i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        for (size_t k = 0; k < v->numel; k++)
            if (!isfinite(x[v->offset + k])) return v->name;
    }
    return NULL;
}

static const char *nonfinite_tensor(const dt_model *m) { return nonfinite_in(m, dt_model_params((dt_model *)m)); }

/* Read while a scheme's non-blocking exchange of the gradients may be under way (buckets
 * started during backward): only read, once a run, and only to name a tensor. */
void dt_trainer_note_nonfinite(dt_trainer *t) {
    const char *g = nonfinite_in(t->model, dt_model_grads(t->model));
    snprintf(t->nonfinite_grad, sizeof t->nonfinite_grad, "%s", g ? g : "");
    t->grad_noted = 1;
}

/* The log's "diverged" record: where non-finite values were found first (step and rank null
 * when unknown: the final model's check), in the epoch the run stands in; in: "parameters",
 * "gradient" (the parameters stayed finite) or "loss" (no tensor held one). */
static void log_diverged(dt_trainer *t, long step, int rank, const char *tensor, const char *in) {
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "type", "diverged");
    dt_json_int(&j, "epoch", t->ctx.epoch + 1);
    if (step >= 0) dt_json_int(&j, "step", step);
    else dt_json_null(&j, "step");
    if (rank >= 0) dt_json_int(&j, "rank", rank);
    else dt_json_null(&j, "rank");
    dt_json_str(&j, "tensor", tensor);
    dt_json_str(&j, "in", in);
    dt_json_end(&j);
    if (dt_json_text(&j)) dt_trainer_log(t, dt_json_text(&j));
    dt_json_free(&j);
}

/* Collective, at every epoch's end: did any rank's loss or parameters become non-finite?
 * Then every rank stops with DT_ERR_DIVERGED before anything is evaluated or saved (the last
 * checkpoint and no weights stay as they are), and rank 0 says where it happened first. Once
 * an epoch: a check every step would cost a message every step. */
dt_status dt_trainer_check_divergence(dt_trainer *t, long bad_step) {
    const char *tensor = nonfinite_tensor(t->model);
    if (tensor && bad_step < 0) bad_step = t->ctx.step;
    /* the earliest step, the lowest rank on a tie: (step, rank) as one number */
    const double mine = bad_step < 0 ? INFINITY : (double)bad_step * t->comm.size + t->comm.rank;
    double first = mine;
    int err = MPI_Allreduce(&mine, &first, 1, MPI_DOUBLE, MPI_MIN, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Allreduce (divergence check)");
    if (isinf(first)) return DT_OK;
    const int who = (int)fmod(first, t->comm.size);
    const long step = (long)(first / t->comm.size);
    /* where: a parameter tensor; else the gradient of one (the parameters stayed finite); else
     * the loss alone */
    struct { int in; char name[sizeof((dt_tensor_view *)0)->name]; } at = {0, ""};
    if (t->comm.rank == who) {
        at.in = tensor ? 1 : t->nonfinite_grad[0] ? 2 : 3;
        snprintf(at.name, sizeof at.name, "%s", tensor ? tensor : t->nonfinite_grad);
    }
    err = MPI_Bcast(&at, (int)sizeof at, MPI_BYTE, who, t->comm.comm);
    if (err != MPI_SUCCESS) return dt_mpi_check(err, "MPI_Bcast (divergence check)");
    static const char *const in[] = {NULL, "parameters", "gradient", "loss"};
    const int k = at.in >= 1 && at.in <= 3 ? at.in : 3;
    log_diverged(t, step, who, at.name[0] ? at.name : NULL, in[k]);
    char where[128];
    if (k == 1) snprintf(where, sizeof where, ", first in %s", at.name);
    else if (k == 2) snprintf(where, sizeof where, ", first in the gradient of %s, the parameters still finite", at.name);
    else snprintf(where, sizeof where, " in the loss (no parameter or gradient held one)");
    return dt_fail(DT_ERR_DIVERGED, "training diverged in epoch %d: non-finite values from step %ld on rank %d%s "
                   "(nothing written for this epoch; try a smaller --lr)", t->ctx.epoch + 1, step, who, where);
}

/* The last guard, for schemes whose epochs are not checked (downpour's servers apply pushes
 * asynchronously): every rank holds the same agreed model, so they all agree without a word. */
dt_status dt_trainer_check_final(dt_trainer *t) {
    const char *bad = nonfinite_tensor(t->model);
    if (!bad) return DT_OK;
    log_diverged(t, -1, -1, bad, "parameters");
    return dt_fail(DT_ERR_DIVERGED, "training diverged: the final model holds non-finite values, first in %s "
                   "(no weights written; try a smaller --lr)", bad);
}

/* The drift check: how far the ranks' models may move apart before rank 0 says so. The spread
 * is the largest distance of a rank's parameters from the agreed model. In the 419 archived
 * logs with two spreads or more (docs/data's log archives: dpsgd, eventgrad, choco), no run
 * that finished grew it beyond 10x its smallest so far; choco at too large a --gamma for its
 * --compress grows it by orders of magnitude, past the model's own norm, within a few epochs,
 * and then to non-finite values (docs/results.md). Both must hold: a healthy spread can come
 * near the norm (5.7 on Fashion-MNIST), and one first measured a few steps in is tiny and
 * grows 100x. */
#define DRIFT_GROWTH 100.0 /* the spread over the smallest one measured before */
#define DRIFT_NORM 0.5     /* the spread over the agreed model's norm at that smallest spread */

/* One line and a "drift" record, once per run. It does not stop the run, unlike a non-finite
 * value: a drift can settle (a schedule that lowers --lr, the consensus catching up), the
 * evaluated model is the ranks' mean, and the last epochs may still be worth having; a drift
 * that does not settle reaches non-finite values, and the divergence check stops it then. */
dt_status dt_trainer_check_drift(dt_trainer *t, double spread, int epoch, long step) {
    if (!t->scheme->decentralized || t->comm.rank != 0 || !isfinite(spread) || t->drift_said) return DT_OK;
    double n2 = 0;
    const float *x = t->eval_params;
    for (size_t i = 0, n = dt_model_num_params(t->model); i < n; i++) n2 += (double)x[i] * x[i];
    /* against the model as it was at the smallest spread: a drifting run's own norm can grow
     * with its spread (a hundredfold in a few epochs), and would hide it */
    const double before = t->spread_min, norm = t->spread_min_norm;
    if (!t->spreads || spread < t->spread_min) {
        t->spread_min = spread;
        t->spread_min_norm = sqrt(n2);
    }
    if (!t->spreads++ || spread < DRIFT_GROWTH * before || !(spread >= DRIFT_NORM * norm)) return DT_OK;
    t->drift_said = 1;
    /* what to try: the scheme's consensus step if it has one, a milder codec if there is one */
    char hint[160] = "", codec[32];
    const dt_scheme_def *sc = t->scheme->def;
    size_t o = 0;
    if (dt_flag_find(sc->flags, sc->nflags, "gamma"))
        o += (size_t)snprintf(hint + o, sizeof hint - o, "a smaller --gamma, ");
    if (t->scheme->codec.kind != DT_CODEC_NONE && o < sizeof hint)
        snprintf(hint + o, sizeof hint - o, "a milder --compress than %s, ",
                 dt_codec_spec_str(&t->scheme->codec, codec, sizeof codec));
    dt_progress_clear(t);
    fprintf(stderr, "dtrain: warning: epoch %d: the ranks' models are drifting apart: spread %.3g, up from %.3g, "
            "%.3g times the model's norm then (%.3g); try %s%sa smaller --lr\n", epoch, spread, before,
            norm > 0 ? spread / norm : INFINITY, norm, hint, hint[0] ? "or " : "");
    fflush(stderr);
    dt_json j;
    dt_json_init(&j);
    dt_json_begin(&j, NULL);
    dt_json_str(&j, "type", "drift");
    dt_json_int(&j, "epoch", epoch);
    dt_json_int(&j, "step", step);
    dt_json_num(&j, "spread", spread);
    dt_json_num(&j, "spread_min", before);
    dt_json_num(&j, "params_norm_then", norm);
    dt_json_end(&j);
    const char *text = dt_json_text(&j);
    dt_status st = text ? dt_trainer_log(t, text) : DT_OK;
    dt_json_free(&j);
    return st;
}
