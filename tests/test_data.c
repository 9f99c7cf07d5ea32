/* Dataset loading (IDX raw/gzip, CIFAR-10 binary), normalisation of a loaded set, and the
 * error messages for malformed files. Everything runs on small files written to a temp dir.
 * Batch assembly and augmentation on their own: test_batch.c. */
#include "dtrain.h"
#include "check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void rm_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* Writes bytes raw, or gzip-compressed when gz. */
static void write_bytes(const char *path, const uint8_t *data, size_t len, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
        if (len) gzwrite(f, data, (unsigned)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
        if (len) fwrite(data, 1, len, f);
        fclose(f);
    }
}

/* IDX images file: header claims n images of rows x cols; `have` pixel bytes are written. */
static void write_idx_images(const char *path, uint32_t magic, uint32_t n, uint32_t rows,
                             uint32_t cols, const uint8_t *pix, size_t have, int gz) {
    uint8_t *buf = malloc(16 + have);
    put_be32(buf, magic); put_be32(buf + 4, n); put_be32(buf + 8, rows); put_be32(buf + 12, cols);
    if (have) memcpy(buf + 16, pix, have);
    write_bytes(path, buf, 16 + have, gz);
    free(buf);
}

static void write_idx_labels(const char *path, uint32_t n, const uint8_t *lab, size_t have, int gz) {
    uint8_t *buf = malloc(8 + have);
    put_be32(buf, 0x00000801u); put_be32(buf + 4, n);
    if (have) memcpy(buf + 8, lab, have);
    write_bytes(path, buf, 8 + have, gz);
    free(buf);
}

/* A small MNIST-like set: n images of 28x28, pixel (k, i) = (k * 31 + i * 7) % 256. */
#define MN 5
#define MP (28 * 28)
static uint8_t mn_pix[MN * MP], mn_lab[MN] = {3, 0, 9, 7, 1};
static void make_mnist_pixels(void) {
    for (int k = 0; k < MN; k++)
        for (int i = 0; i < MP; i++) mn_pix[k * MP + i] = (uint8_t)((k * 31 + i * 7) % 256);
}

static void write_mnist_split(const char *dir, const char *split, const char *sep, int gz) {
    char ip[512], lp[512];
    snprintf(ip, sizeof ip, "%s/%s-images%sidx3-ubyte%s", dir, split, sep, gz ? ".gz" : "");
    snprintf(lp, sizeof lp, "%s/%s-labels%sidx1-ubyte%s", dir, split, sep, gz ? ".gz" : "");
    write_idx_images(ip, 0x803, MN, 28, 28, mn_pix, sizeof mn_pix, gz);
    write_idx_labels(lp, MN, mn_lab, MN, gz);
}

static int same_mnist(const dt_dataset *d) {
    return d->n == MN && d->c == 1 && d->h == 28 && d->w == 28 && d->classes == 10 &&
           d->images && d->labels && memcmp(d->images, mn_pix, sizeof mn_pix) == 0 &&
           memcmp(d->labels, mn_lab, MN) == 0;
}

static int err_has(const char *a, const char *b) {
    const char *e = dt_last_error();
    int ok = strstr(e, a) != NULL && (!b || strstr(e, b) != NULL);
    if (!ok) fprintf(stderr, "  last error was: %s\n", e);
    return ok;
}

static int is_zeroed(const dt_dataset *d) {
    return d->n == 0 && d->images == NULL && d->labels == NULL;
}

