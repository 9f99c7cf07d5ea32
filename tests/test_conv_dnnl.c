/* oneDNN's convolution (src/layers/conv_dnnl.c) against dtrain's own (im2col + sgemm, checked
 * against finite differences in test_gradcheck): the same output (with and without the fused
 * ReLU), input gradient (written and added to), weight and bias gradients, on the zoo's kinds
 * of shapes (3x3 pad 1, strided, 5x5 without padding, 1x1, an odd size whose last window does
 * not fit), with and without bias; in fp32 and, where oneDNN has bf16, in bf16 against the own
 * path on the same bf16-rounded operands. Linear layers' and attention's bf16 products likewise.
 * Then the engine's rule and whole models through it.
 * Built only with oneDNN (DTRAIN_WITH_DNNL). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtrain.h"
#include "layers/attention_dnnl.h"
#include "layers/bf16_array.h"
#include "layers/conv_dnnl.h"
#include "layers/linear_dnnl.h"

static float *values(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

/* sqrt(sum (a-b)^2 / sum b^2) */
static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double tol = 1e-5;

static void compare(const char *what, const char *shape, const float *a, const float *b, size_t n) {
    const double e = rel_err(a, b, n);
    CHECK_MSG(e < tol, "%s (%s): relative error %.2e", what, shape, e);
}

/* bf16: the operands rounded as --precision bf16 rounds them (models/precision.c) */
static void round_all(float *v, size_t n, int bf16) {
    if (bf16) dt_bf16_round(v, v, n);
}

