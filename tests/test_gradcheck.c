/* Finite-difference gradient checks: every layer kind (through small models built from spec
 * text), the input gradient, and the whole of cnn1, a residual block with batch-norm and a
 * small GPT (per-position loss, tied head). Central differences on the float32 loss; dropout is
 * reseeded before every forward so the mask stays fixed. Also: attention and a GPT are causal
 * (an output position does not depend on later inputs). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtrain.h"
#include "layers/vmath.h"
#include "models/model.h"

typedef struct {
    dt_model *m;
    const float *x;
    const uint8_t *y;
    int batch, train;
} problem;

/* The mean cross-entropy over every prediction (batch x positions rows), in double from the
 * float logits: the float loss the engine returns is quantised too coarsely for finite
 * differences. */
static double loss_at(problem *p) {
    dt_model_set_seed(p->m, 42);
    const float *z = dt_model_forward(p->m, p->x, p->batch, p->train);
    const int k = dt_model_num_classes(p->m), rows = p->batch * dt_model_positions(p->m);
    double total = 0;
    for (int b = 0; b < rows; b++, z += k) {
        double mx = z[0], sum = 0;
        for (int c = 1; c < k; c++) mx = fmax(mx, z[c]);
        for (int c = 0; c < k; c++) sum += exp(z[c] - mx);
        total += log(sum) + mx - z[p->y[b]];
    }
    return total / rows;
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
    const int rows = batch * dt_model_positions(m), vocab = dt_model_vocab(m);
    float *x = malloc(in * sizeof(float)), *dx = malloc(in * sizeof(float));
    uint8_t *y = malloc((size_t)rows);
    dt_rng r;
    dt_rng_seed(&r, 11);
    /* token ids for a language model (no input gradient to check), else values in [-1, 1) */
    for (size_t i = 0; i < in; i++) x[i] = vocab ? (float)dt_rng_below(&r, (uint32_t)vocab) : 2.0f * dt_rng_uniform(&r) - 1.0f;
    if (vocab) in = 0;
    int classes = dt_model_num_classes(m);
    for (int i = 0; i < rows; i++) y[i] = (uint8_t)dt_rng_below(&r, (uint32_t)classes);
    /* make batch-norm and layer-norm parameters non-trivial */
    float *params = dt_model_params(m);
    for (int t = 0; t < dt_model_num_tensors(m); t++) {
        const dt_tensor_view *v = dt_model_tensor(m, t);
        if (strstr(v->name, "bn") || strstr(v->name, "shortcut.1") || strstr(v->name, "ln"))
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

/* Output position t of a causal model does not depend on its inputs after t: changing the
 * input at position s leaves every output before s as it was, bit for bit (the masked
 * probabilities are exact zeros), and changes some at s. spec NULL: a 2-layer GPT; tokens: its
 * input is token ids. */
static void causal(const char *label, const char *spec, int tokens) {
    char *gpt = spec ? NULL : dt_gpt_spec(2, 2, 16, 9, 13);
    dt_model *m = NULL;
    CHECK_MSG(dt_model_from_spec(spec ? spec : gpt, label, &m) == DT_OK, "%s: %s", label, dt_last_error());
    free(gpt);
    if (!m) return;
    const int batch = 2;
    dt_model_init(m, 9);
    CHECK(dt_model_reserve(m, batch) == DT_OK);
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    const int T = h, k = dt_model_num_classes(m) * (dt_model_positions(m) == T ? 1 : 0);
    CHECK_MSG(k > 0, "%s: the output is not a sequence", label);
    const size_t in = (size_t)batch * c * T, out = (size_t)batch * T * k;
    float *x = malloc(in * sizeof *x), *z0 = malloc(out * sizeof *z0);
    dt_rng r;
    dt_rng_seed(&r, 4);
    for (size_t i = 0; i < in; i++) x[i] = tokens ? (float)dt_rng_below(&r, 13) : 2.0f * dt_rng_uniform(&r) - 1.0f;
    memcpy(z0, dt_model_forward(m, x, batch, 0), out * sizeof *z0);
    int bad = 0, moved = 0;
    for (int s = 1; s < T; s++) {
        float *xs = malloc(in * sizeof *xs);
        memcpy(xs, x, in * sizeof *xs);
        for (int b = 0; b < batch; b++)
            for (int j = 0; j < c; j++) {
                float *v = &xs[((size_t)b * T + s) * c + j];
                *v = tokens ? (float)(((int)*v + 5) % 13) : *v + 0.5f;
            }
        const float *z = dt_model_forward(m, xs, batch, 0);
        for (int b = 0; b < batch; b++) {
            const size_t row = (size_t)b * T * k;
            bad += memcmp(z + row, z0 + row, (size_t)s * k * sizeof *z) != 0;
            moved += memcmp(z + row + (size_t)s * k, z0 + row + (size_t)s * k, (size_t)k * sizeof *z) != 0;
        }
        free(xs);
    }
    printf("%-20s causal: %d of %d changed inputs moved an earlier output, %d moved their own position's\n", label,
           bad, batch * (T - 1), moved);
    CHECK_MSG(bad == 0, "%s: an output before the changed position moved (%d times)", label, bad);
    CHECK_MSG(moved == batch * (T - 1), "%s: the changed position's output moved only %d of %d times", label, moved,
              batch * (T - 1));
    free(x); free(z0);
    dt_model_free(m);
}

/* The vectorised kernels under GELU, the attention and the loss against their definitions in
 * double, to float precision (finite differences see only a few percent: GELU's gradient with
 * 2 k1 x^2 for 3 k1 x^2 passed them), on 1027 values from -8 to 8 (a tail of 3 past the last
 * 8-wide piece), written and added to. */
static void kernels(void) {
    enum { N = 1027 };
    static float x[N], y[N], g[N], dy[N];
    const double k0 = sqrt(2.0 / 3.14159265358979323846), k1 = 0.044715;
    for (int i = 0; i < N; i++) { x[i] = -8.0f + 16.0f * i / (N - 1); dy[i] = 0.5f + (float)(i % 7) / 7.0f; g[i] = 1.0f; }
    dt_vgelu(y, x, N);
    dt_vgelu_grad(g, x, dy, N, 1);
    double wy = 0, wg = 0, we = 0;
    for (int i = 0; i < N; i++) {
        const double v = x[i], u = k0 * (v + k1 * v * v * v), t = tanh(u);
        const double ry = 0.5 * v * (1 + t), rd = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k0 * (1 + 3 * k1 * v * v);
        /* GELU's scale is x's (for x << 0 it is x times a tail, where 1 + tanh cancels in float, as
         * in PyTorch); its gradient's 1 */
        wy = fmax(wy, fabs(y[i] - ry) / (1e-3 + fabs(v)));
        wg = fmax(wg, fabs(g[i] - (1.0 + dy[i] * rd)) / (1.0 + fabs(dy[i] * rd)));
    }
    /* exp, shifted, and its sum: a softmax's */
    double sum = 0;
    for (int i = 0; i < N; i++) sum += exp((double)x[i] - 3.0);
    const float s = dt_vexp_sum(y, x, N, 3.0f);
    for (int i = 0; i < N; i++) we = fmax(we, fabs(y[i] - exp((double)x[i] - 3.0)) / exp((double)x[i] - 3.0));
    printf("kernels: GELU %.1e, its gradient %.1e, exp %.1e, exp's sum %.1e (relative), max %g\n", wy, wg, we,
           fabs(s - sum) / sum, (double)dt_vmax(x, N));
    CHECK_MSG(wy < 2e-6 && wg < 4e-6, "GELU: %.3g, its gradient %.3g from the definition", wy, wg);
    /* (x - 3 is rounded to float first: half an ulp of the argument, 5e-7 of exp near 8) */
    CHECK_MSG(we < 1e-6 && fabs(s - sum) < 1e-5 * sum, "exp: %.3g, its sum %.3g", we, fabs(s - sum) / sum);
    CHECK(dt_vmax(x, N) == 8.0f && dt_vmax(x, 5) == x[4]);
}

int main(void) {
    dt_runtime_init();
    kernels();
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
    /* sequences: each layer that takes one, per position, a loss at every position */
    gradcheck("linear-seq", "input seq=4 c=5\nlinear out=3\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("linear-seq-nobias", "input seq=4 c=5\nlinear out=3 bias=0\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("embed", "input seq=5\nembed vocab=7 out=6\nlinear out=4\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("posembed", "input seq=5 c=4\nposembed\nlinear out=3\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    /* C = 16 through the 8-wide rows, 6 and an image's 18 values through the scalar ones */
    gradcheck("layernorm", "input seq=5 c=16\nlayernorm eps=1e-5\nlinear out=3\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("layernorm-nobias", "input seq=3 c=6\nlayernorm bias=0\nlinear out=3\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("layernorm-image", "input c=2 h=3 w=3\nlayernorm\nflatten\nlinear out=4\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("gelu", "input seq=4 c=5\ngelu\nlinear out=3\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("attention-1head", "input seq=6 c=12\nattention heads=1\nlinear out=3\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("attention-2heads", "input seq=7 c=24\nattention heads=2\nlinear out=3\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("attention-4heads", "input seq=5 c=24\nattention heads=4\nlinear out=3\n", 3, 1, 200, 1.0, 0.9999, 0.1);
    /* 70 positions: the GEMMs by blocks of 32 rows and columns, a last block of 6 */
    gradcheck("attention-blocks", "input seq=70 c=6\nattention heads=2\nlinear out=3\n", 1, 1, 300, 1.0, 0.9999, 0.1);
    /* the input gradient through the fused projection, added to (the residual) */
    gradcheck("attention-residual", "input seq=5 c=8 \nlinear out=24 name=qkv\nattention heads=2\nlinear out=8\nadd in=input\n"
              "layernorm\nlinear out=3\n", 2, 1, 200, 1.0, 0.9999, 0.1);
    gradcheck("tied-head", "input seq=5\nembed vocab=6 out=4 name=wte\nlinear out=6 bias=0 tie=wte\n", 3, 1, 200, 1.0,
              0.9999, 0.1);
    gradcheck("tied-head-bias", "input seq=4\nembed vocab=5 out=8 name=wte\nlayernorm\nlinear out=5 tie=wte\n", 3, 1,
              200, 1.0, 0.9999, 0.1);
    /* whole models */
    char *cnn1 = dt_model_spec_text("cnn1"), *res = dt_model_spec_text("resblock-tiny");
    CHECK(cnn1 && res);
    if (cnn1) gradcheck("cnn1", cnn1, 4, 1, 60, 0.90, 0.99, 0.2);
    if (res) gradcheck("resblock-tiny", res, 4, 1, 60, 0.90, 0.99, 0.2);
    free(cnn1);
    free(res);
    /* a GPT of gpt-tiny's structure, 2 layers: every tensor, the tied head's two shares */
    char *gpt = dt_gpt_spec(2, 2, 8, 6, 11);
    CHECK(gpt != NULL);
    if (gpt) gradcheck("gpt-2-layers", gpt, 3, 1, 60, 1.0, 0.9999, 0.1);
    free(gpt);
    causal("attention", "input seq=7 c=24\nattention heads=2\n", 0);
    causal("attention-blocks", "input seq=70 c=6\nattention heads=2\n", 0);
    causal("gpt", NULL, 1);
    return test_summary("test_gradcheck");
}