static void test_idx(void) {
    make_mnist_pixels();
    for (int gz = 0; gz < 2; gz++) {
        const char *ip = tpath(gz ? "img.gz" : "img"), *lp = tpath(gz ? "lab.gz" : "lab");
        write_idx_images(ip, 0x803, MN, 28, 28, mn_pix, sizeof mn_pix, gz);
        write_idx_labels(lp, MN, mn_lab, MN, gz);
        dt_dataset d;
        memset(&d, 0xAB, sizeof d); /* garbage in out must not matter */
        dt_status st = dt_idx_load(ip, lp, &d);
        CHECK_MSG(st == DT_OK, "gz=%d: %s", gz, dt_last_error());
        CHECK_MSG(same_mnist(&d), "gz=%d: pixels/labels differ", gz);
        CHECK(d.images && d.images[MP + 1] == (uint8_t)((31 + 7) % 256));
        CHECK(d.labels && d.labels[2] == 9);
        dt_dataset_free(&d);
        CHECK(is_zeroed(&d) && d.c == 0 && d.name[0] == 0);
    }
    /* Non-square images keep rows/cols. */
    uint8_t px[2 * 3 * 4];
    for (int i = 0; i < 24; i++) px[i] = (uint8_t)(i * 10);
    uint8_t lb[2] = {4, 5};
    write_idx_images(tpath("rect"), 0x803, 2, 3, 4, px, sizeof px, 0);
    write_idx_labels(tpath("rect-l"), 2, lb, 2, 0);
    dt_dataset d = {0};
    CHECK(dt_idx_load(tpath("rect"), tpath("rect-l"), &d) == DT_OK);
    CHECK(d.n == 2 && d.h == 3 && d.w == 4 && d.images && d.images[23] == 230 && d.labels[1] == 5);
    dt_dataset_free(&d);
}

static void test_dataset_load_layouts(void) {
    /* mnist: raw files, train and test. */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/mnist", tmpdir);
    mkdir(dir, 0700);
    write_mnist_split(dir, "train", "-", 0);
    write_mnist_split(dir, "t10k", "-", 0);
    for (int train = 0; train < 2; train++) {
        dt_dataset d = {0};
        dt_status st = dt_dataset_load("mnist", dir, train, &d);
        CHECK_MSG(st == DT_OK, "%s", dt_last_error());
        CHECK(same_mnist(&d));
        CHECK(strcmp(d.name, "mnist") == 0 && d.augment == 0);
        CHECK_NEAR(d.mean[0], 0.1307, 1e-6);
        CHECK_NEAR(d.std[0], 0.3081, 1e-6);
        dt_dataset_free(&d);
    }
    /* Trailing slash in the directory. */
    char dirslash[520];
    snprintf(dirslash, sizeof dirslash, "%s/", dir);
    dt_dataset d = {0};
    CHECK(dt_dataset_load("mnist", dirslash, 1, &d) == DT_OK && same_mnist(&d));
    dt_dataset_free(&d);

    /* fashion-mnist: gzip files (the Debian / Zalando layout). */
    snprintf(dir, sizeof dir, "%s/fashion", tmpdir);
    mkdir(dir, 0700);
    write_mnist_split(dir, "train", "-", 1);
    write_mnist_split(dir, "t10k", "-", 1);
    CHECK_MSG(dt_dataset_load("fashion-mnist", dir, 0, &d) == DT_OK, "%s", dt_last_error());
    CHECK(same_mnist(&d) && strcmp(d.name, "fashion-mnist") == 0);
    CHECK_NEAR(d.mean[0], 0.2860, 1e-6);
    CHECK_NEAR(d.std[0], 0.3530, 1e-6);
    dt_dataset_free(&d);

    /* The "train-images.idx3-ubyte" dot spelling. */
    snprintf(dir, sizeof dir, "%s/dots", tmpdir);
    mkdir(dir, 0700);
    write_mnist_split(dir, "train", ".", 0);
    CHECK_MSG(dt_dataset_load("mnist", dir, 1, &d) == DT_OK, "%s", dt_last_error());
    CHECK(same_mnist(&d));
    dt_dataset_free(&d);
}

/* CIFAR record: label, then R, G, B planes; pixel value encodes (record, channel, pos). */
static uint8_t cifar_px(int rec, int ch, int pos) { return (uint8_t)(rec * 11 + ch * 80 + pos * 3); }

static void write_cifar(const char *path, int first_rec, int nrec, const uint8_t *labels) {
    uint8_t *buf = malloc((size_t)nrec * 3073);
    for (int r = 0; r < nrec; r++) {
        uint8_t *p = buf + (size_t)r * 3073;
        p[0] = labels[r];
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < 1024; i++) p[1 + ch * 1024 + i] = cifar_px(first_rec + r, ch, i);
    }
    write_bytes(path, buf, (size_t)nrec * 3073, 0);
    free(buf);
}

