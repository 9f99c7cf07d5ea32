/* Max pooling, average pooling and global average pooling (k x k windows, stride, padding;
 * floor mode as in PyTorch). Max pooling saves the argmax of every output for backward. */
#include "layers/bf16_array.h"
#include "layers/kernels.h"
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

/* The common 2x2 stride-2 unpadded window without bounds checks (same tie rule: first max in
 * row-major window order wins; NaN never wins a compare). AVX-512: 16 outputs at a time, the
 * even/odd input columns split with permutes; compares select, data-dependent branches would
 * mispredict on every window. */
#ifdef DT_KERNELS_AVX512
DT_AVX512 static void maxpool2_forward_avx512(dt_node *n, const dt_pass *p) {
    int32_t *arg = n->aux;
    const int planes = p->batch * n->ic, ih = n->ih, iw = n->iw, oh = n->oh, ow = n->ow;
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512i lane2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    for (int pl = 0; pl < planes; pl++) {
        const float *x = p->x[0] + (size_t)pl * ih * iw;
        float *y = n->y + (size_t)pl * oh * ow;
        int32_t *a = arg + (size_t)pl * oh * ow;
        for (int oy = 0; oy < oh; oy++) {
            const float *r0 = x + (size_t)(2 * oy) * iw, *r1 = r0 + iw;
            for (int ox = 0; ox < ow; ox += 16) {
                const __mmask16 mo = dt_mask_range(0, ow, ox);
                const __mmask16 m0 = dt_mask_range(0, 2 * ow, 2 * ox), m1 = dt_mask_range(0, 2 * ow, 2 * ox + 16);
                __m512 a0 = dt_maskz_loadu_ps(m0, r0 + 2 * ox), a1 = dt_maskz_loadu_ps(m1, r0 + 2 * ox + 16);
                __m512 b0 = dt_maskz_loadu_ps(m0, r1 + 2 * ox), b1 = dt_maskz_loadu_ps(m1, r1 + 2 * ox + 16);
                __m512 best = _mm512_permutex2var_ps(a0, ev, a1);
                __m512i bi = _mm512_add_epi32(lane2, _mm512_set1_epi32(2 * oy * iw + 2 * ox));
                __m512 v = _mm512_permutex2var_ps(a0, od, a1);
                __mmask16 c = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
                best = _mm512_mask_blend_ps(c, best, v);
                bi = _mm512_mask_add_epi32(bi, c, bi, _mm512_set1_epi32(1));
                __m512i base = _mm512_add_epi32(lane2, _mm512_set1_epi32(2 * oy * iw + 2 * ox));
                v = _mm512_permutex2var_ps(b0, ev, b1);
                c = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
                best = _mm512_mask_blend_ps(c, best, v);
                bi = _mm512_mask_add_epi32(bi, c, base, _mm512_set1_epi32(iw));
                v = _mm512_permutex2var_ps(b0, od, b1);
                c = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
                best = _mm512_mask_blend_ps(c, best, v);
                bi = _mm512_mask_add_epi32(bi, c, base, _mm512_set1_epi32(iw + 1));
                dt_mask_storeu_ps(y + oy * ow + ox, mo, best);
                dt_mask_storeu_epi32(a + oy * ow + ox, mo, bi);
            }
        }
    }
}
#endif

static void maxpool2_forward(dt_node *n, const dt_pass *p) {
#ifdef DT_KERNELS_AVX512
    if (dt_cpu_avx512()) { maxpool2_forward_avx512(n, p); return; }
#endif
    int32_t *arg = n->aux;
    const int planes = p->batch * n->ic, ih = n->ih, iw = n->iw, oh = n->oh, ow = n->ow;
    for (int pl = 0; pl < planes; pl++) {
        const float *x = p->x[0] + (size_t)pl * ih * iw;
        float *y = n->y + (size_t)pl * oh * ow;
        int32_t *a = arg + (size_t)pl * oh * ow;
        for (int oy = 0; oy < oh; oy++) {
            const float *r0 = x + (size_t)(2 * oy) * iw, *r1 = r0 + iw;
            for (int ox = 0; ox < ow; ox++) {
                const int i0 = 2 * oy * iw + 2 * ox;
                float best = r0[2 * ox], v;
                int bi = i0, c;
                v = r0[2 * ox + 1]; c = v > best; best = c ? v : best; bi = c ? i0 + 1 : bi;
                v = r1[2 * ox];     c = v > best; best = c ? v : best; bi = c ? i0 + iw : bi;
                v = r1[2 * ox + 1]; c = v > best; best = c ? v : best; bi = c ? i0 + iw + 1 : bi;
                y[oy * ow + ox] = best;
                a[oy * ow + ox] = bi;
            }
        }
    }
}

