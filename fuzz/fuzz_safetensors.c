/* libFuzzer target: the safetensors reader (dt_safetensors_read: the 8-byte length, the JSON
 * header through jansson, dtypes, shapes, offsets) and loading what it gives into a model with
 * batch norm (dt_model_load_records, what dt_model_load does) and the metadata
 * (dt_weights_meta_get). Each input is read twice: as a whole file, and as a header alone with
 * its correct length put before it, so that fuzzed JSON reaches the header's checks. */
#include "core/safetensors.h"
#include "dtrain.h"
#include "fuzz_util.h"
#include "models/model.h"

static dt_model *model; /* conv1, bn1 (running statistics), fc: as tests/test_safetensors.c */

static const char SPEC[] = "input c=1 h=4 w=4\nconv out=2 k=3 pad=1 name=conv1\nbatchnorm name=bn1\nrelu\nflatten\n"
                           "linear out=3 name=fc\n";

static void check(const char *path) {
    dt_tfile f;
    if (dt_safetensors_read(path, &f) != DT_OK) return;
    for (int i = 0; i < f.n; i++) {
        const dt_record *r = &f.recs[i];
        if (!strncmp(r->name, "meta:", 5)) continue;
        /* the shape and the value count agree (in 128 bits: no wrap-around) */
        unsigned __int128 k = 1;
        for (int d = 0; d < r->ndim; d++) k *= (unsigned)r->shape[d];
        if (k != r->numel || r->ndim > 4) abort();
    }
    dt_model_load_records(model, &f, path);
    dt_weights_meta w;
    if (dt_weights_meta_get(&f, &w) == DT_OK) dt_weights_meta_free(&w);
    dt_tfile_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model && dt_model_from_spec(SPEC, "fuzz", &model) != DT_OK) abort();
    check(dt_fuzz_write("whole.safetensors", data, size));
    uint8_t *buf = malloc(size + 8);
    if (!buf) abort();
    const uint64_t n = size; /* little-endian host, as the writer */
    memcpy(buf, &n, 8);
    memcpy(buf + 8, data, size);
    check(dt_fuzz_write("header.safetensors", buf, size + 8));
    free(buf);
    return 0;
}
