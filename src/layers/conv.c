/* 2-D convolution, NCHW, weight [out, in, k, k], via im2col + sgemm: the reference loops and the
 * dispatch to the CPU's kernels (conv_avx512.h, conv_avx2.h, conv_winograd.h, conv_dnnl.h).
 * Images are multiplied in groups: the columns of G images form one [C*k*k][G*OH*OW] matrix and
 * one GEMM, G chosen so that N = G*OH*OW is wide enough (small late feature maps: per-image
 * GEMMs of N = 16..64 re-pack the whole weight matrix for every image). Few output channels or
 * large maps use G = 1 and write straight into the output. Backward recomputes the columns of
 * each group into the cache-resident workspace: cheaper than keeping them for the whole batch
 * (measured: keeping them was 5-10% slower on cnn1 and downpour-cnn, memory traffic). */
#include "layers/conv_avx2.h"
#include "layers/conv_avx512.h"
#include "layers/conv_dnnl.h"
#include "layers/conv_winograd.h"
#include "layers/gemm.h"
#include "layers/kernels.h"
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Target GEMM width (columns) per group of images. */
#define CONV_GEMM_N 1024

static dt_status conv_setup(dt_node *n) {
    if (n->out < 1) return dt_fail(DT_ERR_ARG, "conv needs out=N with N >= 1");
    if (n->k < 1) return dt_fail(DT_ERR_ARG, "conv needs k=K with K >= 1");
    if (n->stride < 1) n->stride = 1;
    if (n->pad < 0) return dt_fail(DT_ERR_ARG, "conv pad must be >= 0");
    int oh = (n->ih + 2 * n->pad - n->k) / n->stride + 1;
    int ow = (n->iw + 2 * n->pad - n->k) / n->stride + 1;
    if (n->ih + 2 * n->pad < n->k || n->iw + 2 * n->pad < n->k)
        return dt_fail(DT_ERR_ARG, "conv kernel %d is larger than the padded input %dx%d", n->k,
                       n->ih + 2 * n->pad, n->iw + 2 * n->pad);
    n->oc = n->out; n->oh = oh; n->ow = ow;
    n->nparam = n->bias ? 2 : 1;
    n->ptens[0] = (dt_ptensor){"weight", 4, {n->out, n->ic, n->k, n->k}};
    n->ptens[1] = (dt_ptensor){"bias", 1, {n->out, 0, 0, 0}};
    double ckk = (double)n->ic * n->k * n->k;
    n->flops = 2.0 * n->out * ckk * oh * ow + (n->bias ? (double)n->out * oh * ow : 0);
    return DT_OK;
}

static void conv_init(dt_node *n, dt_rng *rng) {
    float bound = 1.0f / sqrtf((float)(n->ic * n->k * n->k));
    dt_init_uniform(n->w[0], dt_ptensor_numel(&n->ptens[0]), bound, rng);
    if (n->bias) dt_init_uniform(n->w[1], (size_t)n->out, bound, rng);
}

/* Images per GEMM for a batch of this size. */
static int group_images(const dt_node *n, int batch) {
    /* Few output channels: OpenBLAS's small-matrix kernels do per-image GEMMs best (measured:
     * 20x64x250 at 50 GFLOP/s, grouped 20x1024x250 at 19). */
    if (n->oc < 64) return 1;
    /* maps of 512+ pixels are wide enough alone (downpour-cnn's 24x24: per image measured
     * faster than pairs, whose columns no longer fit in L2) */
    int ohw = n->oh * n->ow, g = CONV_GEMM_N / ohw;
    return g < 1 ? 1 : g > batch ? batch : g;
}

/* Row stride of a group's column matrix: 16 floats of slack after every row, because the
 * AVX-512 im2col writes whole 16-float vectors (a row's last vector may run into the slack). */
static size_t col_ld(int g, int ohw) { return (((size_t)g * ohw + 15) & ~(size_t)15) + 16; }

/* Row stride of im2row's matrix: the same 16 floats of slack (its stores are 16 wide too). */
static size_t row_ld(int ckk) { return (((size_t)ckk + 15) & ~(size_t)15) + 16; }

/* The weight gradient dW [oc x ckk] = dY [oc x K] . X^T, K = pixels of a group: from the rows of
 * im2row (X^T, [K x ckk]) when images go one at a time and ckk >= K, else from im2col's
 * columns. OpenBLAS runs the row-major NN product 1.2-1.9x faster than NT on such shapes
 * (cnn1's conv2: 20 x 250, K = 64, with the SkylakeX and Haswell kernels), and slower where K
 * is the long side (cnn1's conv1: 10 x 25, K = 576). Grouped images (64+ channels, the CIFAR
 * models) keep the columns: not measured there. */