static void maxpool_forward16(dt_node *n, const dt_pass *p);

static void maxpool_forward(dt_node *n, const dt_pass *p) {
    if (p->x16[0]) { maxpool_forward16(n, p); return; }
    int32_t *arg = n->aux;
    const int planes = p->batch * n->ic, ih = n->ih, iw = n->iw, k = n->k, s = n->stride,
              pd = n->pad, oh = n->oh, ow = n->ow;
    if (k == 2 && s == 2 && pd == 0) { maxpool2_forward(n, p); return; }
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

/* Under --precision bf16 max-pooling takes the stored bf16 values (bf16_io): plane by plane,
 * the input (or the output gradient) is converted into the workspace, the fp32 code runs on
 * that one plane, and its result is rounded on the way out: the bits of the fp32 code on fp32
 * copies of the whole tensors (models/precision.c), without those copies. */
static int maxpool_bf16_io(dt_node *n, int batch) {
    (void)n; (void)batch;
    return 1;
}

static size_t maxpool_workspace(const dt_node *n, int batch) {
    (void)batch;
    return (size_t)n->ih * n->iw + (size_t)n->oh * n->ow;
}

static void maxpool_forward16(dt_node *n, const dt_pass *p) {
    const size_t in_plane = (size_t)n->ih * n->iw, out_plane = (size_t)n->oh * n->ow;
    float *xbuf = p->work, *ybuf = p->work + in_plane;
    dt_node one = *n; /* a node of one plane, whose output is ybuf */
    one.ic = 1;
    one.y = ybuf;
    dt_pass q = *p;
    q.batch = 1;
    q.x[0] = xbuf;
    q.x16[0] = NULL;
    for (int pl = 0; pl < p->batch * n->ic; pl++) {
        dt_bf16_load(xbuf, p->x16[0] + pl * in_plane, in_plane);
        one.aux = (int32_t *)n->aux + pl * out_plane;
        maxpool_forward(&one, &q);
        dt_bf16_store(n->y16 + pl * out_plane, ybuf, out_plane);
    }
}

static void maxpool_backward16(dt_node *n, const dt_pass *p) {
    if (!p->dx16[0]) return;
    const size_t in_plane = (size_t)n->ih * n->iw, out_plane = (size_t)n->oh * n->ow;
    float *dxbuf = p->work, *dybuf = p->work + in_plane;
    const int32_t *arg = n->aux;
    for (int pl = 0; pl < p->batch * n->ic; pl++) {
        const int32_t *a = arg + pl * out_plane;
        dt_bf16_load(dybuf, n->dy16 + pl * out_plane, out_plane);
        memset(dxbuf, 0, in_plane * sizeof(float));
        for (size_t j = 0; j < out_plane; j++) dxbuf[a[j]] += dybuf[j];
        if (p->dx_acc[0]) dt_bf16_store_add(p->dx16[0] + pl * in_plane, dxbuf, in_plane);
        else dt_bf16_store(p->dx16[0] + pl * in_plane, dxbuf, in_plane);
    }
}

static void maxpool_backward(dt_node *n, const dt_pass *p) {
    if (p->x16[0]) { maxpool_backward16(n, p); return; }
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
    .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y, .workspace = maxpool_workspace, .bf16_io = maxpool_bf16_io,
};
const dt_layer_ops dt_layer_avgpool = {
    .kind = "avgpool", .auto_prefix = "avgpool", .ninputs = 1, .setup = avgpool_setup,
    .forward = avgpool_forward, .backward = avgpool_backward, .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y,
};
const dt_layer_ops dt_layer_gavgpool = {
    .kind = "gavgpool", .auto_prefix = "gavgpool", .ninputs = 1, .setup = gavgpool_setup,
    .forward = gavgpool_forward, .backward = gavgpool_backward, .bwd_skips = DT_SKIPS_X | DT_SKIPS_Y,
};
