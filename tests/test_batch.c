/* Batch assembly (src/data/batch.c) on datasets built in memory: a batch of known examples
 * without augmentation (labels, every pixel normalised per channel, in the order asked,
 * nothing written past the end), and CIFAR-style augmentation (crop with padding, flip: the
 * documented draw order, reproducible from the seed, the offsets' and flips' spread). */
#include "dtrain.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An empty 3-channel set of n h x w examples (pixels and labels to fill in). */
static void new_set(dt_dataset *d, const char *name, int n, int h, int w, int augment, const float mean[3],
                    const float sd[3]) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->n = n; d->c = 3; d->h = h; d->w = w; d->classes = 10; d->augment = augment;
    d->images = malloc((size_t)n * 3 * (size_t)h * (size_t)w);
    d->labels = malloc((size_t)n);
    memcpy(d->mean, mean, 3 * sizeof *mean);
    memcpy(d->std, sd, 3 * sizeof *sd);
}

/* A 3-channel 4x5 set of n examples: pixel (k, ch, i) = (k * 37 + ch * 50 + i * 3) % 256,
 * label (k * 3) % 10, a different mean and std per channel. */
static void make_small_set(dt_dataset *d, int n, int augment) {
    const float mean[3] = {0.1f, 0.5f, 0.9f}, sd[3] = {0.2f, 0.25f, 0.5f};
    new_set(d, "small", n, 4, 5, augment, mean, sd);
    for (int k = 0; k < n; k++) {
        d->labels[k] = (uint8_t)(k * 3 % 10);
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < 20; i++) d->images[k * 60 + ch * 20 + i] = (uint8_t)((k * 37 + ch * 50 + i * 3) % 256);
    }
}

static void test_plain_batch(void) {
    dt_dataset d;
    make_small_set(&d, 6, 0);
    /* any order, repeats allowed */
    int idx[4] = {5, 0, 3, 5};
    float x[4 * 60 + 2];
    uint8_t y[4] = {99, 99, 99, 99};
    x[4 * 60] = x[4 * 60 + 1] = -777.0f; /* guard */
    dt_rng r;
    dt_rng_seed(&r, 7);
    dt_batch_fill(&d, idx, 4, x, y, 1, &r); /* augment asked, but the set has augment = 0 */
    CHECK(y[0] == 5 && y[1] == 0 && y[2] == 9 && y[3] == 5);
    double worst = 0;
    for (int b = 0; b < 4; b++)
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < 20; i++) {
                const int p = (idx[b] * 37 + ch * 50 + i * 3) % 256;
                const double want = (p / 255.0 - d.mean[ch]) / d.std[ch];
                const double e = fabs(x[b * 60 + ch * 20 + i] - want);
                if (e > worst) worst = e;
            }
    CHECK_NEAR(worst, 0.0, 1e-5);
    /* a pixel by hand: example 3, channel 2, pixel 7: (111 + 100 + 21) % 256 = 232 */
    CHECK_NEAR(x[2 * 60 + 2 * 20 + 7], (232 / 255.0 - 0.9) / 0.5, 1e-5);
    CHECK(memcmp(x, x + 3 * 60, 60 * sizeof(float)) == 0); /* example 5 twice, the same */
    CHECK(x[4 * 60] == -777.0f && x[4 * 60 + 1] == -777.0f);
    dt_rng r0;
    dt_rng_seed(&r0, 7);
    CHECK(memcmp(&r, &r0, sizeof r) == 0); /* no augmentation: no draws */

    /* without labels, and an empty batch writes nothing */
    float x2[60];
    int one = 3;
    dt_batch_fill(&d, &one, 1, x2, NULL, 0, NULL);
    CHECK(memcmp(x2, x + 2 * 60, sizeof x2) == 0);
    dt_batch_fill(&d, NULL, 0, NULL, NULL, 0, NULL);
    dt_dataset_free(&d);
}

/* Synthetic CIFAR image with nonzero pixels that encode position: R = x + 1, G = y + 1,
 * B = 100 + image. */