static int dw_from_rows(const dt_node *n, int g) {
    return g == 1 && n->ic * n->k * n->k >= n->oh * n->ow;
}

/* Floats of one group's columns (im2col, as forward and the columns' gradient lay them out). */
static size_t col_floats(const dt_node *n, int g) {
    return col_ld(g, n->oh * n->ow) * (size_t)(n->ic * n->k * n->k);
}

/* Floats of the matrix backward takes dW from for one group: im2row's rows or the columns. */
static size_t dw_input_floats(const dt_node *n, int g) {
    const int ckk = n->ic * n->k * n->k;
    return dw_from_rows(n, g) ? (size_t)g * n->oh * n->ow * row_ld(ckk) : col_floats(n, g);
}

/* Whether forward and the input gradient take Winograd (conv_winograd.h): the rule's, or a plan's */
static int winograd(const dt_node *n) {
    return n->kernel == DT_KERNEL_OWN_WINOGRAD ? dt_winograd_fits(n->k, n->stride, n->pad)
                                               : dt_winograd_wanted(n->k, n->stride, n->pad);
}

static size_t conv_workspace(const dt_node *n, int batch) {
    const int g = group_images(n, batch);
    /* forward's columns or backward's dW input (the larger), + the columns' gradient + dY
     * (or Y), of one group */
    const size_t cols = col_floats(n, g), in = dw_input_floats(n, g);
    size_t ws = (in > cols ? in : cols) + cols + (size_t)g * n->oh * n->ow * n->oc;
    /* forward, and the input gradient (a convolution of dY, oc -> ic channels), where Winograd
     * may run: a plan may choose it after the model is reserved (dtrain tune) */
    if (winograd(n) || dt_winograd_fits(n->k, n->stride, n->pad)) {
        const size_t f = dt_winograd_workspace(n->ic, n->oc, n->oh, n->ow, dt_winograd_group(n->oh, n->ow, batch));
        const size_t b = dt_winograd_workspace(n->oc, n->ic, n->ih, n->iw, dt_winograd_group(n->ih, n->iw, batch));
        if (f > ws) ws = f;
        if (b > ws) ws = b;
    }
    return ws;
}

/* r[ox] = xr[ox*s + off] for ox in [lo, hi), 0 elsewhere: zeros, a copy, zeros, without a test
 * per element (the portable path's cost on a CPU without AVX-512: a branch per element kept the
 * loop scalar; stride 1's copy is contiguous and vectorizes) */
static void im2col_row(float *restrict r, const float *restrict xr, int s, int off, int lo, int hi, int ow) {
    if (lo > ow) lo = ow; /* im2row's taps may lie wholly outside the image */
    if (hi > ow) hi = ow;
    if (hi < lo) hi = lo;
    for (int ox = 0; ox < lo; ox++) r[ox] = 0.0f;
    if (s == 1)
        for (int ox = lo; ox < hi; ox++) r[ox] = xr[ox + off];
    else
        for (int ox = lo; ox < hi; ox++) r[ox] = xr[ox * s + off];
    for (int ox = hi; ox < ow; ox++) r[ox] = 0.0f;
}

/* col[(c*k+ki)*k+kj][oy*ow+ox] (row stride ld) = x[c][oy*s-p+ki][ox*s-p+kj] (0 outside).
 * Output rows are written in increasing address order. */
static void im2col(const float *restrict x, int c, int h, int w, int k, int s, int p, int oh,
                   int ow, float *restrict col, size_t ld) {
#ifdef DT_KERNELS_AVX512
    if (s == 1 && ow <= 64 && dt_cpu_avx512()) { dt_im2col_s1_avx512(x, c, h, w, k, p, oh, ow, col, ld); return; }
    if (s == 1 && ow <= 64 && dt_cpu_avx2()) { dt_im2col_s1_avx2(x, c, h, w, k, p, oh, ow, col, ld); return; }
#endif
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + (size_t)((ci * k + ki) * k + kj) * ld;
                const float *xc = x + (size_t)ci * h * w;
                int lo, hi;
                dt_conv_valid_cols(w, kj, s, p, ow, &lo, &hi);
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * s - p + ki;
                    float *r = row + (size_t)oy * ow;
                    if (iy < 0 || iy >= h) { memset(r, 0, (size_t)ow * sizeof *r); continue; }
                    im2col_row(r, xc + (size_t)iy * w, s, kj - p, lo, hi, ow);
                }
            }
}

