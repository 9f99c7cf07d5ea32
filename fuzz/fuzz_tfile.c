/* libFuzzer target: the tensor-file / checkpoint reader (dt_tfile_read) and loading its
 * records into a model (dt_model_load_records, what dt_model_load and --resume do) and into
 * EventGraD's sender rule (dt_trigger_load, a scheme's checkpoint state, then decisions).
 * Each input is read twice: as it is (the checksum will rarely match, but every record is
 * parsed before the checksum is compared) and with its correct CRC-32 appended, so that
 * fuzzed record lists also reach the loader, and the metadata's text records (meta:model,
 * meta:spec, ...: dt_weights_meta_get) are read back and compared with a model's spec. */
#include <zlib.h>

#include "schemes/trigger.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "fuzz_util.h"
#include "models/model.h"

static dt_model *model; /* a small model with a weight, a bias and batch-norm state */
static char *cnn1;      /* the built-in cnn1's spec text: a file's meta:spec is that model or another */

static const char SPEC[] = "input c=1 h=4 w=4\nconv out=2 k=3 pad=1\nbatchnorm\nrelu\nflatten\nlinear out=3\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model && dt_model_from_spec(SPEC, "fuzz", &model) != DT_OK) abort();
    if (!cnn1 && !(cnn1 = dt_model_spec_text("cnn1"))) abort();
    dt_tfile f;
    const char *path = dt_fuzz_write("plain.weights", data, size);
    if (dt_tfile_read(path, &f) == DT_OK) dt_tfile_free(&f);

    uint8_t *buf = malloc(size + 4);
    if (!buf) abort();
    memcpy(buf, data, size);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)size);
    memcpy(buf + size, &crc, 4); /* little-endian host, as the writer */
    path = dt_fuzz_write("crc.weights", buf, size + 4);
    free(buf);
    if (dt_tfile_read(path, &f) == DT_OK) {
        for (int i = 0; i < f.n; i++) {
            const dt_record *r = &f.recs[i];
            /* the shape and the value count must agree (in 128 bits: no wrap-around) */
            unsigned __int128 k = 1;
            for (int d = 0; d < r->ndim; d++) k *= (unsigned)r->shape[d];
            if (k != r->numel) abort();
        }
        dt_model_load_records(model, &f, path);
        dt_weights_meta w;
        if (dt_weights_meta_get(&f, &w) == DT_OK) {
            if (w.spec && dt_weights_meta_same_model(&w, "cnn1") != (strcmp(w.spec, cnn1) == 0)) abort();
            dt_weights_meta_free(&w);
        }
        dt_trigger t;
        const dt_trigger_opts o = {.threshold = {.adaptive = 1}, .horizon = 1.5f, .history = 3, .decay = 0.9f};
        if (dt_trigger_init(&t, 2, &o) != DT_OK) abort();
        f.prefix = "eventgrad"; /* as the trainer hands a scheme its records */
        if (dt_trigger_load(&t, &f, path) == DT_OK)
            for (long k = 0; k < 8; k++) (void)dt_trigger_decide(&t, (int)(k & 1), k, (double)k);
        dt_trigger_free(&t);
        dt_tfile_free(&f);
    }
    return 0;
}
