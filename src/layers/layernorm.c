/* Layer normalisation (nn.LayerNorm over the last dimension): each position of a sequence
 * normalised over its C features (an image: over all its values), y = (x - mean) / sqrt(var +
 * eps) * weight + bias, the biased variance; weight [C] (1), bias [C] (0; bias=0: none, as
 * nanoGPT's bias=False). aux keeps each row's mean and 1/std for backward, which recomputes the
 * normalised values from its input rather than keep them. Rows are AVX2 where the CPU has it. */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

#include "layers/kernels.h"

static dt_status ln_setup(dt_node *n) {
    if (n->eps <= 0.0f) n->eps = 1e-5f;
    const int C = dt_node_row_len(n);
    n->oc = n->ic; n->oh = n->ih; n->ow = n->iw;
    n->nparam = n->bias ? 2 : 1;
    n->ptens[0] = (dt_ptensor){"weight", 1, {C, 0, 0, 0}};
    n->ptens[1] = (dt_ptensor){"bias", 1, {C, 0, 0, 0}};
    /* per value: the mean's add, the variance's subtract, multiply and add, and y's subtract,
     * two multiplies and an add */
    n->flops = 8.0 * dt_node_in_size(n);
    return DT_OK;
}

static void ln_init(dt_node *n, dt_rng *rng) {
    (void)rng;
    const int C = dt_node_row_len(n);
    for (int c = 0; c < C; c++) n->w[0][c] = 1.0f;
    if (n->bias) memset(n->w[1], 0, (size_t)C * sizeof(float));
}

static size_t ln_aux(const dt_node *n, int batch) {
    return 2 * (size_t)batch * dt_node_rows(n) * sizeof(float);
}

/* One row: its mean and 1/std into st[0], st[1]; y (b may be NULL). */
static void row_fwd(float *y, const float *x, const float *w, const float *b, int C, float eps, float *st) {
    float s = 0;
    for (int c = 0; c < C; c++) s += x[c];
    const float mean = s / (float)C;
    float v = 0;
    for (int c = 0; c < C; c++) v += (x[c] - mean) * (x[c] - mean);
    const float rstd = 1.0f / sqrtf(v / (float)C + eps);
    for (int c = 0; c < C; c++) y[c] = (x[c] - mean) * rstd * w[c] + (b ? b[c] : 0.0f);
    st[0] = mean; st[1] = rstd;
}

/* One row's gradients: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w, xhat the
 * normalised x; dw += dy xhat, db += dy (db may be NULL; dx NULL: not wanted). */
static void row_bwd(float *dx, int acc, float *dw, float *db, const float *x, const float *dy, const float *w, int C,
                    const float *st) {
    const float mean = st[0], rstd = st[1];
    float sg = 0, sgx = 0;
    for (int c = 0; c < C; c++) {
        const float xh = (x[c] - mean) * rstd, g = dy[c] * w[c];
        sg += g; sgx += g * xh;
        dw[c] += dy[c] * xh;
        if (db) db[c] += dy[c];
    }
    if (!dx) return;
    const float a = sg / (float)C, bm = sgx / (float)C;
    for (int c = 0; c < C; c++) {
        const float xh = (x[c] - mean) * rstd, d = rstd * (dy[c] * w[c] - a - xh * bm);
        dx[c] = acc ? dx[c] + d : d;
    }
}

#ifdef DT_KERNELS_AVX512
DT_AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The same rows eight features at a time, C a multiple of 8 (the caller checks). */
DT_AVX2 static void row_fwd8(float *y, const float *x, const float *w, const float *b, int C, float eps, float *st) {
    __m256 s = _mm256_setzero_ps();
    for (int c = 0; c < C; c += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + c));
    const float mean = hsum8(s) / (float)C;
    const __m256 mv = _mm256_set1_ps(mean);
    __m256 v = _mm256_setzero_ps();
    for (int c = 0; c < C; c += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + c), mv);
        v = _mm256_fmadd_ps(d, d, v);
    }
    const float rstd = 1.0f / sqrtf(hsum8(v) / (float)C + eps);
    const __m256 rv = _mm256_set1_ps(rstd);
    for (int c = 0; c < C; c += 8) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + c), mv), rv);
        const __m256 bb = b ? _mm256_loadu_ps(b + c) : _mm256_setzero_ps();
        _mm256_storeu_ps(y + c, _mm256_fmadd_ps(xh, _mm256_loadu_ps(w + c), bb));
    }
    st[0] = mean; st[1] = rstd;
}

