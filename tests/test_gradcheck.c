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

/* Numeric derivative of the loss in *v, or NAN where it cannot be trusted: at a kink the
 * one-sided differences disagree (at_kink); a kink inside [v - eps, v + eps] but too small
 * for that shows as central differences at eps and eps/2 that disagree by more than half the
 * tolerance, where a smooth loss would have them agree to O(eps^2). */
static double numeric(problem *p, float *v, float eps) {
    float save = *v;
    double l0 = loss_at(p);
    *v = save + eps;
    double lp = loss_at(p);
    *v = save - eps;
    double lm = loss_at(p);
    *v = save + eps / 2;
    double lp2 = loss_at(p);
    *v = save - eps / 2;
    double lm2 = loss_at(p);
    *v = save;
    const double c1 = (lp - lm) / (2 * eps), c2 = (lp2 - lm2) / eps;
    const int unsteady = fabs(c1 - c2) > 0.5 * (2e-4 + 2e-2 * fmax(fabs(c1), fabs(c2)));
    return at_kink(lp, l0, lm, eps) || unsteady ? NAN : c1;
}

/* Checks up to `samples` coordinates of every parameter tensor and of the input. */
/* min_frac: share of checked entries that must agree one by one (1 for smooth layers; less
 * where ReLU/max-pool kinks make single finite differences unreliable); min_cos: cosine
 * between the numeric and analytic gradient vectors, which a real bug breaks; max_skip:
 * share of points that may be skipped as kinks. Whole models get more of both: moving one
 * weight of an early convolution moves thousands of activations, and every max-pool window
 * or ReLU one of them crosses is a kink; the PyTorch oracle (test_oracle) pins the same
 * gradients to 1e-4 exactly. */
static void gradcheck(const char *label, const char *spec, int batch, int train, int samples,
                      double min_frac, double min_cos, double max_skip) {
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
    char worst[5][160];
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
            if (!close_enough(num, grad[i]) && bad++ < 5)
                snprintf(worst[bad - 1], sizeof worst[0], "%s[%zu]: numeric %.6g analytic %.6g", v->name,
                         i - v->offset, num, (double)grad[i]);
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
            snprintf(worst[bad - 1], sizeof worst[0], "input[%zu]: numeric %.6g analytic %.6g", i, num, (double)dx[i]);
    }
    double cosine = dot / sqrt(nn2 * aa2 + 1e-300);
    const int frac_ok = checked - bad >= min_frac * checked;
    CHECK_MSG(frac_ok, "%s: %d of %d gradient entries disagree with finite differences", label, bad, checked);
    /* the disagreeing entries are shown when they are too many; within the allowance (a
     * finite difference that crossed a max-pool/ReLU kink too small for at_kink to see, or
     * float32 noise on a small derivative) one line says how many there were */
    if (!frac_ok)
        for (int k = 0; k < bad && k < 5; k++) fprintf(stderr, "  %s: %s\n", label, worst[k]);
    printf("%-20s %4d entries, %2d outside tolerance (allowed %2.0f%%), %2d kinks skipped (allowed %2.0f%%), cosine %.6f\n",
           label, checked, bad, 100 * (1 - min_frac), kinks, 100 * max_skip, cosine);
    CHECK_MSG(cosine >= min_cos, "%s: cosine(numeric, analytic) = %.6f < %.4f", label, cosine, min_cos);
    CHECK_MSG(kinks <= max_skip * (checked + kinks), "%s: %d of %d points skipped as kinks (too many to trust)", label, kinks, checked + kinks);
    free(grad); free(x); free(dx); free(y);
    dt_model_free(m);
}

