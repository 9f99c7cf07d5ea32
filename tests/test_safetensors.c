/* Safetensors weights (core/safetensors.c, models/weights.c): a round trip of a model with batch
 * norm and of resnet18-cifar, the layout byte for byte against hand-computed offsets, and every
 * malformed header refused in one line naming the file and the fault, the model untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/safetensors.h"
#include "dtrain.h"
#include "models/model.h"

static const char SPEC[] = "input c=1 h=4 w=4\nconv out=2 k=3 pad=1 name=conv1\nbatchnorm name=bn1\nrelu\nflatten\n"
                           "linear out=3 name=fc\n";

static char dir[] = "/tmp/dtrain_st_XXXXXX";

/* A tensor of a hand-made header; offsets follow from the order and the sizes. */
typedef struct { const char *name, *dtype, *shape; size_t bytes; } ent;

/* The small model's tensors as dtrain writes them: params, state, then the step counter. */
static const ent GOOD[] = {
    {"conv1.weight", "F32", "[2,1,3,3]", 72}, {"conv1.bias", "F32", "[2]", 8}, {"bn1.weight", "F32", "[2]", 8},
    {"bn1.bias", "F32", "[2]", 8}, {"fc.weight", "F32", "[3,32]", 384}, {"fc.bias", "F32", "[3]", 12},
    {"bn1.running_mean", "F32", "[2]", 8}, {"bn1.running_var", "F32", "[2]", 8},
    {"bn1.num_batches_tracked", "I64", "[]", 8},
};
#define NGOOD (int)(sizeof GOOD / sizeof GOOD[0])

/* Writes u64 len | header | `data` zero bytes; header NULL: rendered from ents. */
static const char *put(const char *name, const char *header, unsigned long long len, size_t data) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fwrite(&len, 8, 1, f);
    fputs(header, f);
    for (size_t i = 0; i < data; i++) fputc(0, f);
    fclose(f);
    return path;
}

static char *render(const ent *es, int n, const char *meta) {
    static char h[8192];
    size_t o = (size_t)snprintf(h, sizeof h, "{"), off = 0;
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(h + o, sizeof h - o, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                              i ? "," : "", es[i].name, es[i].dtype, es[i].shape, off, off + es[i].bytes);
        off += es[i].bytes;
    }
    snprintf(h + o, sizeof h - o, "%s}", meta ? meta : "");
    return h;
}

static size_t total(const ent *es, int n) {
    size_t t = 0;
    for (int i = 0; i < n; i++) t += es[i].bytes;
    return t;
}

/* first occurrence of a replaced by b (the case's mutation of a good header) */
static char *swap(const char *h, const char *a, const char *b) {
    static char out[8192];
    const char *at = strstr(h, a);
    if (!at) { snprintf(out, sizeof out, "%s", h); return out; }
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - h), h, b, at + strlen(a));
    return out;
}

/* path refused by dt_model_load in one line naming path and containing want; m untouched */
static void refused(dt_model *m, const char *path, const char *want) {
    const float before = dt_model_params(m)[0];
    const dt_status st = dt_model_load(m, path);
    const char *e = dt_last_error();
    CHECK_MSG(st == DT_ERR_FORMAT, "%s: status %d, expected DT_ERR_FORMAT (%s)", want, st, e);
    CHECK_MSG(strstr(e, path) && strstr(e, want) && !strchr(e, '\n'), "wanted '%s' naming %s, got: %s", want, path, e);
    CHECK(dt_model_params(m)[0] == before);
}

static void case_hdr(dt_model *m, const char *name, const char *header, size_t data, const char *want) {
    refused(m, put(name, header, strlen(header), data), want);
}