DT_AVX2 static void row_bwd8(float *dx, int acc, float *dw, float *db, const float *x, const float *dy, const float *w,
                             int C, const float *st) {
    const __m256 mv = _mm256_set1_ps(st[0]), rv = _mm256_set1_ps(st[1]);
    __m256 sg = _mm256_setzero_ps(), sgx = _mm256_setzero_ps();
    for (int c = 0; c < C; c += 8) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + c), mv), rv);
        const __m256 d = _mm256_loadu_ps(dy + c), g = _mm256_mul_ps(d, _mm256_loadu_ps(w + c));
        sg = _mm256_add_ps(sg, g);
        sgx = _mm256_fmadd_ps(g, xh, sgx);
        _mm256_storeu_ps(dw + c, _mm256_fmadd_ps(d, xh, _mm256_loadu_ps(dw + c)));
        if (db) _mm256_storeu_ps(db + c, _mm256_add_ps(d, _mm256_loadu_ps(db + c)));
    }
    if (!dx) return;
    const __m256 a = _mm256_set1_ps(hsum8(sg) / (float)C), bm = _mm256_set1_ps(hsum8(sgx) / (float)C);
    for (int c = 0; c < C; c += 8) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + c), mv), rv);
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dy + c), _mm256_loadu_ps(w + c));
        __m256 d = _mm256_mul_ps(rv, _mm256_sub_ps(_mm256_sub_ps(g, a), _mm256_mul_ps(xh, bm)));
        if (acc) d = _mm256_add_ps(d, _mm256_loadu_ps(dx + c));
        _mm256_storeu_ps(dx + c, d);
    }
}
#define AVX2_ROWS(C) ((C) % 8 == 0 && dt_cpu_avx2())
#else
#define AVX2_ROWS(C) 0
#define row_fwd8 row_fwd
#define row_bwd8 row_bwd
#endif

static void ln_forward(dt_node *n, const dt_pass *p) {
    const int C = dt_node_row_len(n), rows = p->batch * dt_node_rows(n), v8 = AVX2_ROWS(C);
    const float *b = n->bias ? n->w[1] : NULL;
    float *st = n->aux;
    for (int r = 0; r < rows; r++) {
        const float *x = p->x[0] + (size_t)r * C;
        float *y = n->y + (size_t)r * C;
        if (v8) row_fwd8(y, x, n->w[0], b, C, n->eps, st + 2 * r);
        else row_fwd(y, x, n->w[0], b, C, n->eps, st + 2 * r);
    }
}

static void ln_backward(dt_node *n, const dt_pass *p) {
    const int C = dt_node_row_len(n), rows = p->batch * dt_node_rows(n), v8 = AVX2_ROWS(C);
    float *db = n->bias ? n->g[1] : NULL;
    memset(n->g[0], 0, (size_t)C * sizeof(float));
    if (db) memset(db, 0, (size_t)C * sizeof(float));
    const float *st = n->aux;
    for (int r = 0; r < rows; r++) {
        const float *x = p->x[0] + (size_t)r * C, *dy = n->dy + (size_t)r * C;
        float *dx = p->dx[0] ? p->dx[0] + (size_t)r * C : NULL;
        if (v8) row_bwd8(dx, p->dx_acc[0], n->g[0], db, x, dy, n->w[0], C, st + 2 * r);
        else row_bwd(dx, p->dx_acc[0], n->g[0], db, x, dy, n->w[0], C, st + 2 * r);
    }
}

const dt_layer_ops dt_layer_layernorm = {
    .kind = "layernorm", .auto_prefix = "ln", .ninputs = 1, .setup = ln_setup, .init = ln_init,
    .forward = ln_forward, .backward = ln_backward, .aux_bytes = ln_aux, .bwd_skips = DT_SKIPS_Y,
    .seq = DT_SEQ_ANY,
};