/* The adjoint of im2col: x (+)= the columns (row stride ld) summed back into the image;
 * acc = 0 overwrites x. */
static void col2im(const float *restrict col, int c, int h, int w, int k, int s, int p, int oh,
                   int ow, size_t ld, float *restrict x, int acc) {
#ifdef DT_KERNELS_AVX512
    if (s == 1 && w <= 64 && k <= 16 && dt_cpu_avx512()) {
        dt_col2im_s1_avx512(col, c, h, w, k, p, oh, ow, ld, x, acc);
        return;
    }
    if (s == 1 && w <= 64 && k <= 16 && dt_cpu_avx2()) {
        dt_col2im_s1_avx2(col, c, h, w, k, p, oh, ow, ld, x, acc);
        return;
    }
#endif
    if (!acc) memset(x, 0, (size_t)c * h * w * sizeof *x);
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + (size_t)((ci * k + ki) * k + kj) * ld;
                float *xc = x + (size_t)ci * h * w;
                int lo, hi;
                dt_conv_valid_cols(w, kj, s, p, ow, &lo, &hi);
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * s - p + ki;
                    if (iy < 0 || iy >= h) continue;
                    const float *r = row + (size_t)oy * ow;
                    float *xr = xc + (size_t)iy * w;
                    const int off = kj - p;
                    if (s == 1) /* contiguous: vectorizes */
                        for (int ox = lo; ox < hi; ox++) xr[ox + off] += r[ox];
                    else
                        for (int ox = lo; ox < hi; ox++) xr[ox * s + off] += r[ox];
                }
            }
}

/* Columns of images b0..b0+g-1 into col, row stride col_ld(g, ohw). */
static void group_im2col(const dt_node *n, const float *x, int b0, int g, float *col) {
    const size_t in_sz = dt_node_in_size(n), ohw = (size_t)n->oh * n->ow;
    for (int i = 0; i < g; i++)
        im2col(x + (b0 + i) * in_sz, n->ic, n->ih, n->iw, n->k, n->stride, n->pad, n->oh, n->ow,
               col + i * ohw, col_ld(g, (int)ohw));
}

/* im2col transposed: rows[t][(c*k+ki)*k+kj] (row stride ld) = x[c][oy*s-p+ki][ox*s-p+kj] (0
 * outside), one row per output pixel t = oy*ow+ox. */
static void im2row(const float *restrict x, int c, int h, int w, int k, int s, int p, int oh,
                   int ow, float *restrict rows, size_t ld) {
#ifdef DT_KERNELS_AVX512
    if (k <= 16 && dt_cpu_avx512()) { dt_im2row_k16_avx512(x, c, h, w, k, s, p, oh, ow, rows, ld); return; }
    if (k <= 8 && dt_cpu_avx2()) { dt_im2row_k8_avx2(x, c, h, w, k, s, p, oh, ow, rows, ld); return; }
#endif
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            float *r = rows + (size_t)(oy * ow + ox) * ld;
            const int ix0 = ox * s - p;
            /* taps kj with 0 <= ix0 + kj < w */
            const int lo = ix0 < 0 ? -ix0 : 0, hi = w - ix0 < k ? w - ix0 : k;
            for (int ci = 0; ci < c; ci++)
                for (int ki = 0; ki < k; ki++, r += k) {
                    const int iy = oy * s - p + ki;
                    if (iy < 0 || iy >= h) { memset(r, 0, (size_t)k * sizeof *r); continue; }
                    im2col_row(r, x + ((size_t)ci * h + iy) * w, 1, ix0, lo, hi, k);
                }
        }
}

/* Rows of images b0..b0+g-1 into rows, row stride row_ld(ckk). */
static void group_im2row(const dt_node *n, const float *x, int b0, int g, float *rows) {
    const size_t in_sz = dt_node_in_size(n), ohw = (size_t)n->oh * n->ow, ld = row_ld(n->ic * n->k * n->k);
    for (int i = 0; i < g; i++)
        im2row(x + (b0 + i) * in_sz, n->ic, n->ih, n->iw, n->k, n->stride, n->pad, n->oh, n->ow,
               rows + i * ohw * ld, ld);
}

