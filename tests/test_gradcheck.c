/* Finite-difference gradient checks: every layer kind (through small models built from spec
 * text), the input gradient, and the whole of cnn1 and a residual block with batch-norm.
 * Central differences on the float32 loss; dropout is reseeded before every forward so the
 * mask stays fixed. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtrain.h"

typedef struct {
    dt_model *m;
    const float *x;
    const uint8_t *y;
    int batch, train;
} problem;

/* The mean cross-entropy, in double from the float logits: the float loss the engine returns
 * is quantised too coarsely for finite differences. */
static double loss_at(problem *p) {
    dt_model_set_seed(p->m, 42);
    const float *z = dt_model_forward(p->m, p->x, p->batch, p->train);
    int k = dt_model_num_classes(p->m);
    double total = 0;
    for (int b = 0; b < p->batch; b++, z += k) {
        double mx = z[0], sum = 0;
        for (int c = 1; c < k; c++) mx = fmax(mx, z[c]);
        for (int c = 0; c < k; c++) sum += exp(z[c] - mx);
        total += log(sum) + mx - z[p->y[b]];
    }
    return total / p->batch;
}

static int close_enough(double num, double ana) {
    double err = fabs(num - ana), scale = fmax(fabs(num), fabs(ana));
    return err <= 2e-4 + 2e-2 * scale;
}

/* ReLU and max-pool are not differentiable everywhere: where the forward and backward
 * one-sided differences disagree, the step crossed a kink and the point says nothing. */
static int at_kink(double lp, double l0, double lm, float eps) {
    double d1 = (lp - l0) / eps, d2 = (l0 - lm) / eps;
    return fabs(d1 - d2) > 1e-3 + 0.1 * fmax(fabs(d1), fabs(d2));
}

/* Numeric derivative of the loss in *v, or NAN at a kink. */
static double numeric(problem *p, float *v, float eps) {
    float save = *v;
    double l0 = loss_at(p);
    *v = save + eps;
    double lp = loss_at(p);
    *v = save - eps;
    double lm = loss_at(p);
    *v = save;
    return at_kink(lp, l0, lm, eps) ? NAN : (lp - lm) / (2 * eps);
}

/* Checks up to `samples` coordinates of every parameter tensor and of the input. */
/* min_frac: share of checked entries that must agree one by one (1 for smooth layers; less
 * where ReLU/max-pool kinks make single finite differences unreliable); min_cos: cosine
 * between the numeric and analytic gradient vectors, which a real bug breaks. */