static void test_cifar(void) {
    uint8_t la[2] = {6, 9}, lb[3] = {0, 1, 2};
    write_cifar(tpath("c1.bin"), 0, 2, la);
    write_cifar(tpath("c2.bin"), 2, 3, lb);
    const char *paths[2] = {tpath("c1.bin"), tpath("c2.bin")};
    dt_dataset d = {0};
    CHECK_MSG(dt_cifar_load(paths, 2, &d) == DT_OK, "%s", dt_last_error());
    CHECK(d.n == 5 && d.c == 3 && d.h == 32 && d.w == 32 && d.classes == 10 && d.augment == 1);
    CHECK(d.labels && d.labels[0] == 6 && d.labels[1] == 9 && d.labels[2] == 0 && d.labels[4] == 2);
    if (d.n == 5) {
        /* Record 3, pixel (y=5, x=7): R, G, B land in planes 0, 1, 2 of image 3. */
        int pos = 5 * 32 + 7;
        const uint8_t *im = d.images + 3 * 3072;
        CHECK(im[0 * 1024 + pos] == cifar_px(3, 0, pos));
        CHECK(im[1 * 1024 + pos] == cifar_px(3, 1, pos));
        CHECK(im[2 * 1024 + pos] == cifar_px(3, 2, pos));
        int all = 1;
        for (int r = 0; r < 5; r++)
            for (int ch = 0; ch < 3; ch++)
                for (int i = 0; i < 1024; i++)
                    if (d.images[r * 3072 + ch * 1024 + i] != cifar_px(r, ch, i)) all = 0;
        CHECK(all);
    }
    CHECK_NEAR(d.mean[0], 0.4914, 1e-6); CHECK_NEAR(d.mean[1], 0.4822, 1e-6);
    CHECK_NEAR(d.mean[2], 0.4465, 1e-6); CHECK_NEAR(d.std[0], 0.2470, 1e-6);
    CHECK_NEAR(d.std[1], 0.2435, 1e-6); CHECK_NEAR(d.std[2], 0.2616, 1e-6);

    /* Truncate keeps the first n. */
    dt_dataset_truncate(&d, 2);
    CHECK(d.n == 2 && d.labels[1] == 9 && d.images[3072 + 10] == cifar_px(1, 0, 10));
    dt_dataset_free(&d);

    /* dt_dataset_load: train batches inside cifar-10-batches-bin/, test batch directly. */
    char dir[512], sub[600], p[700];
    snprintf(dir, sizeof dir, "%s/cifar", tmpdir);
    snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
    mkdir(dir, 0700);
    mkdir(sub, 0700);
    for (int b = 1; b <= 5; b++) {
        uint8_t l[1] = {(uint8_t)b};
        snprintf(p, sizeof p, "%s/data_batch_%d.bin", sub, b);
        write_cifar(p, b, 1, l);
    }
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    write_cifar(p, 0, 2, la);
    CHECK_MSG(dt_dataset_load("cifar10", dir, 1, &d) == DT_OK, "%s", dt_last_error());
    CHECK(d.n == 5 && d.labels[0] == 1 && d.labels[4] == 5 && strcmp(d.name, "cifar10") == 0);
    CHECK(d.n == 5 && d.images[4 * 3072 + 2 * 1024 + 9] == cifar_px(5, 2, 9));
    dt_dataset_free(&d);
    CHECK_MSG(dt_dataset_load("cifar10", dir, 0, &d) == DT_OK, "%s", dt_last_error());
    CHECK(d.n == 2 && d.labels[1] == 9 && d.augment == 1);
    dt_dataset_free(&d);
}

/* dt_dataset_load_first: the first k examples, as a whole load truncated to k would keep them,
 * reading no further (so a file damaged past them loads, and one damaged within them does not). */