static void one_shape(int batch, int ic, int hw, int oc, int k, int stride, int pad, int bias, int relu, int bf16) {
    dt_node n;
    memset(&n, 0, sizeof n);
    n.ops = &dt_layer_conv;
    n.ic = ic; n.ih = hw; n.iw = hw;
    n.out = oc; n.k = k; n.stride = stride; n.pad = pad; n.bias = bias; n.relu_out = relu;
    CHECK(dt_layer_conv.setup(&n) == DT_OK);
    char shape[128];
    snprintf(shape, sizeof shape, "batch %d, %dx%dx%d, k%d s%d p%d -> %d%s%s, %s", batch, ic, hw, hw, k, stride, pad,
             oc, bias ? ", bias" : "", relu ? ", ReLU" : "", bf16 ? "bf16" : "fp32");
    const size_t in = (size_t)batch * dt_node_in_size(&n), out = (size_t)batch * dt_node_out_size(&n),
                 nw = (size_t)oc * ic * k * k;
    float *x = values(in, 1), *w = values(nw, 2), *b = values((size_t)oc, 3), *dy = values(out, 4);
    float *y = values(out, 5), *dx = values(in, 6), *gw = values(nw, 7), *gb = values((size_t)oc, 8);
    float *y2 = values(out, 9), *dx2 = values(in, 10), *gw2 = values(nw, 11), *gb2 = values((size_t)oc, 12);
    float *work = values(dt_layer_conv.workspace(&n, batch) + 16, 13);
    round_all(x, in, bf16); round_all(w, nw, bf16); round_all(b, (size_t)oc, bf16); round_all(dy, out, bf16);
    /* dtrain's own path */
    n.w[0] = w; n.w[1] = b; n.g[0] = gw; n.g[1] = gb; n.y = y; n.dy = dy;
    dt_pass p = {.batch = batch, .train = 1, .x = {x, NULL}, .dx = {dx, NULL}, .work = work};
    dt_layer_conv.forward(&n, &p);
    dt_layer_conv.backward(&n, &p);
    /* oneDNN's */
    dt_conv_dnnl *plan = dt_conv_dnnl_plan(&n, batch, bf16 ? DT_CONV_BF16 : DT_CONV_FP32);
    CHECK_MSG(plan != NULL, "%s: no plan: %s", shape, dt_last_error());
    if (plan) {
        CHECK_MSG(!bf16 || !dt_dnnl_bf16_hw() || strstr(dt_conv_dnnl_impl(plan), "bf16"),
                  "%s: not oneDNN's bf16 kernels: %s", shape, dt_conv_dnnl_impl(plan));
        CHECK(dt_conv_dnnl_forward(plan, x, w, bias ? b : NULL, y2) == DT_OK);
        CHECK(dt_conv_dnnl_backward(plan, x, w, dy, dx2, 0, gw2, bias ? gb2 : NULL) == DT_OK);
        /* bf16: the output and the input gradient leave oneDNN in bf16 (what the model stores
         * of them), the parameter gradients in fp32 (sums of exact products, in another order) */
        tol = bf16 ? 4e-3 : 1e-5;
        compare("output", shape, y2, y, out);
        compare("input gradient", shape, dx2, dx, in);
        tol = bf16 ? 1e-4 : 1e-5;
        compare("weight gradient", shape, gw2, gw, nw);
        if (bias) compare("bias gradient", shape, gb2, gb, (size_t)oc);
        /* added to what another consumer wrote: dx2 + dX = 2 dX */
        CHECK(dt_conv_dnnl_backward(plan, x, w, dy, dx2, 1, gw2, bias ? gb2 : NULL) == DT_OK);
        for (size_t i = 0; i < in; i++) dx[i] *= 2;
        tol = bf16 ? 4e-3 : 1e-5;
        compare("input gradient, added", shape, dx2, dx, in);
        tol = bf16 ? 1e-4 : 1e-5;
        compare("weight gradient, again", shape, gw2, gw, nw);
        dt_conv_dnnl_free(plan);
    }
    /* bf16 activations as the model stores them (DT_CONV_BF16_IO): the same, to bf16 */
    dt_conv_dnnl *io = bf16 ? dt_conv_dnnl_plan(&n, batch, DT_CONV_BF16_IO) : NULL;
    CHECK_MSG(!bf16 || io, "%s: no plan with bf16 activations: %s", shape, dt_last_error());
    if (io) {
        uint16_t *x16 = malloc(in * 2), *y16 = malloc(out * 2), *dy16 = malloc(out * 2), *dx16 = malloc(in * 2);
        dt_bf16_store(x16, x, in);
        dt_bf16_store(dy16, dy, out);
        CHECK(dt_conv_dnnl_forward16(io, x16, w, bias ? b : NULL, y16) == DT_OK);
        dt_bf16_load(y2, y16, out);
        tol = 4e-3;
        compare("output, bf16 activations", shape, y2, y, out);
        for (size_t i = 0; i < in; i++) dx[i] *= 0.5f; /* dX again (doubled above) */
        CHECK(dt_conv_dnnl_backward16(io, x16, w, dy16, dx16, 0, gw2, bias ? gb2 : NULL) == DT_OK);
        dt_bf16_load(dx2, dx16, in);
        compare("input gradient, bf16 activations", shape, dx2, dx, in);
        CHECK(dt_conv_dnnl_backward16(io, x16, w, dy16, dx16, 1, gw2, bias ? gb2 : NULL) == DT_OK);
        dt_bf16_load(dx2, dx16, in);
        for (size_t i = 0; i < in; i++) dx[i] *= 2;
        compare("input gradient added, bf16 activations", shape, dx2, dx, in);
        tol = 1e-4;
        compare("weight gradient, bf16 activations", shape, gw2, gw, nw);
        if (bias) compare("bias gradient, bf16 activations", shape, gb2, gb, (size_t)oc);
        CHECK(dt_conv_dnnl_forward(io, x, w, b, y2) != DT_OK); /* fp32 memories: refused */
        free(x16); free(y16); free(dy16); free(dx16);
        dt_conv_dnnl_free(io);
    }
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(gw); free(gb);
    free(y2); free(dx2); free(gw2); free(gb2); free(work);
}

static void shapes(int bf16) {
    one_shape(4, 3, 32, 64, 3, 1, 1, 1, 0, bf16);    /* resnet18-cifar's first */
    one_shape(3, 64, 16, 128, 3, 2, 1, 0, 1, bf16);  /* strided, no bias, ReLU */
    one_shape(2, 128, 8, 128, 1, 2, 0, 0, 0, bf16);  /* 1x1 shortcut */
    one_shape(5, 1, 28, 10, 5, 1, 0, 1, 1, bf16);    /* cnn1's first, ReLU */
    one_shape(2, 10, 12, 20, 5, 1, 0, 1, 0, bf16);   /* cnn1's second */
    one_shape(2, 16, 15, 32, 3, 2, 1, 1, 1, bf16);   /* odd size: the last window does not fit; ReLU */
    one_shape(1, 96, 13, 192, 3, 1, 1, 1, 0, bf16);  /* alexnet-like */
}

/* A linear layer's bf16 GEMMs on oneDNN against the fp32 GEMM on the same bf16 values (the
 * layer with DTRAIN_ENGINE=own): output (ReLU'd or not), input and weight gradients. */
