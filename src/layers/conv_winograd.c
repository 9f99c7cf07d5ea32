/* Winograd F(2x2, 3x3) (conv_winograd.h). With d a 4x4 input block, g a 3x3 filter:
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A,
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 *   A^T = [1 1 1 0; 0 1 -1 -1].
 * The 16 elementwise products summed over input channels are 16 GEMMs: M[xi] (oc x P) =
 * U[xi] (oc x ic) . V[xi] (ic x P), P the tiles of a group of images. Each channel is first copied
 * with its zero padding into a buffer that holds every tile's 4x4 block, so the transforms need
 * no bounds checks. The products differ from im2col's sums by rounding (the transforms add
 * and subtract before multiplying): the gradient checks and the PyTorch oracle bound them. */
#include "layers/conv_winograd.h"
#include "layers/gemm.h"
#include "layers/kernels.h"

#include <stdlib.h>
#include <string.h>

/* Width of the GEMMs (tiles per group): 512 measured best of 256-2048 on resnet18-cifar (the
 * transforms' 16 planes then stay nearer the cache). */
#define WINO_TILES 512

int dt_winograd_fits(int k, int stride, int pad) { return k == 3 && stride == 1 && pad >= 0 && pad <= 2; }

int dt_winograd_wanted(int k, int stride, int pad) {
    if (!dt_winograd_fits(k, stride, pad)) return 0;
    const char *e = getenv("DTRAIN_WINOGRAD");
    return e && !strcmp(e, "1");
}

static int tiles_of(int n) { return (n + 1) / 2; }

int dt_winograd_group(int oh, int ow, int batch) {
    const int t = tiles_of(oh) * tiles_of(ow), g = WINO_TILES / (t ? t : 1);
    return g < 1 ? 1 : g > batch ? batch : g;
}

/* the padded copy of one channel: every tile's 4x4 block inside it */
static void padded_dims(int oh, int ow, int *ph, int *pw) {
    *ph = 2 * tiles_of(oh) + 2;
    *pw = 2 * tiles_of(ow) + 2;
}

size_t dt_winograd_workspace(int ic, int oc, int oh, int ow, int g) {
    int ph, pw;
    padded_dims(oh, ow, &ph, &pw);
    const size_t P = (size_t)g * tiles_of(oh) * tiles_of(ow);
    return 16 * (size_t)oc * ic + (size_t)ph * pw + 16 * (size_t)ic * P + 16 * (size_t)oc * P;
}

void dt_winograd_filter(const float *w, int oc, int ic, int flip, float *U) {
    const size_t plane = (size_t)oc * ic;
    for (int o = 0; o < oc; o++)
        for (int c = 0; c < ic; c++) {
            const float *src = w + ((size_t)o * ic + c) * 9;
            float g[3][3];
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) g[a][b] = flip ? src[(2 - a) * 3 + (2 - b)] : src[a * 3 + b];
            float t[4][3]; /* G g */
            for (int b = 0; b < 3; b++) {
                t[0][b] = g[0][b];
                t[1][b] = 0.5f * (g[0][b] + g[1][b] + g[2][b]);
                t[2][b] = 0.5f * (g[0][b] - g[1][b] + g[2][b]);
                t[3][b] = g[2][b];
            }
            /* (G g) G^T, into U[xi][o][c] (flip: U[xi][c][o]) */
            const size_t at = flip ? (size_t)c * oc + o : (size_t)o * ic + c;
            for (int a = 0; a < 4; a++) {
                float *u = U + (size_t)(a * 4) * plane + at;
                u[0] = t[a][0];
                u[plane] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
                u[2 * plane] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
                u[3 * plane] = t[a][2];
            }
        }
}

/* One row of tiles ty of one channel: V[xi * vs + tx] = (B^T d B)[xi] for tx < tw, d the 4x4
 * block at rows r[0..4), columns 2tx... The loop runs over the tiles with every store
 * contiguous in tx (and loads of stride 2), so the compiler vectorizes it across tiles. */
static inline __attribute__((always_inline)) void input_row(const float *restrict r0, const float *restrict r1,
                                                             const float *restrict r2, const float *restrict r3,
                                                             int tw, float *restrict v, size_t vs) {
    for (int tx = 0; tx < tw; tx++) {
        const int x = 2 * tx;
        float t[4][4]; /* B^T d */
        for (int j = 0; j < 4; j++) {
            const float d0 = r0[x + j], d1 = r1[x + j], d2 = r2[x + j], d3 = r3[x + j];
            t[0][j] = d0 - d2;
            t[1][j] = d1 + d2;
            t[2][j] = d2 - d1;
            t[3][j] = d1 - d3;
        }
        for (int i = 0; i < 4; i++) { /* (B^T d) B */
            v[(size_t)(4 * i) * vs + tx] = t[i][0] - t[i][2];
            v[(size_t)(4 * i + 1) * vs + tx] = t[i][1] + t[i][2];
            v[(size_t)(4 * i + 2) * vs + tx] = t[i][2] - t[i][1];
            v[(size_t)(4 * i + 3) * vs + tx] = t[i][1] - t[i][3];
        }
    }
}

/* One row of tiles of one output channel: y rows y0 (and y1 unless NULL), 2 columns per tile
 * for the first full tiles (nfull: 2tx + 1 < ow), one for a last half tile (half) */