static void test_malformed(dt_model *m) {
    const char *good = render(GOOD, NGOOD, NULL);
    const size_t data = total(GOOD, NGOOD); /* 516 */
    CHECK(data == 516);
    float *p = dt_model_params(m);
    p[0] = 7;
    /* the good file loads (zeros): the mutations below are what is refused */
    CHECK_MSG(dt_model_load(m, put("good", good, strlen(good), data)) == DT_OK, "%s", dt_last_error());
    CHECK(p[0] == 0);
    p[0] = 7;
    refused(m, put("long", good, 1000000, data), "header length 1000000 is not 2..");
    refused(m, put("short", "{", 1, 0), "header length 1 is not");
    refused(m, put("tiny", "", 0, 0) /* 8 bytes: length 0 */, "header length 0");
    case_hdr(m, "notjson", "{oops", 0, "the header is not valid JSON");
    case_hdr(m, "array", "[1,2,3]", 0, "does not begin with '{'");
    case_hdr(m, "dup", swap(good, "\"conv1.bias\"", "\"conv1.weight\""), data, "duplicate");
    case_hdr(m, "f16", swap(good, "\"F32\",\"shape\":[2]", "\"F16\",\"shape\":[2]"), data,
             "tensor 'conv1.bias' has dtype F16, dtrain reads F32");
    case_hdr(m, "i64", swap(good, "\"F32\",\"shape\":[2]", "\"I64\",\"shape\":[2]"), data, "tensor 'conv1.bias' has dtype I64");
    case_hdr(m, "shape", swap(good, "[3,32]", "[32,3]"), data, "tensor 'fc.weight' has shape [32,3], the model expects [3,32]");
    case_hdr(m, "shapebytes", swap(good, "[2],\"data_offsets\":[72,80]", "[3],\"data_offsets\":[72,80]"), data,
             "tensor 'conv1.bias': data_offsets [72, 80] hold 8 bytes, its shape needs 12");
    case_hdr(m, "negshape", swap(good, "[3,32]", "[3,-32]"), data, "tensor 'fc.weight': shape size 1 is not");
    case_hdr(m, "dims", swap(good, "[2,1,3,3]", "[2,1,3,3,1]"), data, "\"shape\" is not an array of at most 4");
    case_hdr(m, "overlap", swap(good, "[72,80]", "[64,72]"), data, "tensor 'conv1.bias' begins at data offset 64, expected 72 (overlaps");
    case_hdr(m, "gap", swap(good, "[0,72]", "[4,76]"), data, "begins at data offset 4, expected 0 (a gap");
    case_hdr(m, "negoff", swap(good, "[0,72]", "[-8,64]"), data, "\"data_offsets\" is not [begin, end]");
    case_hdr(m, "offnum", swap(good, "[0,72]", "[0,\"72\"]"), data, "\"data_offsets\" is not [begin, end]");
    case_hdr(m, "beyond", good, data - 8, "tensor 'bn1.num_batches_tracked' ends at data offset 516, past the file's 508");
    case_hdr(m, "trailing", good, data + 4, "the tensors hold 516 data bytes, the file has 520");
    case_hdr(m, "meta", swap(good, "]}}", "]},\"__metadata__\":{\"model\":3}}"), data, "__metadata__ \"model\" is not a string");
    case_hdr(m, "colon", swap(good, "\"fc.bias\"", "\"fc:bias\""), data, "tensor name 'fc:bias'");
    /* the model's side: a missing tensor, an extra one (refused: weights of another model) */
    ent es[NGOOD + 1];
    memcpy(es, GOOD, sizeof GOOD);
    memmove(&es[5], &es[6], sizeof es[0] * (NGOOD - 6));
    case_hdr(m, "missing", render(es, NGOOD - 1, NULL), total(es, NGOOD - 1), "has no tensor 'fc.bias'");
    memcpy(es, GOOD, sizeof GOOD);
    es[NGOOD] = (ent){"fc2.weight", "F32", "[1]", 4};
    case_hdr(m, "extra", render(es, NGOOD + 1, NULL), total(es, NGOOD + 1), "tensor 'fc2.weight' is not part of this model");
    memcpy(es, GOOD, sizeof GOOD);
    es[NGOOD - 1].name = "bn9.num_batches_tracked";
    case_hdr(m, "nbt", render(es, NGOOD, NULL), data, "tensor 'bn9.num_batches_tracked' without a 'bn9.running_mean'");
    es[NGOOD - 1] = (ent){"bn1.num_batches_tracked", "I64", "[1]", 8};
    case_hdr(m, "nbtshape", render(es, NGOOD, NULL), data, "(I64) has 1 dimensions, expected a scalar");
    /* a DTRTNS01 file named .safetensors says so */
    char path[256];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    FILE *f = fopen(path, "wb");
    fputs("DTRTNS01\1\0\0\0", f);
    fclose(f);
    refused(m, path, "a dtrain DTRTNS01 weights file, not safetensors");
    /* without num_batches_tracked (optional) and without metadata: loads */
    CHECK(dt_model_load(m, put("nonbt", render(GOOD, NGOOD - 1, NULL), strlen(render(GOOD, NGOOD - 1, NULL)), data - 8)) == DT_OK);
}