static void linear_shape(int batch, int in, int out, int bias, int relu) {
    dt_node n;
    memset(&n, 0, sizeof n);
    n.ops = &dt_layer_linear;
    n.ic = in; n.ih = n.iw = 1; n.out = out; n.bias = bias; n.relu_out = relu;
    CHECK(dt_layer_linear.setup(&n) == DT_OK);
    char shape[96];
    snprintf(shape, sizeof shape, "linear batch %d, %d -> %d%s%s", batch, in, out, bias ? ", bias" : "", relu ? ", ReLU" : "");
    const size_t nx = (size_t)batch * in, ny = (size_t)batch * out, nw = (size_t)in * out;
    float *x = values(nx, 31), *w = values(nw, 32), *b = values((size_t)out, 33), *dy = values(ny, 34);
    float *y = values(ny, 35), *dx = values(nx, 36), *gw = values(nw, 37), *gb = values((size_t)out, 38);
    float *y2 = values(ny, 39), *dx2 = values(nx, 40), *gw2 = values(nw, 41);
    round_all(x, nx, 1); round_all(w, nw, 1); round_all(b, (size_t)out, 1); round_all(dy, ny, 1);
    setenv("DTRAIN_ENGINE", "own", 1);
    n.w[0] = w; n.w[1] = b; n.g[0] = gw; n.g[1] = gb; n.y = y; n.dy = dy;
    dt_pass p = {.batch = batch, .train = 1, .x = {x, NULL}, .dx = {dx, NULL}, .bf16 = 1};
    dt_layer_linear.forward(&n, &p);
    dt_layer_linear.backward(&n, &p);
    dt_linear_dnnl *plan = dt_linear_dnnl_plan(&n, batch);
    CHECK_MSG(plan != NULL, "%s: no plan: %s", shape, dt_last_error());
    if (plan) {
        CHECK_MSG(strstr(dt_linear_dnnl_impl(plan), "bf16") || strstr(dt_linear_dnnl_impl(plan), "brg"),
                  "%s: not oneDNN's bf16 kernels: %s", shape, dt_linear_dnnl_impl(plan));
        CHECK(dt_linear_dnnl_forward(plan, x, w, bias ? b : NULL, y2) == DT_OK);
        CHECK(dt_linear_dnnl_backward(plan, x, w, dy, dx2, 0, gw2) == DT_OK);
        tol = 1e-5; /* fp32 outputs of exact bf16 products, summed in another order */
        compare("output", shape, y2, y, ny);
        compare("input gradient", shape, dx2, dx, nx);
        compare("weight gradient", shape, gw2, gw, nw);
        CHECK_MSG(dt_linear_dnnl_backward(plan, x, w, dy, dx2, 1, gw2) != DT_OK, "%s: dX added to: refused", shape);
        dt_linear_dnnl_free(plan);
    }
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(gw); free(gb); free(y2); free(dx2); free(gw2);
}

/* Causal attention, every example's and head's products in oneDNN's bf16 matmul (full T x T,
 * masked by the layer) against the layer's own fp32 products over the causal blocks, on the same
 * bf16 inputs: the output and dQ, dK, dV to bf16's rounding (P and dS are rounded where they
 * enter oneDNN's products); dX added to goes to the own path. */