/* Forward or the input gradient by Winograd, a group of images at a time */
static void winograd_pass(const dt_node *n, const float *in, int c_in, int h, int w, int pad, int c_out, int oh,
                          int ow, const float *bias, int relu, int acc, float *out, int batch, int flip, float *work) {
    dt_winograd_filter(n->w[0], n->oc, n->ic, flip, work);
    const int G = dt_winograd_group(oh, ow, batch);
    const size_t in_sz = (size_t)c_in * h * w, out_sz = (size_t)c_out * oh * ow;
    for (int b0 = 0; b0 < batch; b0 += G)
        dt_winograd_conv(in + b0 * in_sz, batch - b0 < G ? batch - b0 : G, c_in, h, w, pad, c_out, bias, relu, acc,
                         out + b0 * out_sz, work);
}

static void own_forward(dt_node *n, const dt_pass *p);

static void failed(const dt_node *n) {
    static int said;
    if (!said++) fprintf(stderr, "dtrain: warning: %s: %s\n", n->name, dt_last_error());
}

/* oneDNN's plan where it has one for this layer (conv_dnnl.h; none in a build without it) */
static void conv_forward_at(dt_node *n, const dt_pass *p) {
    if (p->x16[0]) { /* only where conv_bf16_io said yes */
        dt_conv_dnnl *plan = dt_conv_dnnl_get(n, p->batch, DT_CONV_BF16_IO);
        if (!plan || dt_conv_dnnl_forward16(plan, p->x16[0], n->w[0], n->bias ? n->w[1] : NULL, n->y16) != DT_OK)
            failed(n);
        return;
    }
    dt_conv_dnnl *plan = dt_conv_dnnl_get(n, p->batch, p->bf16 ? DT_CONV_BF16 : DT_CONV_FP32);
    if (plan && dt_conv_dnnl_forward(plan, p->x[0], n->w[0], n->bias ? n->w[1] : NULL, n->y) == DT_OK) return;
    own_forward(n, p);
}

static void own_forward(dt_node *n, const dt_pass *p) {
    if (winograd(n)) {
        winograd_pass(n, p->x[0], n->ic, n->ih, n->iw, n->pad, n->oc, n->oh, n->ow, n->bias ? n->w[1] : NULL,
                      n->relu_out, 0, n->y, p->batch, 0, p->work);
        return;
    }
    const int ckk = n->ic * n->k * n->k, ohw = n->oh * n->ow, B = p->batch, oc = n->oc;
    const int G = group_images(n, B);
    const size_t out_sz = dt_node_out_size(n);
    float *col = p->work, *yg = col + col_ld(G, ohw) * ckk;
    for (int b0 = 0; b0 < B; b0 += G) {
        const int g = B - b0 < G ? B - b0 : G, ldc = g * ohw, ldb = (int)col_ld(g, ohw);
        group_im2col(n, p->x[0], b0, g, col);
        /* one image: straight into y; several: into scratch, then scattered to NCHW */
        float *c = g == 1 ? n->y + b0 * out_sz : yg;
        dt_sgemm(0, 0, oc, ldc, ckk, 1.0f, n->w[0], ckk, col, ldb, 0.0f, c, ldc);
        for (int i = 0; i < g; i++) {
            float *y = n->y + (b0 + i) * out_sz;
            for (int o = 0; o < oc; o++) {
                const float *src = c + (size_t)o * ldc + (size_t)i * ohw;
                float *dst = y + (size_t)o * ohw, bv = n->bias ? n->w[1][o] : 0.0f;
                /* bias (and a fused ReLU) in the same pass; src == dst when g == 1 */
                if (n->relu_out)
                    for (int j = 0; j < ohw; j++) { float v = src[j] + bv; dst[j] = v > 0.0f ? v : 0.0f; }
                else if (g > 1 || n->bias)
                    for (int j = 0; j < ohw; j++) dst[j] = src[j] + bv;
            }
        }
    }
}

