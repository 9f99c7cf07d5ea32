/* 2-D convolution, NCHW, weight [out, in, k, k], via im2col + sgemm, one image at a time
 * (per-image GEMMs are wide enough to run near peak; whole-batch ones for small convs are not). */
#include "layers/layer.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

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

static int is_pointwise(const dt_node *n) { return n->k == 1 && n->stride == 1 && n->pad == 0; }

static size_t conv_workspace(const dt_node *n, int batch) {
    (void)batch;
    size_t col = (size_t)n->ic * n->k * n->k * n->oh * n->ow;
    return 2 * col;  /* im2col columns + their gradient */
}

/* col[(c*k+ki)*k+kj][oy*ow+ox] = x[c][oy*s-p+ki][ox*s-p+kj] (0 outside). */
static void im2col(const float *x, int c, int h, int w, int k, int s, int p, int oh, int ow,
                   float *col) {
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + (size_t)((ci * k + ki) * k + kj) * oh * ow;
                const float *xc = x + (size_t)ci * h * w;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * s - p + ki;
                    float *r = row + (size_t)oy * ow;
                    if (iy < 0 || iy >= h) { memset(r, 0, (size_t)ow * sizeof *r); continue; }
                    const float *xr = xc + (size_t)iy * w;
                    if (s == 1) {
                        int lo = p - kj, hi = w + p - kj; /* ox range with ix in [0, w) */
                        for (int ox = 0; ox < ow; ox++)
                            r[ox] = (ox >= lo && ox < hi) ? xr[ox - p + kj] : 0.0f;
                    } else {
                        for (int ox = 0; ox < ow; ox++) {
                            int ix = ox * s - p + kj;
                            r[ox] = (ix >= 0 && ix < w) ? xr[ix] : 0.0f;
                        }
                    }
                }
            }
}

/* The adjoint of im2col: adds columns back into the (zeroed or accumulating) image. */
static void col2im(const float *col, int c, int h, int w, int k, int s, int p, int oh, int ow,
                   float *x) {
    for (int ci = 0; ci < c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + (size_t)((ci * k + ki) * k + kj) * oh * ow;
                float *xc = x + (size_t)ci * h * w;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * s - p + ki;
                    if (iy < 0 || iy >= h) continue;
                    const float *r = row + (size_t)oy * ow;
                    float *xr = xc + (size_t)iy * w;
                    for (int ox = 0; ox < ow; ox++) {
                        int ix = ox * s - p + kj;
                        if (ix >= 0 && ix < w) xr[ix] += r[ox];
                    }
                }
            }
}

static void conv_forward(dt_node *n, const dt_pass *p) {
    const int ckk = n->ic * n->k * n->k, ohw = n->oh * n->ow;
    const size_t in_sz = dt_node_in_size(n), out_sz = dt_node_out_size(n);
    for (int b = 0; b < p->batch; b++) {
        const float *x = p->x[0] + b * in_sz;
        float *y = n->y + b * out_sz;
        const float *col = x;
        if (!is_pointwise(n)) {
            im2col(x, n->ic, n->ih, n->iw, n->k, n->stride, n->pad, n->oh, n->ow, p->work);
            col = p->work;
        }
        if (n->bias)
            for (int o = 0; o < n->oc; o++) {
                float bv = n->w[1][o], *yo = y + (size_t)o * ohw;
                for (int j = 0; j < ohw; j++) yo[j] = bv;
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n->oc, ohw, ckk, 1.0f, n->w[0], ckk,
                    col, ohw, n->bias ? 1.0f : 0.0f, y, ohw);
    }
}

static void conv_backward(dt_node *n, const dt_pass *p) {
    const int ckk = n->ic * n->k * n->k, ohw = n->oh * n->ow;
    const size_t in_sz = dt_node_in_size(n), out_sz = dt_node_out_size(n);
    float *colbuf = p->work, *dcol = p->work + (size_t)ckk * ohw;
    if (n->bias) memset(n->g[1], 0, (size_t)n->oc * sizeof(float));
    for (int b = 0; b < p->batch; b++) {
        const float *x = p->x[0] + b * in_sz;
        const float *dy = n->dy + b * out_sz;
        const float *col = x;
        if (!is_pointwise(n)) {
            im2col(x, n->ic, n->ih, n->iw, n->k, n->stride, n->pad, n->oh, n->ow, colbuf);
            col = colbuf;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n->oc, ckk, ohw, 1.0f, dy, ohw, col,
                    ohw, b ? 1.0f : 0.0f, n->g[0], ckk);
        if (n->bias)
            for (int o = 0; o < n->oc; o++) {
                const float *d = dy + (size_t)o * ohw;
                float s = 0;
                for (int j = 0; j < ohw; j++) s += d[j];
                n->g[1][o] += s;
            }
        if (p->dx[0]) {
            float *dx = p->dx[0] + b * in_sz;
            if (is_pointwise(n)) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, ohw, n->oc, 1.0f, n->w[0],
                            ckk, dy, ohw, p->dx_acc[0] ? 1.0f : 0.0f, dx, ohw);
            } else {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, ohw, n->oc, 1.0f, n->w[0],
                            ckk, dy, ohw, 0.0f, dcol, ohw);
                if (!p->dx_acc[0]) memset(dx, 0, in_sz * sizeof *dx);
                col2im(dcol, n->ic, n->ih, n->iw, n->k, n->stride, n->pad, n->oh, n->ow, dx);
            }
        }
    }
}

const dt_layer_ops dt_layer_conv = {
    .kind = "conv", .auto_prefix = "conv", .ninputs = 1,
    .setup = conv_setup, .init = conv_init, .forward = conv_forward, .backward = conv_backward,
    .workspace = conv_workspace,
};