static inline __attribute__((always_inline)) void output_row(const float *restrict m, size_t ms, int nfull,
                                                              int half, float bv, int relu, int acc,
                                                              float *restrict y0, float *restrict y1) {
    for (int tx = 0; tx < nfull + half; tx++) {
        float t[2][4]; /* A^T m */
        for (int j = 0; j < 4; j++) {
            const float a = m[(size_t)j * ms + tx], b = m[(size_t)(4 + j) * ms + tx], c = m[(size_t)(8 + j) * ms + tx],
                        d = m[(size_t)(12 + j) * ms + tx];
            t[0][j] = a + b + c;
            t[1][j] = b - c - d;
        }
        float v[2][2];
        for (int a = 0; a < 2; a++) {
            v[a][0] = t[a][0] + t[a][1] + t[a][2] + bv;
            v[a][1] = t[a][1] - t[a][2] - t[a][3] + bv;
            if (relu && !acc) {
                v[a][0] = v[a][0] > 0.0f ? v[a][0] : 0.0f;
                v[a][1] = v[a][1] > 0.0f ? v[a][1] : 0.0f;
            }
        }
        const int x = 2 * tx, two = tx < nfull;
        if (acc) {
            y0[x] += v[0][0];
            if (two) y0[x + 1] += v[0][1];
            if (y1) {
                y1[x] += v[1][0];
                if (two) y1[x + 1] += v[1][1];
            }
        } else {
            y0[x] = v[0][0];
            if (two) y0[x + 1] = v[0][1];
            if (y1) {
                y1[x] = v[1][0];
                if (two) y1[x + 1] = v[1][1];
            }
        }
    }
}

/* The transforms of a group (the inputs' into V through each channel's padded copy xp; the
 * outputs' from M), with the loops above inlined: once for AVX2, once for any x86-64 */
static inline __attribute__((always_inline)) void transforms(int in, const float *x, int g, int ic, int h, int w,
                                                              int pad, int oc, int oh, int ow, const float *bias,
                                                              int relu, int acc, float *y, float *xp, float *V,
                                                              const float *M) {
    const int th = tiles_of(oh), tw = tiles_of(ow), nt = th * tw;
    int ph, pw;
    padded_dims(oh, ow, &ph, &pw);
    const size_t P = (size_t)g * nt;
    if (in) {
        memset(xp, 0, (size_t)ph * pw * sizeof *xp);
        for (int i = 0; i < g; i++)
            for (int c = 0; c < ic; c++) {
                const float *src = x + ((size_t)i * ic + c) * h * w;
                /* input row r at padded row r + pad; the border stays 0 (never written) */
                for (int r = 0; r < h; r++) memcpy(xp + (size_t)(r + pad) * pw + pad, src + (size_t)r * w, (size_t)w * sizeof *xp);
                float *v = V + (size_t)c * P + (size_t)i * nt;
                for (int ty = 0; ty < th; ty++) {
                    const float *r0 = xp + (size_t)(2 * ty) * pw;
                    input_row(r0, r0 + pw, r0 + 2 * pw, r0 + 3 * pw, tw, v + (size_t)ty * tw, (size_t)ic * P);
                }
            }
        return;
    }
    const size_t ms = (size_t)oc * P;
    const int nfull = ow / 2, half = ow % 2;
    for (int o = 0; o < oc; o++) {
        const float bv = bias && !acc ? bias[o] : 0.0f;
        for (int i = 0; i < g; i++) {
            float *yo = y + ((size_t)i * oc + o) * oh * ow;
            const float *m0 = M + (size_t)o * P + (size_t)i * nt;
            for (int ty = 0; ty < th; ty++) {
                float *y0 = yo + (size_t)(2 * ty) * ow, *y1 = 2 * ty + 1 < oh ? y0 + ow : NULL;
                output_row(m0 + (size_t)ty * tw, ms, nfull, half, bv, relu, acc, y0, y1);
            }
        }
    }
}

#ifdef DT_KERNELS_AVX512
DT_AVX2 static void transforms_avx2(int in, const float *x, int g, int ic, int h, int w, int pad, int oc, int oh,
                                    int ow, const float *bias, int relu, int acc, float *y, float *xp, float *V,
                                    const float *M) {
    transforms(in, x, g, ic, h, w, pad, oc, oh, ow, bias, relu, acc, y, xp, V, M);
}
#endif

static void run_transforms(int in, const float *x, int g, int ic, int h, int w, int pad, int oc, int oh, int ow,
                           const float *bias, int relu, int acc, float *y, float *xp, float *V, const float *M) {
#ifdef DT_KERNELS_AVX512
    if (dt_cpu_avx2()) {
        transforms_avx2(in, x, g, ic, h, w, pad, oc, oh, ow, bias, relu, acc, y, xp, V, M);
        return;
    }
#endif
    transforms(in, x, g, ic, h, w, pad, oc, oh, ow, bias, relu, acc, y, xp, V, M);
}

void dt_winograd_conv(const float *x, int g, int ic, int h, int w, int pad, int oc, const float *bias, int relu,
                      int acc, float *y, float *work) {
    const int oh = h + 2 * pad - 2, ow = w + 2 * pad - 2;
    int ph, pw;
    padded_dims(oh, ow, &ph, &pw);
    const size_t P = (size_t)g * tiles_of(oh) * tiles_of(ow);
    const float *U = work;
    float *xp = work + 16 * (size_t)oc * ic, *V = xp + (size_t)ph * pw, *M = V + 16 * (size_t)ic * P;
    run_transforms(1, x, g, ic, h, w, pad, oc, oh, ow, NULL, 0, 0, NULL, xp, V, NULL);
    for (int xi = 0; xi < 16; xi++)
        dt_sgemm(0, 0, oc, (int)P, ic, 1.0f, U + (size_t)xi * oc * ic, ic, V + (size_t)xi * ic * P, (int)P, 0.0f,
                 M + (size_t)xi * oc * P, (int)P);
    run_transforms(0, NULL, g, ic, h, w, pad, oc, oh, ow, bias, relu, acc, y, NULL, NULL, M);
}