int main(void) {
    dt_runtime_init();
    gradcheck("linear", "input c=3 h=2 w=2\nlinear out=5\n", 4, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("linear-nobias", "input c=6 h=1 w=1\nlinear out=4 bias=0\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("conv", "input c=2 h=7 w=7\nconv out=3 k=3\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("conv-stride-pad", "input c=2 h=7 w=7\nconv out=3 k=3 stride=2 pad=1 bias=0\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    /* "conv" takes dW from im2col's columns (ckk 18 < 25 pixels), "conv-stride-pad" from
     * im2row's rows with 8-wide pieces, this one from rows with 16-wide pieces (k = 9) */
    gradcheck("conv-k9-rows", "input c=2 h=10 w=10\nconv out=3 k=9 pad=2\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    /* one input channel, as the first layer of the MNIST models (a second 16-float piece of 2
     * columns, a fused ReLU; the last with its input gradient) */
    gradcheck("conv-c1", "input c=1 h=6 w=20\nconv out=10 k=3\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("conv-c1-relu", "input c=1 h=5 w=9\nconv out=16 k=2\nrelu\nflatten\nlinear out=3\n", 2, 1, 200, 0.97, 0.999, 0.1);
    gradcheck("conv-c1-dx", "input c=2 h=7 w=7\nconv out=1 k=1\nconv out=8 k=3\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("conv-1x1", "input c=4 h=3 w=3\nconv out=2 k=1\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("conv-1x1-stride", "input c=4 h=5 w=5\nconv out=2 k=1 stride=2 bias=0\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("maxpool", "input c=2 h=6 w=6\nconv out=2 k=1\nmaxpool k=2\nflatten\n", 2, 1, 200, 0.97, 0.999, 0.1);
    gradcheck("maxpool-stride-pad", "input c=2 h=7 w=7\nmaxpool k=3 stride=2 pad=1\nflatten\n", 2, 1, 200, 0.97, 0.999, 0.1);
    gradcheck("avgpool", "input c=2 h=7 w=7\navgpool k=3 stride=2 pad=1\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("gavgpool", "input c=3 h=4 w=4\nconv out=5 k=3 pad=1\ngavgpool\nflatten\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("relu", "input c=2 h=3 w=3\nlinear out=12\nrelu\nlinear out=4\n", 3, 1, 200, 0.97, 0.999, 0.1);
    gradcheck("dropout", "input c=2 h=3 w=3\nlinear out=12\ndropout p=0.5\nlinear out=4\n", 3, 1, 200, 0.97, 0.999, 0.1);
    gradcheck("dropout2d", "input c=2 h=4 w=4\nconv out=4 k=3 pad=1\ndropout2d p=0.5\nflatten\nlinear out=4\n", 3, 1, 200, 0.97, 0.999, 0.1);
    gradcheck("dropout-eval", "input c=2 h=3 w=3\nlinear out=12\ndropout p=0.5\nlinear out=4\n", 3, 0, 200, 0.97, 0.999, 0.1);
    gradcheck("batchnorm-train", "input c=3 h=3 w=3\nconv out=4 k=3 pad=1\nbatchnorm\nflatten\nlinear out=5\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("batchnorm-eval", "input c=3 h=3 w=3\nconv out=4 k=3 pad=1\nbatchnorm\nflatten\nlinear out=5\n", 3, 0, 200, 1.0, 0.9999, 0.1);
    gradcheck("add", "input c=2 h=3 w=3\nconv out=2 k=3 pad=1\nadd in=input\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("add-two-named", "input c=2 h=4 w=4\nconv out=3 k=3 pad=1 name=a\nconv out=3 k=1 in=input name=b\nadd in=a,b\nflatten\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("flatten", "input c=2 h=2 w=2\nflatten\nlinear out=3\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    /* whole models */
    char *cnn1 = dt_model_spec_text("cnn1"), *res = dt_model_spec_text("resblock-tiny");
    CHECK(cnn1 && res);
    if (cnn1) gradcheck("cnn1", cnn1, 4, 1, 60, 0.90, 0.99, 0.2);
    if (res) gradcheck("resblock-tiny", res, 4, 1, 60, 0.90, 0.99, 0.2);
    free(cnn1);
    free(res);
    return test_summary("test_gradcheck");
}
