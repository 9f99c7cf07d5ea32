/* libFuzzer target: the IDX readers (dt_idx_load), plain and gzipped.
 * Input: byte 0 = flags (bit 0: gzip the images file, bit 1: gzip the labels file),
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
    const char *images = put("images.idx.gz", data, li, flags & 1);
    const char *labels = put("labels.idx.gz", data + li, size - li, flags & 2);
    dt_dataset d;
    if (dt_idx_load(images, labels, &d) == DT_OK) {
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
    return 0;
}
