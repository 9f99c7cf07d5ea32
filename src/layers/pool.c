/* Max pooling, average pooling and global average pooling (k x k windows, stride, padding;
 * floor mode as in PyTorch). Max pooling saves the argmax of every output for backward. */
#include "layers/layer.h"

#include <float.h>
#include <stdint.h>
#include <string.h>

static dt_status pool_shape(dt_node *n, const char *kind) {
    if (n->k < 1) return dt_fail(DT_ERR_ARG, "%s needs k=K with K >= 1", kind);
    if (n->stride < 1) n->stride = n->k;
    if (n->pad < 0 || n->pad * 2 > n->k)
        return dt_fail(DT_ERR_ARG, "%s pad must be between 0 and k/2", kind);
    if (n->ih + 2 * n->pad < n->k || n->iw + 2 * n->pad < n->k)
        return dt_fail(DT_ERR_ARG, "%s window %d is larger than the input %dx%d", kind, n->k,
                       n->ih, n->iw);
    n->oc = n->ic;
    n->oh = (n->ih + 2 * n->pad - n->k) / n->stride + 1;
    n->ow = (n->iw + 2 * n->pad - n->k) / n->stride + 1;
    n->flops = (double)n->oc * n->oh * n->ow * n->k * n->k;
    return DT_OK;
}

static dt_status maxpool_setup(dt_node *n) { return pool_shape(n, "maxpool"); }
static dt_status avgpool_setup(dt_node *n) { return pool_shape(n, "avgpool"); }
static dt_status gavgpool_setup(dt_node *n) {
    n->k = n->ih > n->iw ? n->ih : n->iw;
    n->stride = 1; n->pad = 0;
    n->oc = n->ic; n->oh = 1; n->ow = 1;
    n->flops = (double)n->ic * n->ih * n->iw;
    return DT_OK;
}

static size_t maxpool_aux(const dt_node *n, int batch) {
    return (size_t)batch * dt_node_out_size(n) * sizeof(int32_t);
}

static void maxpool_forward(dt_node *n, const dt_pass *p) {
    int32_t *arg = n->aux;
    const int planes = p->batch * n->ic, ih = n->ih, iw = n->iw, k = n->k, s = n->stride,
              pd = n->pad, oh = n->oh, ow = n->ow;
    for (int pl = 0; pl < planes; pl++) {
        const float *x = p->x[0] + (size_t)pl * ih * iw;
        float *y = n->y + (size_t)pl * oh * ow;
        int32_t *a = arg + (size_t)pl * oh * ow;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float best = -FLT_MAX;
                int bi = -1;
                for (int ki = 0; ki < k; ki++) {
                    int iy = oy * s - pd + ki;
                    if (iy < 0 || iy >= ih) continue;
                    for (int kj = 0; kj < k; kj++) {
                        int ix = ox * s - pd + kj;
                        if (ix < 0 || ix >= iw) continue;
                        float v = x[iy * iw + ix];
                        if (bi < 0 || v > best) { best = v; bi = iy * iw + ix; }
                    }
                }
                y[oy * ow + ox] = best;
                a[oy * ow + ox] = bi;
            }
    }
}

static void maxpool_backward(dt_node *n, const dt_pass *p) {
    if (!p->dx[0]) return;
    const int32_t *arg = n->aux;
    const size_t in_plane = (size_t)n->ih * n->iw, out_plane = (size_t)n->oh * n->ow;
    const int planes = p->batch * n->ic;
    if (!p->dx_acc[0]) memset(p->dx[0], 0, (size_t)planes * in_plane * sizeof(float));
    for (int pl = 0; pl < planes; pl++) {
        float *dx = p->dx[0] + pl * in_plane;
        const float *dy = n->dy + pl * out_plane;
        const int32_t *a = arg + pl * out_plane;
        for (size_t j = 0; j < out_plane; j++) dx[a[j]] += dy[j];
    }
}