static void conv_backward_at(dt_node *n, const dt_pass *p) {
    if (p->x16[0]) {
        dt_conv_dnnl *plan = dt_conv_dnnl_get(n, p->batch, DT_CONV_BF16_IO);
        if (!plan || dt_conv_dnnl_backward16(plan, p->x16[0], n->w[0], n->dy16, p->dx16[0], p->dx_acc[0], n->g[0],
                                             n->bias ? n->g[1] : NULL) != DT_OK)
            failed(n);
        return;
    }
    dt_conv_dnnl *plan = dt_conv_dnnl_get(n, p->batch, p->bf16 ? DT_CONV_BF16 : DT_CONV_FP32);
    if (plan && dt_conv_dnnl_backward(plan, p->x[0], n->w[0], n->dy, p->dx[0], p->dx_acc[0], n->g[0],
                                      n->bias ? n->g[1] : NULL) == DT_OK)
        return;
    const int ckk = n->ic * n->k * n->k, ohw = n->oh * n->ow, B = p->batch, oc = n->oc;
    const int G = group_images(n, B);
    const size_t in_sz = dt_node_in_size(n), out_sz = dt_node_out_size(n);
    const int by_rows = dw_from_rows(n, G), wino = winograd(n);
    float *col = p->work, *dcol = col + dw_input_floats(n, G), *dyg = dcol + col_floats(n, G);
    if (n->bias)
        for (int o = 0; o < oc; o++) {
            float s = 0;
            for (int b = 0; b < B; b++) s += dt_sum_run(n->dy + b * out_sz + (size_t)o * ohw, ohw);
            n->g[1][o] = s;
        }
    for (int b0 = 0; b0 < B; b0 += G) {
        const int g = B - b0 < G ? B - b0 : G, ldd = g * ohw, ldb = (int)col_ld(g, ohw);
        if (by_rows) group_im2row(n, p->x[0], b0, g, col);
        else group_im2col(n, p->x[0], b0, g, col);
        /* dY of the group as [oc][g*ohw] */
        const float *d = n->dy + b0 * out_sz;
        if (g > 1) {
            for (int i = 0; i < g; i++)
                for (int o = 0; o < oc; o++)
                    dt_copy_run(dyg + (size_t)o * ldd + (size_t)i * ohw,
                                n->dy + (b0 + i) * out_sz + (size_t)o * ohw, ohw);
            d = dyg;
        }
        if (by_rows) dt_sgemm(0, 0, oc, ckk, ldd, 1.0f, d, ldd, col, (int)row_ld(ckk), b0 ? 1.0f : 0.0f, n->g[0], ckk);
        else dt_sgemm(0, 1, oc, ckk, ldd, 1.0f, d, ldd, col, ldb, b0 ? 1.0f : 0.0f, n->g[0], ckk);
        if (p->dx[0] && !wino) {
            dt_sgemm(1, 0, ckk, ldd, oc, 1.0f, n->w[0], ckk, d, ldd, 0.0f, dcol, ldb);
            for (int i = 0; i < g; i++)
                col2im(dcol + (size_t)i * ohw, n->ic, n->ih, n->iw, n->k, n->stride, n->pad, n->oh,
                       n->ow, (size_t)ldb, p->dx[0] + (b0 + i) * in_sz, p->dx_acc[0]);
        }
    }
    /* dX = dY convolved with the flipped, transposed weights, padded by 2 - pad */
    if (p->dx[0] && wino)
        winograd_pass(n, n->dy, n->oc, n->oh, n->ow, 2 - n->pad, n->ic, n->ih, n->iw, NULL, 0, p->dx_acc[0], p->dx[0],
                      B, 1, p->work);
}

/* A plan's own-avx2: this layer's passes on the AVX2 kernels (im2col, col2im), the others' on
 * the CPU's tier */
static void conv_forward(dt_node *n, const dt_pass *p) {
    dt_tier_cap = n->kernel == DT_KERNEL_OWN_AVX2;
    conv_forward_at(n, p);
    dt_tier_cap = 0;
}

static void conv_backward(dt_node *n, const dt_pass *p) {
    dt_tier_cap = n->kernel == DT_KERNEL_OWN_AVX2;
    conv_backward_at(n, p);
    dt_tier_cap = 0;
}

/* what a plan may choose: dtrain's own kernels (im2col, and Winograd where it fits), and
 * oneDNN's where the build has it */
static unsigned conv_kernels(const dt_node *n, int bf16) {
    unsigned own = 1u << DT_KERNEL_OWN | (dt_winograd_fits(n->k, n->stride, n->pad) ? 1u << DT_KERNEL_OWN_WINOGRAD : 0);
#ifdef DT_KERNELS_AVX512
    if (dt_cpu_avx512() && dt_cpu_avx2()) own |= 1u << DT_KERNEL_OWN_AVX2; /* the tier below the CPU's */
#endif
    return own | dt_conv_dnnl_kernels(n, bf16);
}

const dt_layer_ops dt_layer_conv = {
    .kind = "conv", .auto_prefix = "conv", .ninputs = 1,
    .setup = conv_setup, .init = conv_init, .forward = conv_forward, .backward = conv_backward,
    .workspace = conv_workspace, .can_fuse_relu = 1, .gemm_params = 1, .bwd_skips = DT_SKIPS_Y,
    .prepare = dt_conv_dnnl_prepare, .engine = dt_conv_dnnl_engine, .release = dt_conv_dnnl_release,
    .bf16_io = dt_conv_dnnl_bf16_io,
    .kernels = conv_kernels,
};