static void attention_shape(int batch, int T, int C, int H) {
    dt_node n;
    memset(&n, 0, sizeof n);
    n.ops = &dt_layer_attention;
    n.ic = 3 * C; n.ih = T; n.iw = 1; n.heads = H;
    CHECK(dt_layer_attention.setup(&n) == DT_OK);
    char shape[96];
    snprintf(shape, sizeof shape, "attention batch %d, T %d, C %d, %d heads", batch, T, C, H);
    const size_t nx = (size_t)batch * T * 3 * C, ny = (size_t)batch * T * C;
    const size_t naux = dt_layer_attention.aux_bytes(&n, batch) / sizeof(float), nw = dt_layer_attention.workspace(&n, batch);
    float *x = values(nx, 51), *dy = values(ny, 52), *y = values(ny, 53), *dx = values(nx, 54), *y2 = values(ny, 55);
    float *dx2 = values(nx, 56), *aux = values(naux, 57), *work = values(nw, 58);
    for (size_t i = 0; i < nx; i++) x[i] *= 8; /* scores of a few units: a softmax that is not flat */
    round_all(x, nx, 1); round_all(dy, ny, 1);
    n.aux = aux; n.y = y; n.dy = dy;
    dt_pass p = {.batch = batch, .train = 1, .x = {x, NULL}, .dx = {dx, NULL}, .bf16 = 1, .work = work};
    dt_layer_attention.forward(&n, &p);
    dt_layer_attention.backward(&n, &p);
    n.kernel = DT_KERNEL_ONEDNN_BF16; /* a plan's choice: the only way to it */
    dt_attn_dnnl *a = dt_attn_dnnl_get(&n, batch, 1);
    CHECK_MSG(a != NULL, "%s: no plan: %s", shape, dt_last_error());
    if (a) {
        CHECK_MSG(strstr(dt_attn_dnnl_impl(a), "bf16") || strstr(dt_attn_dnnl_impl(a), "brg"),
                  "%s: not oneDNN's bf16 kernels: %s", shape, dt_attn_dnnl_impl(a));
        n.y = y2;
        dt_layer_attention.forward(&n, &p);
        p.dx[0] = dx2;
        dt_layer_attention.backward(&n, &p);
        tol = 5e-3; /* P and dS in bf16, 2^-9 relative each: 1.1-1.7e-3 measured */
        compare("output", shape, y2, y, ny);
        compare("input gradient (dQ, dK, dV)", shape, dx2, dx, nx);
        CHECK_MSG(rel_err(y2, y, ny) > 0, "%s: oneDNN's output the own one's bit for bit: not oneDNN's path", shape);
        /* added to: the own path adds dX to what is there (an overwrite would leave 0) */
        const int acc[2] = {1, 0};
        memcpy(dx2, dx, nx * sizeof *dx2);
        memcpy(p.dx_acc, acc, sizeof acc);
        dt_layer_attention.backward(&n, &p);
        for (size_t i = 0; i < nx; i++) dx2[i] -= dx[i]; /* the own gradient from oneDNN's P */
        tol = 1e-5; /* its P: exact bf16 products summed in another order */
        compare("input gradient added to", shape, dx2, dx, nx);
        memset(p.dx_acc, 0, sizeof p.dx_acc);
    }
    dt_attn_dnnl_release(&n);
    free(x); free(dy); free(y); free(dx); free(y2); free(dx2); free(aux); free(work);
}

/* The rule and DTRAIN_ENGINE: which nodes go to oneDNN. */
static void rule(void) {
    dt_node small, wide;
    memset(&small, 0, sizeof small);
    memset(&wide, 0, sizeof wide);
    small.ic = 3;
    wide.ic = 64;
    setenv("DTRAIN_ENGINE", "auto", 1);
    CHECK_MSG(dt_conv_dnnl_wanted(&wide, 0) && !dt_conv_dnnl_wanted(&small, 0),
              "auto, fp32: oneDNN from 64 input channels, not for 3");
    CHECK_MSG(!dt_conv_dnnl_wanted(&small, 1), "auto, bf16: not for 3 input channels");
    /* 3x3 stride 1 with 32 input channels: oneDNN where it has its Winograd (AVX-512), unless
     * DTRAIN_WINOGRAD=0; 5x5 with 32: not */
    dt_node wino = small;
    wino.ic = 32; wino.k = 3; wino.stride = 1;
    CHECK_MSG(dt_conv_dnnl_wanted(&wino, 0) == dt_dnnl_winograd_hw(), "auto, fp32: 32 channels 3x3 s1 %s",
              dt_dnnl_winograd_hw() ? "with Winograd: oneDNN" : "without Winograd: own");
    setenv("DTRAIN_WINOGRAD", "0", 1);
    CHECK_MSG(!dt_conv_dnnl_wanted(&wino, 0), "auto, fp32, DTRAIN_WINOGRAD=0: 32 channels stay own");
    unsetenv("DTRAIN_WINOGRAD");
    wino.k = 5;
    CHECK_MSG(!dt_conv_dnnl_wanted(&wino, 0), "auto, fp32: 32 channels 5x5 stay own");
    setenv("DTRAIN_ENGINE", "onednn", 1);
    CHECK(dt_conv_dnnl_wanted(&small, 0) && dt_conv_dnnl_wanted(&small, 1));
    setenv("DTRAIN_ENGINE", "own", 1);
    CHECK(!dt_conv_dnnl_wanted(&wide, 0) && !dt_conv_dnnl_wanted(&wide, 1));
}

/* A training step of a whole model with every conv on oneDNN against the own path: the same
 * loss and gradients (fp32: to rounding; bf16: to bf16's), and dt_model_engines says which. */