static void fill(dt_model *m, float base) {
    for (size_t i = 0; i < dt_model_num_params(m); i++) dt_model_params(m)[i] = base + 0.001f * (float)i;
    for (size_t i = 0; i < dt_model_num_state(m); i++) dt_model_state(m)[i] = 1 + base - 0.01f * (float)i;
}

static void test_round_trip(void) {
    dt_model *m, *m2;
    CHECK(dt_model_from_spec(SPEC, "test", &m) == DT_OK && dt_model_from_spec(SPEC, "test", &m2) == DT_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/small.safetensors", dir);
    fill(m, 0.5f);
    CHECK_MSG(dt_model_save_meta(m, path, "small.spec", "mnist", "local") == DT_OK, "%s", dt_last_error());
    /* the layout: the header is the hand-rendered one of GOOD plus the metadata, space-padded */
    FILE *f = fopen(path, "rb");
    unsigned long long n = 0;
    CHECK(f && fread(&n, 8, 1, f) == 1);
    char *h = calloc(n + 1, 1), *want = render(GOOD, NGOOD, NULL);
    CHECK(fread(h, 1, n, f) == n);
    CHECK(n % 8 == 0);
    CHECK_MSG(!strncmp(h, want, strlen(want) - 1), "header %.200s", h);
    CHECK(strstr(h, ",\"__metadata__\":{\"format\":\"pt\",\"model\":\"small.spec\",") != NULL);
    CHECK(strstr(h, "\"data\":\"mnist\",\"algo\":\"local\"}}") != NULL);
    CHECK(h[n - 1] == ' ' || h[n - 1] == '}');
    float first[18];
    CHECK(fread(first, sizeof(float), 18, f) == 18 && first[0] == 0.5f && first[17] == dt_model_params(m)[17]);
    CHECK(fseek(f, 8 + (long)n + 508, SEEK_SET) == 0);
    long long nbt = -1;
    CHECK(fread(&nbt, 8, 1, f) == 1 && nbt == 0 && fgetc(f) == EOF);
    fclose(f);
    free(h);
    CHECK_MSG(dt_model_load(m2, path) == DT_OK, "%s", dt_last_error());
    CHECK(!memcmp(dt_model_params(m), dt_model_params(m2), dt_model_num_params(m) * sizeof(float)));
    CHECK(!memcmp(dt_model_state(m), dt_model_state(m2), dt_model_num_state(m) * sizeof(float)));
    dt_weights_meta w;
    CHECK(dt_weights_meta_read(path, &w) == DT_OK);
    CHECK(w.model && !strcmp(w.model, "small.spec") && w.data && !strcmp(w.data, "mnist") && w.scheme && !strcmp(w.scheme, "local"));
    dt_weights_meta_free(&w);
    test_malformed(m2);
    dt_model_free(m);
    dt_model_free(m2);

    /* resnet18-cifar: 62 parameter tensors, 40 state tensors, 20 counters, all back */
    CHECK(dt_model_from_name("resnet18-cifar", &m) == DT_OK && dt_model_from_name("resnet18-cifar", &m2) == DT_OK);
    fill(m, -0.25f);
    snprintf(path, sizeof path, "%s/r18.safetensors", dir);
    CHECK_MSG(dt_model_save_meta(m, path, "resnet18-cifar", "cifar10", "allreduce") == DT_OK, "%s", dt_last_error());
    CHECK_MSG(dt_model_load(m2, path) == DT_OK, "%s", dt_last_error());
    CHECK(!memcmp(dt_model_params(m), dt_model_params(m2), dt_model_num_params(m) * sizeof(float)));
    CHECK(!memcmp(dt_model_state(m), dt_model_state(m2), dt_model_num_state(m) * sizeof(float)));
    dt_tfile tf;
    CHECK(dt_safetensors_read(path, &tf) == DT_OK);
    /* the counters are checked and left out; the metadata comes back as meta:model, :spec, :data, :algo */
    CHECK_MSG(tf.n == 62 + 40 + 4, "%d records", tf.n);
    CHECK(dt_tfile_find(&tf, "layer4.1.bn2.running_var") && dt_tfile_find(&tf, "meta:spec") &&
          !dt_tfile_find(&tf, "layer4.1.bn2.num_batches_tracked"));
    dt_tfile_free(&tf);
    dt_model_free(m);
    dt_model_free(m2);
}

int main(void) {
    dt_runtime_init();
    if (!mkdtemp(dir)) return 1;
    test_round_trip();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return test_summary("test_safetensors");
}
