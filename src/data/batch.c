/* Batch assembly: examples of a loaded dataset (uint8 CHW images) into a normalised float
 * batch and its labels, with CIFAR-style augmentation (random crop, pad 4, and horizontal
 * flip) when asked. Loading is dataset.c's. */
#include "dtrain.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#define CROP_PAD 4

/* Augmentation, per example, in this rng order: dx = below(9) - 4, dy = below(9) - 4,
 * flip = below(2). Like torchvision RandomCrop(padding=4) then RandomHorizontalFlip:
 * out[ch][r][c] = img[ch][r + dy][flip ? (w - 1 - c) + dx : c + dx], and 0-valued pixels
 * (normalised like any pixel) outside the image. */
void dt_batch_fill(const dt_dataset *d, const int *idx, int n, float *x, uint8_t *y,
                   int augment, dt_rng *rng) {
    assert(d && (n == 0 || (idx && x)));
    const int c = d->c, h = d->h, w = d->w;
    assert(c >= 1 && c <= 3);
    const size_t plane = (size_t)h * w, per = (size_t)c * plane;

    /* Per-channel lookup table: the exact value of (p/255 - mean)/std for every byte. */
    float lut[3][256];
    for (int ch = 0; ch < c; ch++) {
        const float mean = d->mean[ch], sd = d->std[ch];
        for (int p = 0; p < 256; p++) lut[ch][p] = ((float)p / 255.0f - mean) / sd;
    }
    const int aug = augment && d->augment && rng;

    for (int i = 0; i < n; i++) {
        const int k = idx[i];
        assert(k >= 0 && k < d->n);
        const uint8_t *src = d->images + (size_t)k * per;
        float *dst = x + (size_t)i * per;
        if (y) y[i] = d->labels[k];

        if (!aug) {
            for (int ch = 0; ch < c; ch++) {
                const float *t = lut[ch];
                const uint8_t *s = src + ch * plane;
                float *o = dst + ch * plane;
                for (size_t j = 0; j < plane; j++) o[j] = t[s[j]];
            }
            continue;
        }

        const int dx = (int)dt_rng_below(rng, 2 * CROP_PAD + 1) - CROP_PAD;
        const int dy = (int)dt_rng_below(rng, 2 * CROP_PAD + 1) - CROP_PAD;
        const int flip = (int)dt_rng_below(rng, 2);
        /* Output columns whose source column lies inside the image. */
        int c0, c1;
        if (flip) {
            c0 = dx > 0 ? dx : 0;
            c1 = dx < 0 ? w + dx : w;
        } else {
            c0 = dx < 0 ? -dx : 0;
            c1 = dx > 0 ? w - dx : w;
        }
        if (c1 < c0) c1 = c0;
        for (int ch = 0; ch < c; ch++) {
            const float *t = lut[ch];
            const float pad = t[0];
            for (int r = 0; r < h; r++) {
                float *o = dst + ch * plane + (size_t)r * w;
                const int sy = r + dy;
                if (sy < 0 || sy >= h) {
                    for (int col = 0; col < w; col++) o[col] = pad;
                    continue;
                }
                const uint8_t *s = src + ch * plane + (size_t)sy * w;
                for (int col = 0; col < c0; col++) o[col] = pad;
                if (flip) {
                    const int base = w - 1 + dx; /* source column of output column col */
                    for (int col = c0; col < c1; col++) o[col] = t[s[base - col]];
                } else {
                    for (int col = c0; col < c1; col++) o[col] = t[s[col + dx]];
                }
                for (int col = c1; col < w; col++) o[col] = pad;
            }
        }
    }
}

int dt_dataset_positions(const dt_dataset *d) { return d->text ? d->h : 1; }

/* A text's windows: example k from k·T, or a uniform draw of 0..T-1 later (one draw per
 * example, in order), its T tokens the inputs and the T after each the targets. */
static void text_fill(const dt_dataset *d, const int *idx, int n, float *x, uint16_t *y, int augment, dt_rng *rng) {
    const int T = d->h;
    const int aug = augment && d->augment && rng;
    for (int i = 0; i < n; i++) {
        assert(idx[i] >= 0 && idx[i] < d->n);
        const long long s = (long long)idx[i] * T + (aug ? (long long)dt_rng_below(rng, (uint32_t)T) : 0);
        assert(s + T < d->ntokens);
        const uint16_t *tok = d->tokens + s;
        float *xo = x + (size_t)i * T;
        for (int t = 0; t < T; t++) xo[t] = (float)tok[t];
        if (y) memcpy(y + (size_t)i * T, tok + 1, (size_t)T * sizeof *y);
    }
}

void dt_batch_fill_targets(const dt_dataset *d, const int *idx, int n, float *x, uint16_t *y,
                           int augment, dt_rng *rng) {
    assert(d && (n == 0 || (idx && x)));
    if (d->text) {
        assert(d->h >= 1); /* dt_dataset_set_window first */
        text_fill(d, idx, n, x, y, augment, rng);
        return;
    }
    dt_batch_fill(d, idx, n, x, NULL, augment, rng);
    for (int i = 0; y && i < n; i++) y[i] = d->labels[idx[i]];
}