/* Average pooling counts padded zeros in the divisor (PyTorch's count_include_pad=True). */
static void avgpool_forward(dt_node *n, const dt_pass *p) {
    const int planes = p->batch * n->ic, ih = n->ih, iw = n->iw, k = n->k, s = n->stride,
              pd = n->pad, oh = n->oh, ow = n->ow;
    const float inv = 1.0f / (float)(k * k);
    for (int pl = 0; pl < planes; pl++) {
        const float *x = p->x[0] + (size_t)pl * ih * iw;
        float *y = n->y + (size_t)pl * oh * ow;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float sum = 0;
                for (int ki = 0; ki < k; ki++) {
                    int iy = oy * s - pd + ki;
                    if (iy < 0 || iy >= ih) continue;
                    for (int kj = 0; kj < k; kj++) {
                        int ix = ox * s - pd + kj;
                        if (ix >= 0 && ix < iw) sum += x[iy * iw + ix];
                    }
                }
                y[oy * ow + ox] = sum * inv;
            }
    }
}

static void avgpool_backward(dt_node *n, const dt_pass *p) {
    if (!p->dx[0]) return;
    const int planes = p->batch * n->ic, ih = n->ih, iw = n->iw, k = n->k, s = n->stride,
              pd = n->pad, oh = n->oh, ow = n->ow;
    const float inv = 1.0f / (float)(k * k);
    if (!p->dx_acc[0]) memset(p->dx[0], 0, (size_t)planes * ih * iw * sizeof(float));
    for (int pl = 0; pl < planes; pl++) {
        float *dx = p->dx[0] + (size_t)pl * ih * iw;
        const float *dy = n->dy + (size_t)pl * oh * ow;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float g = dy[oy * ow + ox] * inv;
                for (int ki = 0; ki < k; ki++) {
                    int iy = oy * s - pd + ki;
                    if (iy < 0 || iy >= ih) continue;
                    for (int kj = 0; kj < k; kj++) {
                        int ix = ox * s - pd + kj;
                        if (ix >= 0 && ix < iw) dx[iy * iw + ix] += g;
                    }
                }
            }
    }
}

static void gavgpool_forward(dt_node *n, const dt_pass *p) {
    const int planes = p->batch * n->ic;
    const size_t hw = (size_t)n->ih * n->iw;
    const float inv = 1.0f / (float)hw;
    for (int pl = 0; pl < planes; pl++) {
        const float *x = p->x[0] + pl * hw;
        float sum = 0;
        for (size_t j = 0; j < hw; j++) sum += x[j];
        n->y[pl] = sum * inv;
    }
}

static void gavgpool_backward(dt_node *n, const dt_pass *p) {
    if (!p->dx[0]) return;
    const int planes = p->batch * n->ic;
    const size_t hw = (size_t)n->ih * n->iw;
    const float inv = 1.0f / (float)hw;
    for (int pl = 0; pl < planes; pl++) {
        float *dx = p->dx[0] + pl * hw, g = n->dy[pl] * inv;
        if (p->dx_acc[0])
            for (size_t j = 0; j < hw; j++) dx[j] += g;
        else
            for (size_t j = 0; j < hw; j++) dx[j] = g;
    }
}

const dt_layer_ops dt_layer_maxpool = {
    .kind = "maxpool", .auto_prefix = "maxpool", .ninputs = 1, .setup = maxpool_setup,
    .forward = maxpool_forward, .backward = maxpool_backward, .aux_bytes = maxpool_aux,
};
const dt_layer_ops dt_layer_avgpool = {
    .kind = "avgpool", .auto_prefix = "avgpool", .ninputs = 1, .setup = avgpool_setup,
    .forward = avgpool_forward, .backward = avgpool_backward,
};
const dt_layer_ops dt_layer_gavgpool = {
    .kind = "gavgpool", .auto_prefix = "gavgpool", .ninputs = 1, .setup = gavgpool_setup,
    .forward = gavgpool_forward, .backward = gavgpool_backward,
};
