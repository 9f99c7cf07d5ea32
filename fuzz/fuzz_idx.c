/* libFuzzer target: the IDX readers (dt_idx_load, and dt_dataset_load_first reading only the
 * first examples), plain and gzipped.
 * Input: byte 0 = flags (bit 0: gzip the images file, bit 1: gzip the labels file, bits 2-4:
 * how many examples dt_dataset_load_first reads, 0: all),
 * bytes 1-2 = length L of the images file (little-endian, cut to what is there), then L bytes
 * of images file, then the labels file. Raw bytes that start with gzip's magic exercise the
 * corrupt-gzip path; the gzip flags give the readers valid gzip streams of fuzzed content. */
#include <zlib.h>

#include "dtrain.h"
#include "fuzz_util.h"

static const char *put(const char *name, const uint8_t *d, size_t n, int gz) {
    if (!gz) return dt_fuzz_write(name, d, n);
    const char *path = dt_fuzz_path(name);
    unlink(path); /* see dt_fuzz_write */
    gzFile f = gzopen(path, "wb1");
    if (!f || (n && gzwrite(f, d, (unsigned)n) != (int)n) || gzclose(f) != Z_OK) { perror(path); abort(); }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const int flags = data[0];
    size_t li = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3, size -= 3;
    if (li > size) li = size;
    /* (named as MNIST's training set in the fuzz folder, for dt_dataset_load_first) */
    const char *images = put("train-images-idx3-ubyte.gz", data, li, flags & 1);
    const char *labels = put("train-labels-idx1-ubyte.gz", data + li, size - li, flags & 2);
    dt_dataset d, first;
    const int max_n = flags >> 2 & 7;
    const int first_ok = dt_dataset_load_first("mnist", dt_fuzz_dir, 1, max_n, &first) == DT_OK;
    if (first_ok && (first.n < 1 || (max_n > 0 && first.n > max_n) || first.h != 28 || first.w != 28)) abort();
    if (dt_idx_load(images, labels, &d) == DT_OK) {
        /* a whole set that loads has first examples that load, and the same ones */
        if (d.h == 28 && d.w == 28) {
            const int k = max_n > 0 && max_n < d.n ? max_n : d.n;
            if (!first_ok || first.n != k || memcmp(first.images, d.images, (size_t)k * 784) != 0 ||
                memcmp(first.labels, d.labels, (size_t)k) != 0)
                abort();
        }
        /* what a loaded set promises: its first and last examples can be read */
        if (d.n < 1 || d.c != 1 || d.h < 1 || d.w < 1) abort();
        if ((size_t)d.h * d.w <= 65536) {
            float *x = malloc(2 * sizeof(float) * d.h * d.w);
            uint8_t y[2];
            int idx[2] = {0, d.n - 1};
            if (!x) abort();
            dt_batch_fill(&d, idx, 2, x, y, 0, NULL);
            if (y[0] >= d.classes || y[1] >= d.classes) abort();
            free(x);
        }
        dt_dataset_free(&d);
    }
    if (first_ok) dt_dataset_free(&first);
    return 0;
}