static void make_aug_set(dt_dataset *d, int n) {
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, sd[3] = {0.2470f, 0.2435f, 0.2616f};
    new_set(d, "cifar10", n, 32, 32, 1, mean, sd);
    for (int k = 0; k < n; k++) {
        d->labels[k] = (uint8_t)(k % 10);
        for (int yy = 0; yy < 32; yy++)
            for (int xx = 0; xx < 32; xx++) {
                d->images[k * 3072 + 0 * 1024 + yy * 32 + xx] = (uint8_t)(xx + 1);
                d->images[k * 3072 + 1 * 1024 + yy * 32 + xx] = (uint8_t)(yy + 1);
                d->images[k * 3072 + 2 * 1024 + yy * 32 + xx] = (uint8_t)(100 + k);
            }
    }
}

static float norm(const dt_dataset *d, int ch, int p) { return ((float)p / 255.0f - d->mean[ch]) / d->std[ch]; }

/* Recovers a pixel byte from a normalised value (inverse of the normalisation). */
static int denorm(const dt_dataset *d, int ch, float v) {
    return (int)lroundf((v * d->std[ch] + d->mean[ch]) * 255.0f);
}

/* Expected output of one augmented image, from an explicit dx, dy, flip. */
static void expect_aug(const dt_dataset *d, int k, int dx, int dy, int flip, float *out) {
    for (int ch = 0; ch < 3; ch++)
        for (int r = 0; r < 32; r++)
            for (int c = 0; c < 32; c++) {
                int sx = (flip ? 31 - c : c) + dx, sy = r + dy;
                int p = (sx < 0 || sx >= 32 || sy < 0 || sy >= 32)
                            ? 0 : d->images[k * 3072 + ch * 1024 + sy * 32 + sx];
                out[ch * 1024 + r * 32 + c] = norm(d, ch, p);
            }
}

static double max_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) { double e = fabs(a[i] - b[i]); if (e > m) m = e; }
    return m;
}

/* Infers (dx, flip) of an augmented image from its R plane centre row (R = x + 1). */
static int infer(const dt_dataset *d, const float *img, int *dx, int *flip) {
    int a = denorm(d, 0, img[16 * 32 + 15]), b = denorm(d, 0, img[16 * 32 + 16]);
    if (a == 0 || b == 0) return 0;
    *flip = b < a;
    *dx = *flip ? (a - 1) - (31 - 15) : (a - 1) - 15;
    return 1;
}