static void test_load_first(void) {
    char dir[512];
    for (int gz = 0; gz < 2; gz++) {
        snprintf(dir, sizeof dir, "%s/first%d", tmpdir, gz);
        mkdir(dir, 0700);
        write_mnist_split(dir, "train", "-", gz);
        const int ks[] = {1, 3, MN, MN + 5, 0};
        for (int i = 0; i < 5; i++) {
            const int k = ks[i], want = k > 0 && k < MN ? k : MN;
            dt_dataset d = {0};
            const dt_status st = dt_dataset_load_first("mnist", dir, 1, k, &d);
            CHECK_MSG(st == DT_OK, "gz=%d k=%d: %s", gz, k, dt_last_error());
            CHECK_MSG(d.n == want && d.images && memcmp(d.images, mn_pix, (size_t)want * MP) == 0 &&
                      memcmp(d.labels, mn_lab, (size_t)want) == 0 && strcmp(d.name, "mnist") == 0,
                      "gz=%d k=%d: n=%d, not the first %d examples", gz, k, d.n, want);
            dt_dataset_free(&d);
        }
    }
    /* images cut after the second, a label out of range in the last: the first two load */
    snprintf(dir, sizeof dir, "%s/firstcut", tmpdir);
    mkdir(dir, 0700);
    char ip[600], lp[600];
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte", dir);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte", dir);
    uint8_t bad_lab[MN];
    memcpy(bad_lab, mn_lab, MN);
    bad_lab[MN - 1] = 12;
    write_idx_images(ip, 0x803, MN, 28, 28, mn_pix, 2 * MP, 0);
    write_idx_labels(lp, MN, bad_lab, MN, 0);
    dt_dataset d = {0};
    CHECK_MSG(dt_dataset_load_first("mnist", dir, 1, 2, &d) == DT_OK && d.n == 2 &&
              memcmp(d.images, mn_pix, 2 * MP) == 0, "%s", dt_last_error());
    dt_dataset_free(&d);
    CHECK(dt_dataset_load_first("mnist", dir, 1, 3, &d) == DT_ERR_FORMAT && err_has("truncated", "5 images") && is_zeroed(&d));
    CHECK(dt_dataset_load("mnist", dir, 1, &d) == DT_ERR_FORMAT && is_zeroed(&d));
    write_idx_images(ip, 0x803, MN, 28, 28, mn_pix, sizeof mn_pix, 0);
    CHECK(dt_dataset_load_first("mnist", dir, 1, MN - 1, &d) == DT_OK && d.n == MN - 1);
    dt_dataset_free(&d);
    CHECK(dt_dataset_load_first("mnist", dir, 1, MN, &d) == DT_ERR_FORMAT && err_has("label 12", NULL));

    /* CIFAR-10: the first 3 training records span three batch files (test_cifar's layout) */
    snprintf(dir, sizeof dir, "%s/cifar", tmpdir);
    CHECK_MSG(dt_dataset_load_first("cifar10", dir, 1, 3, &d) == DT_OK, "%s", dt_last_error());
    CHECK(d.n == 3 && d.labels[0] == 1 && d.labels[2] == 3 && d.images[2 * 3072 + 1024 + 5] == cifar_px(3, 1, 5));
    dt_dataset_free(&d);
    CHECK(dt_dataset_load_first("cifar10", dir, 1, 9, &d) == DT_OK && d.n == 5);
    dt_dataset_free(&d);
}

static void test_normalise(void) {
    dt_dataset d = {0};
    CHECK(dt_dataset_load("mnist", tpath("mnist"), 1, &d) == DT_OK);
    if (d.n != MN) return;
    int idx[3] = {4, 0, 2};
    float x[3 * MP + 1];
    uint8_t y[3];
    x[3 * MP] = 12345.0f; /* guard */
    dt_rng r;
    dt_rng_seed(&r, 1);
    dt_batch_fill(&d, idx, 3, x, y, 1, &r); /* augment asked, but MNIST has augment = 0 */
    CHECK(y[0] == mn_lab[4] && y[1] == mn_lab[0] && y[2] == mn_lab[2]);
    double maxerr = 0;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < MP; i++) {
            double want = (mn_pix[idx[b] * MP + i] / 255.0 - 0.1307) / 0.3081;
            double e = fabs(x[b * MP + i] - want);
            if (e > maxerr) maxerr = e;
        }
    CHECK_NEAR(maxerr, 0.0, 1e-5);
    /* A known pixel: image 4, pixel 10 = (124 + 70) % 256 = 194. */
    CHECK_NEAR(x[10], (194 / 255.0 - 0.1307) / 0.3081, 1e-5);
    CHECK_NEAR(x[MP + 0], (0 / 255.0 - 0.1307) / 0.3081, 1e-5);
    CHECK(x[3 * MP] == 12345.0f);
    dt_dataset_free(&d);
}