static void gradcheck(const char *label, const char *spec, int batch, int train, int samples,
                      double min_frac, double min_cos) {
    dt_model *m = NULL;
    dt_status st = dt_model_from_spec(spec, label, &m);
    CHECK_MSG(st == DT_OK, "%s: %s", label, dt_last_error());
    if (st != DT_OK) return;
    dt_model_init(m, 3);
    CHECK(dt_model_reserve(m, batch) == DT_OK);
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    size_t in = (size_t)batch * c * h * w;
    float *x = malloc(in * sizeof(float)), *dx = malloc(in * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    dt_rng r;
    dt_rng_seed(&r, 11);
    for (size_t i = 0; i < in; i++) x[i] = 2.0f * dt_rng_uniform(&r) - 1.0f;
    int classes = dt_model_num_classes(m);
    for (int i = 0; i < batch; i++) y[i] = (uint8_t)dt_rng_below(&r, (uint32_t)classes);
    /* make batch-norm parameters non-trivial */
    float *params = dt_model_params(m);
    for (int t = 0; t < dt_model_num_tensors(m); t++) {
        const dt_tensor_view *v = dt_model_tensor(m, t);
        if (strstr(v->name, "bn") || strstr(v->name, "shortcut.1"))
            for (size_t i = 0; i < v->numel; i++)
                params[v->offset + i] += 0.3f * (dt_rng_uniform(&r) - 0.5f);
    }
    problem p = {m, x, y, batch, train};
    dt_model_set_seed(m, 42);
    dt_model_forward(m, x, batch, train);
    dt_model_backward_input(m, y, NULL, dx);
    size_t np = dt_model_num_params(m);
    float *grad = malloc(np * sizeof(float));
    memcpy(grad, dt_model_grads(m), np * sizeof(float));
    const float eps = 2e-3f;
    int checked = 0, bad = 0, kinks = 0;
    double dot = 0, nn2 = 0, aa2 = 0;
    for (int t = 0; t < dt_model_num_tensors(m); t++) {
        const dt_tensor_view *v = dt_model_tensor(m, t);
        size_t n = v->numel < (size_t)samples ? v->numel : (size_t)samples;
        for (size_t k = 0; k < n; k++) {
            size_t i = v->offset + (v->numel <= (size_t)samples ? k : dt_rng_below(&r, (uint32_t)v->numel));
            double num = numeric(&p, &params[i], eps);
            if (isnan(num)) { kinks++; continue; }
            checked++;
            dot += num * grad[i]; nn2 += num * num; aa2 += (double)grad[i] * grad[i];
            if (!close_enough(num, grad[i])) {
                if (bad++ < 5)
                    fprintf(stderr, "%s: %s[%zu]: numeric %.6g analytic %.6g\n", label, v->name,
                            i - v->offset, num, (double)grad[i]);
            }
        }
    }
    size_t n = in < (size_t)samples ? in : (size_t)samples;
    for (size_t k = 0; k < n; k++) {
        size_t i = in <= (size_t)samples ? k : dt_rng_below(&r, (uint32_t)in);
        double num = numeric(&p, &x[i], eps);
        if (isnan(num)) { kinks++; continue; }
        checked++;
        dot += num * dx[i]; nn2 += num * num; aa2 += (double)dx[i] * dx[i];
        if (!close_enough(num, dx[i]) && bad++ < 5)
            fprintf(stderr, "%s: input[%zu]: numeric %.6g analytic %.6g\n", label, i, num, (double)dx[i]);
    }
    double cosine = dot / sqrt(nn2 * aa2 + 1e-300);
    CHECK_MSG(checked - bad >= min_frac * checked, "%s: %d of %d gradient entries disagree with finite differences", label, bad, checked);
    CHECK_MSG(cosine >= min_cos, "%s: cosine(numeric, analytic) = %.6f < %.4f", label, cosine, min_cos);
    CHECK_MSG(kinks * 10 <= checked, "%s: %d of %d points skipped as kinks (too many to trust)", label, kinks, checked + kinks);
    free(grad); free(x); free(dx); free(y);
    dt_model_free(m);
}

int main(void) {
    dt_runtime_init();
    gradcheck("linear", "input c=3 h=2 w=2\nlinear out=5\n", 4, 1, 200, 1.0, 0.9999);
    gradcheck("linear-nobias", "input c=6 h=1 w=1\nlinear out=4 bias=0\n", 3, 1, 200, 1.0, 0.9999);
    gradcheck("conv", "input c=2 h=7 w=7\nconv out=3 k=3\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("conv-stride-pad", "input c=2 h=7 w=7\nconv out=3 k=3 stride=2 pad=1 bias=0\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("conv-1x1", "input c=4 h=3 w=3\nconv out=2 k=1\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("conv-1x1-stride", "input c=4 h=5 w=5\nconv out=2 k=1 stride=2 bias=0\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("maxpool", "input c=2 h=6 w=6\nconv out=2 k=1\nmaxpool k=2\nflatten\n", 2, 1, 200, 0.97, 0.999);
    gradcheck("maxpool-stride-pad", "input c=2 h=7 w=7\nmaxpool k=3 stride=2 pad=1\nflatten\n", 2, 1, 200, 0.97, 0.999);
    gradcheck("avgpool", "input c=2 h=7 w=7\navgpool k=3 stride=2 pad=1\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("gavgpool", "input c=3 h=4 w=4\nconv out=5 k=3 pad=1\ngavgpool\nflatten\n", 3, 1, 200, 1.0, 0.9999);
    gradcheck("relu", "input c=2 h=3 w=3\nlinear out=12\nrelu\nlinear out=4\n", 3, 1, 200, 0.97, 0.999);
    gradcheck("dropout", "input c=2 h=3 w=3\nlinear out=12\ndropout p=0.5\nlinear out=4\n", 3, 1, 200, 0.97, 0.999);
    gradcheck("dropout2d", "input c=2 h=4 w=4\nconv out=4 k=3 pad=1\ndropout2d p=0.5\nflatten\nlinear out=4\n", 3, 1, 200, 0.97, 0.999);
    gradcheck("dropout-eval", "input c=2 h=3 w=3\nlinear out=12\ndropout p=0.5\nlinear out=4\n", 3, 0, 200, 0.97, 0.999);
    gradcheck("batchnorm-train", "input c=3 h=3 w=3\nconv out=4 k=3 pad=1\nbatchnorm\nflatten\nlinear out=5\n", 3, 1, 200, 1.0, 0.9999);
    gradcheck("batchnorm-eval", "input c=3 h=3 w=3\nconv out=4 k=3 pad=1\nbatchnorm\nflatten\nlinear out=5\n", 3, 0, 200, 1.0, 0.9999);
    gradcheck("add", "input c=2 h=3 w=3\nconv out=2 k=3 pad=1\nadd in=input\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("add-two-named", "input c=2 h=4 w=4\nconv out=3 k=3 pad=1 name=a\nconv out=3 k=1 in=input name=b\nadd in=a,b\nflatten\n", 2, 1, 200, 1.0, 0.9999);
    gradcheck("flatten", "input c=2 h=2 w=2\nflatten\nlinear out=3\n", 2, 1, 200, 1.0, 0.9999);
    /* whole models */
    char *cnn1 = dt_model_spec_text("cnn1"), *res = dt_model_spec_text("resblock-tiny");
    CHECK(cnn1 && res);
    if (cnn1) gradcheck("cnn1", cnn1, 4, 1, 60, 0.90, 0.99);
    if (res) gradcheck("resblock-tiny", res, 4, 1, 60, 0.90, 0.99);
    free(cnn1);
    free(res);
    return test_summary("test_gradcheck");
}
