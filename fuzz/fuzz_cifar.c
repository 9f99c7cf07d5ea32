/* libFuzzer target: the CIFAR-10 binary reader (dt_cifar_load). Input: byte 0 = the number
 * of batch files (1 or 2); the rest is the files' bytes, the first file taking bytes 1-2 as
 * its length (little-endian) when there are two. */
#include "dtrain.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int two = data[0] & 1;
    data++, size--;
    const char *paths[2];
    if (two) {
        if (size < 2) return 0;
        size_t l0 = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2, size -= 2;
        if (l0 > size) l0 = size;
        paths[0] = dt_fuzz_write("data_batch_1.bin", data, l0);
        paths[1] = dt_fuzz_write("data_batch_2.bin", data + l0, size - l0);
    } else {
        paths[0] = dt_fuzz_write("data_batch_1.bin", data, size);
    }
    dt_dataset d;
    if (dt_cifar_load(paths, two ? 2 : 1, &d) == DT_OK) {
        if (d.n < 1 || d.c != 3 || d.h != 32 || d.w != 32) abort();
        for (int i = 0; i < d.n; i++)
            if (d.labels[i] >= d.classes) abort();
        dt_dataset_free(&d);
    }
    return 0;
}