static void test_errors(void) {
    dt_dataset d;
    dt_status st;
    make_mnist_pixels();
    char goodl[512]; /* tpath() recycles its buffers: keep a copy */
    snprintf(goodl, sizeof goodl, "%s", tpath("good-l"));
    write_idx_labels(goodl, MN, mn_lab, MN, 0);

    /* Missing file. */
    memset(&d, 0x5A, sizeof d);
    st = dt_idx_load(tpath("nope-images"), goodl, &d);
    CHECK(st == DT_ERR_IO);
    CHECK(err_has("nope-images", "No such file"));
    CHECK(is_zeroed(&d));
    printf("missing file:      %s\n", dt_last_error());

    /* Missing dataset directory contents: names the first path tried, suggests get-data. */
    char empty[512];
    snprintf(empty, sizeof empty, "%s/empty", tmpdir);
    mkdir(empty, 0700);
    st = dt_dataset_load("mnist", empty, 1, &d);
    CHECK(st == DT_ERR_IO);
    CHECK(err_has("empty/train-images-idx3-ubyte", "scripts/get-data"));
    printf("missing dataset:   %s\n", dt_last_error());
    st = dt_dataset_load("cifar10", empty, 0, &d);
    CHECK(st == DT_ERR_IO);
    CHECK(err_has("empty/test_batch.bin", "not found"));
    printf("missing cifar:     %s\n", dt_last_error());
    /* Images present, labels missing. */
    write_idx_images(tpath("empty/t10k-images-idx3-ubyte"), 0x803, MN, 28, 28, mn_pix,
                     sizeof mn_pix, 0);
    st = dt_dataset_load("mnist", empty, 0, &d);
    CHECK(st == DT_ERR_IO && err_has("empty/t10k-labels-idx1-ubyte", "not found"));

    /* Wrong IDX magic (raw and gz), and labels/images swapped. */
    write_idx_images(tpath("magic"), 0x00000000, MN, 28, 28, mn_pix, sizeof mn_pix, 0);
    st = dt_idx_load(tpath("magic"), goodl, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("/magic", "bad IDX magic 0x00000000"));
    CHECK(is_zeroed(&d));
    printf("wrong magic:       %s\n", dt_last_error());
    write_idx_images(tpath("magic.gz"), 0x00000802, MN, 28, 28, mn_pix, sizeof mn_pix, 1);
    st = dt_idx_load(tpath("magic.gz"), goodl, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("magic.gz", "expected 0x00000803"));
    write_idx_images(tpath("good-i"), 0x803, MN, 28, 28, mn_pix, sizeof mn_pix, 0);
    st = dt_idx_load(goodl, tpath("good-i"), &d);
    CHECK(st == DT_ERR_FORMAT && err_has("good-l", "swapped"));

    /* Truncated image file: raw, gz, and header only partly there. */
    write_idx_images(tpath("trunc-i"), 0x803, 60000, 28, 28, mn_pix, 1000 - 16, 0);
    st = dt_idx_load(tpath("trunc-i"), goodl, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("trunc-i", "truncated"));
    CHECK(err_has("47040016 bytes", "file has 1000 bytes"));
    CHECK(is_zeroed(&d));
    printf("truncated images:  %s\n", dt_last_error());
    write_idx_images(tpath("trunc-i.gz"), 0x803, MN + 1, 28, 28, mn_pix, sizeof mn_pix, 1);
    st = dt_idx_load(tpath("trunc-i.gz"), goodl, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("trunc-i.gz", "truncated"));
    uint8_t hdr[6] = {0, 0, 8, 3, 0, 0};
    write_bytes(tpath("trunc-h"), hdr, sizeof hdr, 0);
    st = dt_idx_load(tpath("trunc-h"), goodl, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("trunc-h", "truncated"));
    write_bytes(tpath("zero-len"), hdr, 0, 0);
    st = dt_idx_load(tpath("zero-len"), goodl, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("zero-len", "truncated"));
    /* A gzip stream cut in half. */
    {
        write_idx_images(tpath("cut.gz"), 0x803, MN, 28, 28, mn_pix, sizeof mn_pix, 1);
        FILE *f = fopen(tpath("cut.gz"), "rb");
        uint8_t buf[8192];
        size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        write_bytes(tpath("cut.gz"), buf, len / 2, 0);
        st = dt_idx_load(tpath("cut.gz"), goodl, &d);
        CHECK(st == DT_ERR_FORMAT && err_has("cut.gz", "truncated"));
        CHECK(is_zeroed(&d));
    }

    /* Truncated label file. */
    write_idx_labels(tpath("trunc-l"), MN, mn_lab, MN - 2, 0);
    st = dt_idx_load(tpath("good-i"), tpath("trunc-l"), &d);
    CHECK(st == DT_ERR_FORMAT && err_has("trunc-l", "truncated"));
    CHECK(is_zeroed(&d));
    printf("truncated labels:  %s\n", dt_last_error());

    /* Image / label count mismatch. */
    write_idx_labels(tpath("short-l"), MN - 1, mn_lab, MN - 1, 0);
    st = dt_idx_load(tpath("good-i"), tpath("short-l"), &d);
    CHECK(st == DT_ERR_FORMAT && err_has("good-i", "image count 5 does not match label count 4"));
    CHECK(err_has("short-l", NULL));
    CHECK(is_zeroed(&d));
    printf("count mismatch:    %s\n", dt_last_error());

    /* Label out of range. */
    uint8_t badlab[MN] = {1, 2, 3, 4, 12};
    write_idx_labels(tpath("range-l.gz"), MN, badlab, MN, 1);
    st = dt_idx_load(tpath("good-i"), tpath("range-l.gz"), &d);
    CHECK(st == DT_ERR_FORMAT && err_has("range-l.gz", "label 12 at index 4 out of range 0..9"));
    CHECK(is_zeroed(&d));
    printf("label range:       %s\n", dt_last_error());
    uint8_t edgelab[MN] = {9, 10, 0, 0, 0}; /* 9 is the last valid class, 10 the first bad */
    write_idx_labels(tpath("edge-l"), MN, edgelab, MN, 0);
    st = dt_idx_load(tpath("good-i"), tpath("edge-l"), &d);
    CHECK(st == DT_ERR_FORMAT && err_has("edge-l", "label 10 at index 1"));

    /* CIFAR: size not a multiple of 3073; label out of range; missing file. */
    uint8_t lab1[2] = {1, 2};
    write_cifar(tpath("odd.bin"), 0, 2, lab1);
    {
        FILE *f = fopen(tpath("odd.bin"), "ab");
        if (f) { fputc(7, f); fclose(f); }
    }
    char good[512];
    snprintf(good, sizeof good, "%s", tpath("cgood.bin"));
    write_cifar(good, 0, 2, lab1);
    const char *pp[2] = {good, tpath("odd.bin")};
    st = dt_cifar_load(pp, 2, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("odd.bin", "6147 bytes is not a positive multiple of 3073"));
    CHECK(is_zeroed(&d));
    printf("cifar size:        %s\n", dt_last_error());
    uint8_t lab2[2] = {3, 10};
    write_cifar(tpath("clab.bin"), 0, 2, lab2);
    pp[1] = tpath("clab.bin");
    st = dt_cifar_load(pp, 2, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("clab.bin", "label 10 at record 1 out of range 0..9"));
    CHECK(is_zeroed(&d));
    printf("cifar label:       %s\n", dt_last_error());
    pp[1] = tpath("cmissing.bin");
    st = dt_cifar_load(pp, 2, &d);
    CHECK(st == DT_ERR_IO && err_has("cmissing.bin", "No such file"));
    write_bytes(tpath("cempty.bin"), lab1, 0, 0);
    pp[1] = tpath("cempty.bin");
    st = dt_cifar_load(pp, 2, &d);
    CHECK(st == DT_ERR_FORMAT && err_has("cempty.bin", "0 bytes"));

    /* Unknown dataset name. */
    st = dt_dataset_load("imagenet", tmpdir, 1, &d);
    CHECK(st == DT_ERR_ARG);
    CHECK(err_has("unknown dataset 'imagenet'", "mnist, fashion-mnist, cifar10, kjv, fortunes"));
    CHECK(is_zeroed(&d));
    printf("unknown dataset:   %s\n", dt_last_error());
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dtrain-test-data-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_idx();
    test_dataset_load_layouts();
    test_cifar();
    test_load_first();
    test_normalise();
    test_errors();
    rm_tree(tmpdir);
    struct stat st;
    CHECK(stat(tmpdir, &st) != 0); /* cleaned up */
    return test_summary("test_data");
}
