/* Datasets: MNIST / Fashion-MNIST (IDX, raw or gzip: idx.c) and CIFAR-10 (binary batches),
 * loaded whole into memory as uint8 CHW images (batch.c turns examples into normalised float
 * batches); here CIFAR-10's reading and the datasets found by name in their folders.
 *
 * Every check on file contents reports through dt_fail: a malformed file is a runtime
 * error, never an assertion. */
#include "dtrain.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/paths.h"
#include "data/dataset_share.h"
#include "data/idx.h"
#include "data/text.h"

#define CIFAR_SIDE 32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10
#define PATH_BUF 4096

static const char *errno_text(int e) { return e ? strerror(e) : "cannot open"; }

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* dir + "/" + a + b (dir "" means the current directory). 0 when the path does not fit. */
static int join_path(char *buf, size_t size, const char *dir, const char *a, const char *b) {
    if (!dir || !*dir) dir = ".";
    size_t len = strlen(dir);
    const char *sep = (len > 0 && dir[len - 1] == '/') ? "" : "/";
    int r = snprintf(buf, size, "%s%s%s%s", dir, sep, a, b ? b : "");
    return r >= 0 && (size_t)r < size;
}

/* ---------------------------------------------------------------- CIFAR-10 */

/* The first max_n records (0: all) of the batch files, in order. */
static dt_status cifar_load_first(const char *const *paths, int npaths, int max_n, dt_dataset *out) {
    assert(out);
    memset(out, 0, sizeof *out);
    if (!paths || npaths <= 0) return dt_fail(DT_ERR_ARG, "cifar: no batch files given");

    /* Pass 1: sizes. */
    long long total = 0;
    for (int i = 0; i < npaths; i++) {
        struct stat sb;
        if (stat(paths[i], &sb) != 0)
            return dt_fail(DT_ERR_IO, "%s: cannot open: %s", paths[i], errno_text(errno));
        if (!S_ISREG(sb.st_mode))
            return dt_fail(DT_ERR_IO, "%s: is %s, expected a CIFAR-10 batch file", paths[i],
                           dt_node_kind(sb.st_mode));
        long long sz = (long long)sb.st_size;
        if (sz <= 0 || sz % CIFAR_RECORD != 0)
            return dt_fail(DT_ERR_FORMAT,
                           "%s: size %lld bytes is not a positive multiple of %d (1 label byte + "
                           "%d pixel bytes per record)",
                           paths[i], sz, CIFAR_RECORD, CIFAR_PIXELS);
        total += sz / CIFAR_RECORD;
        if (total > INT_MAX / CIFAR_PIXELS)
            return dt_fail(DT_ERR_FORMAT, "%s: too many records (%lld in total)", paths[i], total);
    }

    const long long want = dt_first_count(max_n, total);
    uint8_t *images = malloc((size_t)want * CIFAR_PIXELS);
    uint8_t *labels = malloc((size_t)want);
    if (!images || !labels) {
        free(images);
        free(labels);
        return dt_nomem("%lld cifar images", total);
    }

    /* Pass 2: records, label byte then R, G, B planes (already CHW). */
    dt_status st = DT_OK;
    long long n = 0;
    uint8_t rec[CIFAR_RECORD];
    for (int i = 0; i < npaths && st == DT_OK && n < want; i++) {
        FILE *f;
        if ((st = dt_open_regular(paths[i], &f, NULL)) != DT_OK) break;
        long long r = 0;
        while (st == DT_OK && n < want) {
            size_t got = fread(rec, 1, sizeof rec, f);
            if (got == 0 && !ferror(f)) break;
            if (got != sizeof rec || n >= total) {
                st = ferror(f) ? dt_fail(DT_ERR_IO, "%s: read error: %s", paths[i],
                                         errno_text(errno))
                               : dt_fail(DT_ERR_FORMAT, "%s: file changed while reading "
                                         "(partial record %lld)", paths[i], r);
                break;
            }
            if (rec[0] >= CIFAR_CLASSES) {
                st = dt_fail(DT_ERR_FORMAT, "%s: label %u at record %lld out of range 0..%d",
                             paths[i], rec[0], r, CIFAR_CLASSES - 1);
                break;
            }
            labels[n] = rec[0];
            memcpy(images + (size_t)n * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
            n++;
            r++;
        }
        fclose(f);
    }
    if (st == DT_OK && n != want)
        st = dt_fail(DT_ERR_FORMAT, "%s: file changed while reading (%lld records, expected %lld)",
                     paths[npaths - 1], n, want);
    if (st != DT_OK) {
        free(images);
        free(labels);
        return st;
    }

    static const float mean[3] = {0.4914f, 0.4822f, 0.4465f};
    static const float sd[3] = {0.2470f, 0.2435f, 0.2616f};
    snprintf(out->name, sizeof out->name, "cifar10");
    out->n = (int)want;
    out->c = 3;
    out->h = out->w = CIFAR_SIDE;
    out->classes = CIFAR_CLASSES;
    out->images = images;
    out->labels = labels;
    memcpy(out->mean, mean, sizeof mean);
    memcpy(out->std, sd, sizeof sd);
    out->augment = 1;
    return DT_OK;
}

dt_status dt_cifar_load(const char *const *paths, int npaths, dt_dataset *out) {
    return cifar_load_first(paths, npaths, 0, out);
}

/* ---------------------------------------------------------------- by name */

/* Finds base in dir under its accepted spellings: "<p>-<kind>-idxN-ubyte" or
 * "<p>-<kind>.idxN-ubyte", each raw or ".gz". */
static int idx_find(char *buf, size_t size, const char *dir, const char *dash, const char *dot,
                    char *first, size_t first_size, dt_status *st) {
    const char *names[2] = {dash, dot};
    const char *suffix[2] = {"", ".gz"};
    for (int a = 0; a < 2; a++) {
        for (int b = 0; b < 2; b++) {
            if (!join_path(buf, size, dir, names[a], suffix[b])) {
                *st = dt_fail(DT_ERR_ARG, "data directory path too long: %.200s...", dir);
                return 0;
            }
            if (a == 0 && b == 0) snprintf(first, first_size, "%s", buf);
            if (file_exists(buf)) return 1;
        }
    }
    *st = DT_ERR_IO;
    return 0;
}

/* The file of one part (kind "images", IDX dimensions nd = 3; "labels", 1) of a split under
 * either spelling into buf, or an error naming the first spelling tried. */
static dt_status idx_find_part(char *buf, size_t size, const char *dir, const char *name, const char *split,
                               const char *kind, int nd) {
    char dash[64], dot[64], first[PATH_BUF];
    snprintf(dash, sizeof dash, "%s-%s-idx%d-ubyte", split, kind, nd);
    snprintf(dot, sizeof dot, "%s-%s.idx%d-ubyte", split, kind, nd);
    dt_status st = DT_OK;
    if (idx_find(buf, size, dir, dash, dot, first, sizeof first, &st)) return DT_OK;
    if (st == DT_ERR_IO)
        st = dt_fail(DT_ERR_IO, "%s: not found (nor .gz, nor the '%s' spelling); %s %s "
                     "%s missing: run scripts/get-data, or name its folder with --data-dir DIR (or the folder holding "
                     "%s/ with DTRAIN_DATA)",
                     first, dot, name, split, kind, name);
    return st;
}

static dt_status load_idx_named(const char *name, const char *dir, int train, int max_n, dt_dataset *out) {
    const char *split = train ? "train" : "t10k";
    char ipath[PATH_BUF], lpath[PATH_BUF];
    dt_status st = idx_find_part(ipath, sizeof ipath, dir, name, split, "images", 3);
    if (st == DT_OK) st = idx_find_part(lpath, sizeof lpath, dir, name, split, "labels", 1);
    if (st != DT_OK) return st;
    st = dt_idx_load_first(ipath, lpath, max_n, out);
    if (st != DT_OK) return st;
    if (out->h != 28 || out->w != 28) {
        dt_status e = dt_fail(DT_ERR_FORMAT, "%s: images are %dx%d, expected 28x28 for %s",
                              ipath, out->h, out->w, name);
        dt_dataset_free(out);
        return e;
    }
    int fashion = strcmp(name, "fashion-mnist") == 0;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->mean[0] = out->mean[1] = out->mean[2] = fashion ? 0.2860f : 0.1307f;
    out->std[0] = out->std[1] = out->std[2] = fashion ? 0.3530f : 0.3081f;
    out->augment = 0;
    return DT_OK;
}

static dt_status load_cifar_named(const char *dir, int train, int max_n, dt_dataset *out) {
    static const char *train_files[5] = {"data_batch_1.bin", "data_batch_2.bin",
                                         "data_batch_3.bin", "data_batch_4.bin",
                                         "data_batch_5.bin"};
    static const char *test_files[1] = {"test_batch.bin"};
    const char *const *files = train ? train_files : test_files;
    int nfiles = train ? 5 : 1;

    /* The batches directly in dir, or in the folder the official tarball unpacks to. */
    char sub[PATH_BUF], probe[PATH_BUF], first[PATH_BUF];
    const char *base = dir && *dir ? dir : ".";
    if (!join_path(first, sizeof first, base, files[0], NULL) ||
        !join_path(sub, sizeof sub, base, "cifar-10-batches-bin", NULL) ||
        !join_path(probe, sizeof probe, sub, files[0], NULL))
        return dt_fail(DT_ERR_ARG, "data directory path too long: %.200s...", base);
    if (!file_exists(first)) {
        if (!file_exists(probe))
            return dt_fail(DT_ERR_IO, "%s: not found (nor in cifar-10-batches-bin/); cifar10 %s "
                           "batches missing - run scripts/get-data cifar10, or unpack "
                           "cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/ there",
                           first, train ? "train" : "test");
        base = sub;
    }
    char paths[5][PATH_BUF];
    const char *pp[5];
    for (int i = 0; i < nfiles; i++) {
        if (!join_path(paths[i], sizeof paths[i], base, files[i], NULL))
            return dt_fail(DT_ERR_ARG, "data directory path too long: %.200s...", base);
        pp[i] = paths[i];
    }
    return cifar_load_first(pp, nfiles, max_n, out);
}

dt_status dt_dataset_load_first(const char *name, const char *dir, int train, int max_n, dt_dataset *out) {
    assert(out);
    memset(out, 0, sizeof *out);
    if (!name) name = "(null)";
    if (max_n < 0) max_n = 0;
    if (dt_text_name(name)) return dt_text_load(name, dir, train, out); /* windows set by the model's context */
    const int idx = strcmp(name, "mnist") == 0 || strcmp(name, "fashion-mnist") == 0;
    if (!idx && strcmp(name, "cifar10") != 0)
        return dt_fail(DT_ERR_ARG, "unknown dataset '%s' (expected mnist, fashion-mnist, cifar10, kjv, fortunes, "
                       "text:FILE or tokens:FILE)", name);
    if (dt_dataset_share_find(name, dir, train, max_n, out)) return DT_OK; /* simulation: loaded by a rank */
    const dt_status st = idx ? load_idx_named(name, dir, train, max_n, out) : load_cifar_named(dir, train, max_n, out);
    if (st == DT_OK) dt_dataset_share_add(name, dir, train, max_n, out);
    return st;
}

dt_status dt_dataset_load(const char *name, const char *dir, int train, dt_dataset *out) {
    return dt_dataset_load_first(name, dir, train, 0, out);
}

void dt_dataset_truncate(dt_dataset *d, int n) {
    assert(d && n >= 0 && n <= d->n);
    if (n == d->n) return;
    d->n = n;
    if (n == 0 || d->text || dt_dataset_is_shared(d)) return; /* a text keeps its tokens: windows index them */ /* keep the buffers; dt_dataset_free releases them */
    size_t per = (size_t)d->c * d->h * d->w;
    uint8_t *im = realloc(d->images, (size_t)n * per); /* shrinking: failure is harmless */
    if (im) d->images = im;
    uint8_t *lb = realloc(d->labels, (size_t)n);
    if (lb) d->labels = lb;
}

void dt_dataset_free(dt_dataset *d) {
    if (!d) return;
    if (!dt_dataset_is_shared(d)) { /* the share's live as long as the simulation */
        free(d->images);
        free(d->labels);
        free(d->tokens);
    }
    memset(d, 0, sizeof *d);
}