static void whole_model(const char *spec, dt_precision precision) {
    const int batch = 8;
    float *grads[2] = {NULL, NULL};
    float loss[2] = {0, 0};
    size_t np = 0;
    char engines[2][128];
    for (int e = 0; e < 2; e++) {
        setenv("DTRAIN_ENGINE", e ? "onednn" : "own", 1); /* (conv and linear) */
        dt_model *m = NULL;
        CHECK_MSG(dt_model_from_name(spec, &m) == DT_OK, "%s: %s", spec, dt_last_error());
        if (!m) return;
        dt_model_init(m, 1);
        CHECK(dt_model_set_precision(m, precision) == DT_OK);
        CHECK(dt_model_reserve(m, batch) == DT_OK);
        int c, h, w;
        dt_model_input_shape(m, &c, &h, &w);
        const size_t in = (size_t)batch * c * h * w;
        float *x = values(in, 21);
        uint8_t labels[8];
        for (int i = 0; i < batch; i++) labels[i] = (uint8_t)(i % dt_model_num_classes(m));
        dt_model_forward(m, x, batch, 1);
        loss[e] = dt_model_backward(m, labels, NULL);
        np = dt_model_num_params(m);
        grads[e] = malloc(np * sizeof(float));
        memcpy(grads[e], dt_model_grads(m), np * sizeof(float));
        dt_model_engines(m, engines[e], sizeof engines[e]);
        free(x);
        dt_model_free(m);
    }
    const int bf16 = precision == DT_PRECISION_BF16 && dt_dnnl_bf16_hw();
    const char *own = precision == DT_PRECISION_BF16 ? "conv:own:2,linear:own:2" : "conv:own:2";
    CHECK_MSG(strcmp(engines[0], own) == 0, "%s own: engines \"%s\"", spec, engines[0]);
    CHECK_MSG(strcmp(engines[1], bf16 ? "conv:oneDNN-bf16:2,linear:oneDNN-bf16:2"
                                 : precision == DT_PRECISION_BF16 ? "conv:oneDNN:2,linear:own:2" : "conv:oneDNN:2") == 0,
              "%s onednn: engines \"%s\"", spec, engines[1]);
    CHECK_MSG(fabsf(loss[0] - loss[1]) < (precision == DT_PRECISION_BF16 ? 1e-2f : 1e-5f), "%s %s: loss %g vs %g", spec,
              dt_precision_name(precision), loss[0], loss[1]);
    const double e = rel_err(grads[1], grads[0], np);
    CHECK_MSG(e < (precision == DT_PRECISION_BF16 ? 2e-2 : 1e-4), "%s %s: gradients differ by %.2e", spec,
              dt_precision_name(precision), e);
    free(grads[0]);
    free(grads[1]);
}

int main(void) {
    rule();
    setenv("DTRAIN_ENGINE", "own", 1); /* the layer's own path is the reference */
    shapes(0);
    /* bf16: where this CPU has bf16 arithmetic; oneDNN emulates it on other AVX-512 CPUs (checked
     * too when it makes a plan); it has none on AVX2 only */
    if (dt_dnnl_bf16_hw()) {
        shapes(1);
    } else {
        dt_node n;
        memset(&n, 0, sizeof n);
        n.ops = &dt_layer_conv;
        n.ic = 16; n.ih = n.iw = 8; n.out = 16; n.k = 3; n.stride = 1; n.pad = 1;
        CHECK(dt_layer_conv.setup(&n) == DT_OK);
        dt_conv_dnnl *p = dt_conv_dnnl_plan(&n, 2, DT_CONV_BF16);
        printf("test_conv_dnnl: this CPU has no bf16 arithmetic for oneDNN: bf16 plans %s\n",
               p ? "made (emulated): checked" : "not made: not checked (--precision bf16 computes in fp32 here)");
        if (p) shapes(1);
        dt_conv_dnnl_free(p);
    }
    if (dt_dnnl_bf16_hw()) {
        linear_shape(8, 300, 40, 1, 0);
        linear_shape(5, 1000, 130, 0, 1);
        linear_shape(64, 9216, 128, 1, 1); /* downpour-cnn's fc1 */
        attention_shape(2, 64, 128, 4);  /* gpt-tiny's */
        attention_shape(1, 256, 384, 6); /* gpt-small's */
        attention_shape(3, 7, 12, 2);    /* odd sizes */
    }
    whole_model("cnn1", DT_PRECISION_FP32);
    whole_model("cnn1", DT_PRECISION_BF16);
    return test_summary("test_conv_dnnl");
}