static void test_augment(void) {
    enum { N = 4 };
    dt_dataset d;
    make_aug_set(&d, N);
    int idx[N] = {0, 1, 2, 3};
    static float x1[N * 3072 + 4], x2[N * 3072 + 4], x3[N * 3072 + 4], want[3072];
    uint8_t y[N];
    for (int i = 0; i < 4; i++) x1[N * 3072 + i] = x2[N * 3072 + i] = -777.0f;

    /* Reproducible from the seed; shape and labels unchanged; nothing written past the end. */
    dt_rng r1, r2, r3;
    dt_rng_seed(&r1, 42); dt_rng_seed(&r2, 42); dt_rng_seed(&r3, 43);
    dt_batch_fill(&d, idx, N, x1, y, 1, &r1);
    dt_batch_fill(&d, idx, N, x2, NULL, 1, &r2);
    dt_batch_fill(&d, idx, N, x3, NULL, 1, &r3);
    CHECK(memcmp(x1, x2, sizeof x1) == 0);
    CHECK(memcmp(x1, x3, N * 3072 * sizeof(float)) != 0);
    CHECK(x1[N * 3072] == -777.0f && x1[N * 3072 + 3] == -777.0f && x2[N * 3072] == -777.0f);
    CHECK(y[0] == 0 && y[3] == 3);
    CHECK(memcmp(&r1, &r2, sizeof r1) == 0); /* same number of draws */

    /* Documented draw order: dx = below(9) - 4, dy = below(9) - 4, flip = below(2). */
    dt_rng m;
    dt_rng_seed(&m, 42);
    double worst = 0;
    for (int k = 0; k < N; k++) {
        int dx = (int)dt_rng_below(&m, 9) - 4, dy = (int)dt_rng_below(&m, 9) - 4;
        int flip = (int)dt_rng_below(&m, 2);
        expect_aug(&d, k, dx, dy, flip, want);
        double e = max_diff(x1 + k * 3072, want, 3072);
        if (e > worst) worst = e;
    }
    CHECK_NEAR(worst, 0.0, 1e-6);

    /* A seed that flips without shifting: exactly the mirror image. A seed with a shift and
     * no flip: moved, padded with normalised zero pixels. */
    int found_flip = 0, found_shift = 0;
    for (uint64_t seed = 1; seed < 20000 && !(found_flip && found_shift); seed++) {
        dt_rng_seed(&m, seed);
        int dx = (int)dt_rng_below(&m, 9) - 4, dy = (int)dt_rng_below(&m, 9) - 4;
        int flip = (int)dt_rng_below(&m, 2);
        int one = 0;
        float out[3072];
        if (!found_flip && dx == 0 && dy == 0 && flip) {
            found_flip = 1;
            dt_rng_seed(&m, seed);
            dt_batch_fill(&d, &one, 1, out, NULL, 1, &m);
            int mirrored = 1;
            for (int ch = 0; ch < 3; ch++)
                for (int rr = 0; rr < 32; rr++)
                    for (int c = 0; c < 32; c++)
                        if (out[ch * 1024 + rr * 32 + c] !=
                            norm(&d, ch, d.images[ch * 1024 + rr * 32 + (31 - c)]))
                            mirrored = 0;
            CHECK_MSG(mirrored, "seed %llu: flip without shift is not a mirror image",
                      (unsigned long long)seed);
            CHECK_NEAR(out[5 * 32 + 0], norm(&d, 0, 32), 1e-6); /* left column = old right */
            CHECK_NEAR(out[5 * 32 + 31], norm(&d, 0, 1), 1e-6);
        }
        if (!found_shift && dx == 3 && dy == -2 && !flip) {
            found_shift = 1;
            dt_rng_seed(&m, seed);
            dt_batch_fill(&d, &one, 1, out, NULL, 1, &m);
            /* out(r, c) = img(r - 2, c + 3): rows 0..1 and columns 29..31 are padding. */
            CHECK_NEAR(out[0 * 32 + 10], norm(&d, 0, 0), 1e-6);            /* top pad, R */
            CHECK_NEAR(out[1024 + 1 * 32 + 10], norm(&d, 1, 0), 1e-6);     /* top pad, G */
            CHECK_NEAR(out[2048 + 10 * 32 + 30], norm(&d, 2, 0), 1e-6);    /* right pad, B */
            CHECK_NEAR(out[10 * 32 + 0], norm(&d, 0, 0 + 3 + 1), 1e-6);    /* R = sx + 1 */
            CHECK_NEAR(out[10 * 32 + 28], norm(&d, 0, 31 + 1), 1e-6);
            CHECK_NEAR(out[1024 + 10 * 32 + 5], norm(&d, 1, 8 + 1), 1e-6); /* G = sy + 1 */
            CHECK_NEAR(out[2048 + 2 * 32 + 0], norm(&d, 2, 100), 1e-6); /* image 0: B = 100 */
            CHECK(norm(&d, 0, 0) < -1.9f); /* padding is raw 0, not normalised 0 */
        }
    }
    CHECK(found_flip && found_shift);

    /* Over many seeds: offsets cover exactly -4..4 and about half the images flip. */
    int seen[9] = {0}, flips = 0, bad = 0, total = 0;
    for (uint64_t seed = 0; seed < 1000; seed++) {
        dt_rng_seed(&m, seed * 7919 + 3);
        int one = 1, dx, flip;
        float out[3072];
        dt_batch_fill(&d, &one, 1, out, NULL, 1, &m);
        if (!infer(&d, out, &dx, &flip)) continue; /* centre pixels are never padding */
        total++;
        if (dx < -4 || dx > 4) { bad++; continue; }
        seen[dx + 4]++;
        flips += flip;
    }
    CHECK(total == 1000 && bad == 0);
    int all_seen = 1;
    for (int i = 0; i < 9; i++) if (seen[i] < 50) all_seen = 0;
    CHECK_MSG(all_seen, "offset histogram too uneven");
    CHECK_MSG(flips > 400 && flips < 600, "flips = %d of 1000", flips);

    /* augment = 0, or no rng: plain normalised copy. */
    float plain[3072];
    int two = 2;
    expect_aug(&d, 2, 0, 0, 0, want);
    dt_batch_fill(&d, &two, 1, plain, NULL, 0, &r1);
    CHECK_NEAR(max_diff(plain, want, 3072), 0.0, 1e-6);
    dt_batch_fill(&d, &two, 1, plain, NULL, 1, NULL);
    CHECK_NEAR(max_diff(plain, want, 3072), 0.0, 1e-6);
    dt_dataset_free(&d);
}

int main(void) {
    test_plain_batch();
    test_augment();
    return test_summary("test_batch");
}
