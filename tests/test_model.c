/* Model building, the spec parser and its errors, parameter layout, weights files,
 * the optimiser and the learning-rate schedules. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "models/model.h"

static void expect_spec_error(const char *spec, const char *needle) {
    dt_model *m = NULL;
    dt_status st = dt_model_from_spec(spec, "t.spec", &m);
    CHECK_MSG(st == DT_ERR_FORMAT && m == NULL, "spec should fail: %s", spec);
    CHECK_MSG(strstr(dt_last_error(), needle) != NULL, "error '%s' lacks '%s'", dt_last_error(), needle);
    CHECK_MSG(strchr(dt_last_error(), '\n') == NULL, "error is not one line: %s", dt_last_error());
    dt_model_free(m);
}

static size_t count_of(const char *name) {
    dt_model *m = NULL;
    if (dt_model_from_name(name, &m) != DT_OK) return 0;
    size_t n = dt_model_num_params(m);
    dt_model_free(m);
    return n;
}

static void test_zoo(void) {
    CHECK(count_of("resnet18-cifar") == 11173962);
    CHECK(count_of("mlp") == 784 * 100 + 100 + 100 * 10 + 10);
    CHECK(count_of("cnn1") == 260 + 5020 + 32100 + 1010);
    CHECK(count_of("cnn2") == 100 + 1820 + 50100 + 1010);
    CHECK(count_of("downpour-cnn") == 320 + 18496 + 1179776 + 1290);
    CHECK(count_of("alexnet-cifar") == 1792 + 110784 + 663936 + 884992 + 590080 + 4195328 + 1049600 + 10250);
    for (const char *const *n = dt_model_names(); *n; n++) CHECK_MSG(count_of(*n) > 0, "model %s", *n);
    dt_model *m = NULL;
    CHECK(dt_model_from_name("vgg99", &m) == DT_ERR_ARG && m == NULL);
    CHECK(strstr(dt_last_error(), "unknown model 'vgg99'") != NULL);
    /* views tile the buffer in order, names as in PyTorch */
    CHECK(dt_model_from_name("cnn1", &m) == DT_OK);
    const char *names[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                           "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    size_t off = 0;
    CHECK(dt_model_num_tensors(m) == 8);
    for (int i = 0; i < dt_model_num_tensors(m) && i < 8; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        CHECK_MSG(!strcmp(v->name, names[i]), "tensor %d is %s", i, v->name);
        CHECK(v->offset == off);
        off += v->numel;
    }
    CHECK(off == dt_model_num_params(m));
    const dt_tensor_view *w = dt_model_tensor(m, 2);
    CHECK(w->ndim == 4 && w->shape[0] == 20 && w->shape[1] == 10 && w->shape[2] == 5 && w->shape[3] == 5);
    /* PyTorch default init bounds: conv1 fan_in 25 -> 0.2 */
    float mx = 0;
    for (size_t i = 0; i < 250; i++) mx = fmaxf(mx, fabsf(dt_model_params(m)[i]));
    CHECK(mx <= 0.2f && mx > 0.15f);
    /* same seed -> same weights, other seed -> other weights */
    float *a = malloc(dt_model_num_params(m) * sizeof(float));
    dt_model_init(m, 5);
    memcpy(a, dt_model_params(m), dt_model_num_params(m) * sizeof(float));
    dt_model_init(m, 5);
    CHECK(memcmp(a, dt_model_params(m), dt_model_num_params(m) * sizeof(float)) == 0);
    dt_model_init(m, 6);
    CHECK(memcmp(a, dt_model_params(m), dt_model_num_params(m) * sizeof(float)) != 0);
    free(a);
    CHECK(dt_model_flops(m) > 1.0e6 && dt_model_flops(m) < 1.1e6);
    dt_model_free(m);
    /* nanoGPT's CPU configuration, the head tied to the token embedding (not counted twice) */
    CHECK_MSG(count_of("gpt-tiny") == 834304, "gpt-tiny: %zu parameters", count_of("gpt-tiny"));
    CHECK(dt_model_from_name("gpt-tiny", &m) == DT_OK);
    if (m) {
        int c, h, w;
        dt_model_input_shape(m, &c, &h, &w);
        CHECK(c == 1 && h == 64 && w == 1 && dt_model_positions(m) == 64 && dt_model_num_classes(m) == 256);
        CHECK(dt_model_vocab(m) == 256 && dt_model_num_tensors(m) == 2 + 4 * 12 + 2);
        /* nanoGPT's state_dict keys, in its order (but lm_head.weight: the same tensor) */
        const char *gn[] = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
                            "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.weight",
                            "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight",
                            "transformer.h.0.attn.c_proj.bias", "transformer.h.0.ln_2.weight", "transformer.h.0.ln_2.bias",
                            "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias",
                            "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias"};
        for (int i = 0; i < 14; i++) CHECK_MSG(!strcmp(dt_model_tensor(m, i)->name, gn[i]), "tensor %d is %s", i, dt_model_tensor(m, i)->name);
        CHECK(!strcmp(dt_model_tensor(m, 51)->name, "transformer.ln_f.bias"));
        /* the kinds an optimiser decays by: embeddings, norms, linears */
        CHECK(!strcmp(dt_model_tensor_kind(m, 0), "embed") && !strcmp(dt_model_tensor_kind(m, 1), "posembed"));
        CHECK(!strcmp(dt_model_tensor_kind(m, 3), "layernorm") && !strcmp(dt_model_tensor_kind(m, 4), "linear"));
        CHECK(!strcmp(dt_model_tensor_kind(m, 51), "layernorm"));
        /* nanoGPT's initialisation: N(0, 0.02), the residual projections 0.02/sqrt(2 * 4) */
        dt_model_init(m, 1);
        for (int i = 0; i < 7; i += 6) {
            const dt_tensor_view *v = dt_model_tensor(m, i == 0 ? 0 : 6); /* wte; h.0.attn.c_proj.weight */
            double ss = 0;
            for (size_t j = 0; j < v->numel; j++) ss += (double)dt_model_params(m)[v->offset + j] * dt_model_params(m)[v->offset + j];
            const double sd = sqrt(ss / v->numel), want = i == 0 ? 0.02 : 0.02 / sqrt(8.0);
            CHECK_MSG(fabs(sd - want) < 0.03 * want, "%s: std %g, want %g", v->name, sd, want);
        }
        CHECK(dt_model_params(m)[dt_model_tensor(m, 2)->offset] == 1.0f && dt_model_params(m)[dt_model_tensor(m, 5)->offset] == 0.0f);
        /* FLOPs: 2 x (parameters but the embeddings) a position, attention's 4 T^2 C, softmax,
         * norms, GELU and the adds: 115.7 MFLOP an example (dtrain info) */
        CHECK_MSG(fabs(dt_model_flops(m) - 115712000.0) < 1, "gpt-tiny: %.0f FLOPs", dt_model_flops(m));
        dt_model_free(m);
    }
    CHECK(count_of("gpt-small") == 256 * 384 + 256 * 384 + 6 * (12 * 384 * 384 + 13 * 384) + 2 * 384);
    /* resnet18 state: 2 per batch-norm */
    CHECK(dt_model_from_name("resnet18-cifar", &m) == DT_OK);
    CHECK(dt_model_num_state_tensors(m) == 2 * 20);
    dt_model_free(m);
}

static void test_spec_errors(void) {
    expect_spec_error("conv out=3 k=3\n", "t.spec:1: the first line must be 'input");
    /* sizes are checked in 64 bits: 46341^2 overflowed an int in flatten once */
    expect_spec_error("input c=1 h=46341 w=46341\nflatten\nlinear out=10\n",
                      "layer 'flatten1': its input of 1x46341x46341 = 2147488281 values per image is more than");
    expect_spec_error("input c=1 h=4096 w=4096\nflatten\nlinear out=100\n", "its weight has 1677721600 values, more than");
    /* the whole model is limited too (DT_MAX_PARAMS), below the limit of one tensor */
    expect_spec_error("input c=1 h=1 w=8192\nlinear out=8192\n",
                      "t.spec: the model has 67117056 parameters, more than dtrain handles (67108864)");
    expect_spec_error("input c=1 h=64 w=64\nconv out=70000 k=1\n", "its output of 70000x64x64 values per image is empty or more");
    expect_spec_error("input c=1 h=8 w=8\nconvv out=3\n", "t.spec:2: unknown layer 'convv'");
    expect_spec_error("input c=1 h=8 w=8\n\n# c\nconv out=3 k=3 size=2\n", "t.spec:4: unknown key 'size' for conv");
    expect_spec_error("input c=1 h=8 w=8\nconv out=x k=3\n", "t.spec:2: bad value 'x' for out=");
    expect_spec_error("input c=1 h=8 w=8\nconv out=3 k\n", "t.spec:2: expected key=value, got 'k'");
    expect_spec_error("input c=1 h=8 w=8\nconv out=3 k=9\n", "layer 'conv1'");
    expect_spec_error("input c=1 h=8 w=8\nconv k=3\n", "conv needs out=N");
    expect_spec_error("input c=1 h=8 w=8\nrelu\nadd in=nosuch\n", "in=nosuch: no earlier layer has that name");
    expect_spec_error("input c=1 h=8 w=8\nconv out=2 k=3\nadd in=input\n", "expected equal");
    expect_spec_error("input c=1 h=8 w=8\nrelu name=a\nrelu name=a\n", "name=a is already used");
    expect_spec_error("input c=1 h=8 w=8\nrelu name=a\nrelu in=input\n", "output of layer 'a' is never used");
    expect_spec_error("input c=0 h=8 w=8\nrelu\n", "input: expected c=C h=H w=W");
    expect_spec_error("input c=1 h=8 w=8\ndropout p=1.5\n", "dropout p=1.5 must be in [0, 1)");
    expect_spec_error("input c=1 h=8 w=8\n", "the model has no layers");
    expect_spec_error("# nothing\n", "no 'input c=C h=H w=W' line");
    /* sequences */
    expect_spec_error("input seq=8\nconv out=2 k=1\n", "conv takes an image, not a sequence");
    expect_spec_error("input seq=8 c=4\nbatchnorm\n", "batchnorm takes an image, not a sequence");
    expect_spec_error("input c=3 h=8 w=8\nattention heads=1\n", "attention takes a sequence");
    expect_spec_error("input seq=8 h=3\nlinear out=2\n", "input seq=T takes no h= or w=");
    expect_spec_error("input seq=0\nlinear out=2\n", "input: expected c=C h=H w=W or seq=T");
    expect_spec_error("input seq=8 c=30\nattention heads=4\n", "10 features (C) do not divide into heads=4");
    expect_spec_error("input seq=8 c=32\nattention heads=4\n", "32 is not a multiple of 3");
    expect_spec_error("input seq=8 c=12\nattention heads=0\n", "bad value '0' for heads=");
    expect_spec_error("input seq=8\nembed vocab=10 out=4\nembed vocab=10 out=4\n", "embed reads the model input");
    expect_spec_error("input seq=8 c=2\nembed vocab=10 out=4\n", "embed takes token ids");
    expect_spec_error("input seq=8\nembed out=4\n", "embed needs vocab=V");
    expect_spec_error("input seq=8\nembed vocab=10 out=4\nlinear out=10 tie=wte\n", "tie=wte: no earlier layer has that name");
    expect_spec_error("input seq=8\nembed vocab=10 out=4 name=e\nlinear out=9 bias=0 tie=e\n",
                      "tie=e: its weight is [10, 4], this layer's would be [9, 4]");
    expect_spec_error("input seq=8\nembed vocab=10 out=4 name=e\nlinear out=4 name=f\nlinear out=4 tie=f\n",
                      "tie=f: 'f' is a linear layer; only an embed's weight can be shared");
    expect_spec_error("input seq=8\nembed vocab=4 out=4 name=e\nlinear out=4 tie=e\nlinear out=4 tie=e\n",
                      "tie=e: its weight is already shared");
    expect_spec_error("input seq=8\nembed vocab=4 out=4\nlayernorm tie=x\n", "unknown key 'tie' for layernorm");
    expect_spec_error("input seq=8\nembed vocab=4 out=4\nlinear out=4 std=-1\n", "bad value '-1' for std=");
    dt_model *m = NULL;
    CHECK(dt_model_from_file("/nonexistent/x.spec", &m) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "/nonexistent/x.spec") != NULL);
    /* a good file, with comments, blank lines and positional input */
    char path[] = "/tmp/dtrain-spec-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("# tiny\ninput 1 4 4\n\nconv out=2 k=3 pad=1   # same size\nrelu\nflatten\nlinear out=3 name=head\n", f);
    fclose(f);
    CHECK(dt_model_from_file(path, &m) == DT_OK);
    if (m) {
        CHECK(dt_model_num_params(m) == 2 * 9 + 2 + 32 * 3 + 3);
        CHECK(!strcmp(dt_model_tensor(m, 2)->name, "head.weight"));
        CHECK(dt_model_num_classes(m) == 3);
    }
    dt_model_free(m);
    unlink(path);
}

static void test_weights_file(void) {
    dt_model *m = NULL, *m2 = NULL, *other = NULL;
    CHECK(dt_model_from_name("resblock-tiny", &m) == DT_OK);
    CHECK(dt_model_from_name("resblock-tiny", &m2) == DT_OK);
    CHECK(dt_model_from_name("cnn1", &other) == DT_OK);
    dt_model_init(m, 1);
    for (size_t i = 0; i < dt_model_num_state(m); i++) dt_model_state(m)[i] = (float)i * 0.5f;
    dt_model_init(m2, 2);
    char dir[] = "/tmp/dtrain-w-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/m.weights", dir);
    /* a temporary file of a killed writer is removed at the next save; a live one's is not */
    {
        long dead = 4000000;
        while (dead > 1000 && !(kill((pid_t)dead, 0) != 0 && errno == ESRCH)) dead--;
        char stale[600], live[600];
        snprintf(stale, sizeof stale, "%s.tmp.%ld", path, dead);
        snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
        FILE *s1 = fopen(stale, "wb"), *s2 = fopen(live, "wb");
        CHECK(s1 && s2);
        if (s1) fclose(s1);
        if (s2) fclose(s2);
        CHECK(dt_model_save(m, path) == DT_OK);
        CHECK_MSG(access(stale, F_OK) != 0, "%s (pid %ld is gone) was left behind", stale, dead);
        CHECK_MSG(access(live, F_OK) == 0, "%s (pid %ld runs) was removed", live, (long)getppid());
        unlink(live);
    }
    CHECK(dt_model_save(m, path) == DT_OK);
    CHECK(dt_model_load(m2, path) == DT_OK);
    CHECK(memcmp(dt_model_params(m), dt_model_params(m2), dt_model_num_params(m) * sizeof(float)) == 0);
    CHECK(memcmp(dt_model_state(m), dt_model_state(m2), dt_model_num_state(m) * sizeof(float)) == 0);
    /* wrong model: names do not match, and the target stays untouched */
    float before = dt_model_params(other)[0];
    CHECK(dt_model_load(other, path) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "has no tensor 'conv1.bias'") != NULL || strstr(dt_last_error(), "shape") != NULL);
    CHECK(dt_model_params(other)[0] == before);
    /* truncated and corrupted files */
    FILE *in = fopen(path, "rb");
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, in) == (size_t)size);
    fclose(in);
    snprintf(bad, sizeof bad, "%s/bad.weights", dir);
    FILE *o = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)size / 2, o);
    fclose(o);
    CHECK(dt_model_load(m2, bad) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "truncated") != NULL);
    bytes[size - 10] ^= 0x55;
    o = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)size, o);
    fclose(o);
    CHECK(dt_model_load(m2, bad) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "checksum") != NULL);
    o = fopen(bad, "wb");
    fputs("hello world, not weights", o);
    fclose(o);
    CHECK(dt_model_load(m2, bad) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), "bad magic") != NULL);
    /* a forged header: 24 bytes claiming a 65535 x 65535 tensor (16 GiB) is refused before
     * anything that size is allocated */
    {
        const uint32_t one = 1, dim = 65535;
        const uint16_t nl = 1;
        const uint8_t nd = 2;
        o = fopen(bad, "wb");
        fwrite("DTRTNS01", 1, 8, o); fwrite(&one, 4, 1, o); fwrite(&nl, 2, 1, o); fwrite("w", 1, 1, o);
        fwrite(&nd, 1, 1, o); fwrite(&dim, 4, 1, o); fwrite(&dim, 4, 1, o);
        fclose(o);
        dt_tfile tf;
        CHECK(dt_tfile_read(bad, &tf) == DT_ERR_FORMAT);
        CHECK_MSG(strstr(dt_last_error(), "tensor 'w' claims 4294836225 values, more than the 0 bytes left") != NULL,
                  "%s", dt_last_error());
        dt_tfile_free(&tf);
    }
    /* seen while writing fuzz/fuzz_tfile: a shape of 2^30 x 2^30 x 16 wrapped the 64-bit value count to
     * 0, so a file with a valid checksum read as an empty tensor with an absurd shape */
    {
        const uint32_t one = 1, big = 1u << 30, sixteen = 16;
        const uint16_t nl = 1;
        const uint8_t nd = 3;
        unsigned char hdr[64];
        size_t n = 0;
        memcpy(hdr + n, "DTRTNS01", 8); n += 8;
        memcpy(hdr + n, &one, 4); n += 4;
        memcpy(hdr + n, &nl, 2); n += 2;
        hdr[n++] = 'w';
        hdr[n++] = nd;
        memcpy(hdr + n, &big, 4); n += 4;
        memcpy(hdr + n, &big, 4); n += 4;
        memcpy(hdr + n, &sixteen, 4); n += 4;
        const uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), hdr, (uInt)n);
        memcpy(hdr + n, &crc, 4); n += 4;
        o = fopen(bad, "wb");
        fwrite(hdr, 1, n, o);
        fclose(o);
        dt_tfile tf;
        CHECK(dt_tfile_read(bad, &tf) == DT_ERR_FORMAT);
        CHECK_MSG(strstr(dt_last_error(), "corrupt shape of 'w': more than 2^32 values") != NULL, "%s", dt_last_error());
        dt_tfile_free(&tf);
    }
    CHECK(dt_model_load(m2, "/nonexistent/w") == DT_ERR_IO);
    /* saving into a missing folder fails cleanly and leaves nothing behind */
    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/missing/m.weights", dir);
    CHECK(dt_model_save(m, nodir) == DT_ERR_IO);
    free(bytes);
    unlink(bad);
    unlink(path);
    CHECK(rmdir(dir) == 0); /* empty: no temporary file was left */
    dt_model_free(m);
    dt_model_free(m2);
    dt_model_free(other);
}

static void test_sgd(void) {
    /* hand-computed PyTorch SGD: w=1, g=0.5 constant, lr 0.1, momentum 0.9, wd 0.01 */
    float w = 1.0f, g = 0.5f;
    dt_sgd o;
    CHECK(dt_sgd_init(&o, 1, 0.9f, 0.01f, 0) == DT_OK);
    double ew = 1.0, buf = 0;
    for (int k = 0; k < 3; k++) {
        double d = 0.5 + 0.01 * ew;
        buf = k == 0 ? d : 0.9 * buf + d;
        ew -= 0.1 * buf;
        dt_sgd_step(&o, &w, &g, 0.1f);
    }
    CHECK_NEAR(w, ew, 1e-6);
    dt_sgd_free(&o);
    w = 1.0f;
    CHECK(dt_sgd_init(&o, 1, 0.9f, 0.0f, 1) == DT_OK);
    ew = 1.0; buf = 0;
    for (int k = 0; k < 3; k++) {
        buf = k == 0 ? 0.5 : 0.9 * buf + 0.5;
        ew -= 0.1 * (0.5 + 0.9 * buf);
        dt_sgd_step(&o, &w, &g, 0.1f);
    }
    CHECK_NEAR(w, ew, 1e-6);
    dt_sgd_free(&o);
    CHECK(dt_sgd_init(&o, 1, 1.5f, 0, 0) == DT_ERR_ARG);
    CHECK(dt_sgd_init(&o, 1, 0.0f, 0, 1) == DT_ERR_ARG);
    /* schedules */
    dt_schedule s;
    CHECK(dt_schedule_parse("const", 0.1f, &s) == DT_OK);
    CHECK_NEAR(dt_schedule_lr(&s, 7.5, 10), 0.1, 1e-7);
    CHECK(dt_schedule_parse("step:3:0.5", 0.1f, &s) == DT_OK);
    CHECK_NEAR(dt_schedule_lr(&s, 2.9, 10), 0.1, 1e-7);
    CHECK_NEAR(dt_schedule_lr(&s, 3.0, 10), 0.05, 1e-7);
    CHECK_NEAR(dt_schedule_lr(&s, 6.5, 10), 0.025, 1e-7);
    CHECK(dt_schedule_parse("cosine", 0.1f, &s) == DT_OK);
    CHECK_NEAR(dt_schedule_lr(&s, 0, 10), 0.1, 1e-7);
    CHECK_NEAR(dt_schedule_lr(&s, 5, 10), 0.05, 1e-6);
    CHECK_NEAR(dt_schedule_lr(&s, 10, 10), 0.0, 1e-7);
    CHECK(dt_schedule_parse("cosine:0.01", 0.1f, &s) == DT_OK);
    CHECK_NEAR(dt_schedule_lr(&s, 10, 10), 0.01, 1e-7);
    CHECK(dt_schedule_parse("step:0:0.5", 0.1f, &s) == DT_ERR_ARG);
    CHECK(dt_schedule_parse("linear", 0.1f, &s) == DT_ERR_ARG);
    CHECK(strstr(dt_last_error(), "--schedule 'linear'") != NULL);
}

/* dt_model_set_grads_ready: after each layer of backward, the gradients [from, np) it names
 * are already final (equal to what backward ends with), from never grows, and it ends at 0. */
typedef struct {
    size_t np, last_from;
    int calls, grew, early;
    float *final_grads; /* filled after a first backward */
    const float *grads;
} ready_log;

static void on_ready(void *arg, size_t from) {
    ready_log *r = arg;
    r->calls++;
    if (from > r->last_from) r->grew++;
    r->last_from = from;
    if (r->final_grads && memcmp(r->grads + from, r->final_grads + from, (r->np - from) * sizeof(float)) != 0) r->early++;
}

/* A GPT's tied head (its weight is the token embedding's, at the buffer's start) writes that
 * gradient first and the embedding, the first layer, adds to it last: `from` must not reach the
 * embedding before then (allreduce would send a half-summed gradient). */
static void test_grads_ready(void) {
    char *gpt = dt_gpt_spec(2, 2, 8, 6, 11);
    const char *names[] = {"cnn1", "resblock-tiny", gpt};
    for (int k = 0; k < 6; k++) { /* each model in fp32, then in bf16 */
        const char *name = names[k % 3];
        dt_model *m = NULL;
        CHECK(k % 3 == 2 ? dt_model_from_spec(name, "gpt", &m) == DT_OK : dt_model_from_name(name, &m) == DT_OK);
        if (!m) continue;
        if (k % 3 == 2) name = "gpt";
        dt_model_init(m, 3);
        CHECK(dt_model_set_precision(m, k < 3 ? DT_PRECISION_FP32 : DT_PRECISION_BF16) == DT_OK);
        const int batch = 4;
        CHECK(dt_model_reserve(m, batch) == DT_OK);
        int c, h, w;
        dt_model_input_shape(m, &c, &h, &w);
        const size_t in = (size_t)c * h * w;
        float *x = malloc((size_t)batch * in * sizeof(float));
        uint8_t y[4 * 6];
        for (int i = 0; i < batch * dt_model_positions(m); i++) y[i] = (uint8_t)((i * 7 + 1) % dt_model_num_classes(m));
        for (size_t i = 0; i < (size_t)batch * in; i++)
            x[i] = dt_model_vocab(m) ? (float)(i * 5 % 11) : (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        const size_t np = dt_model_num_params(m);
        ready_log r = {.np = np, .last_from = np, .grads = dt_model_grads(m)};
        r.final_grads = malloc(np * sizeof(float));
        dt_model_set_seed(m, 0); /* the same dropout masks in both passes */
        dt_model_forward(m, x, batch, 1);
        dt_model_backward(m, y, NULL); /* no hook: the final gradients */
        memcpy(r.final_grads, dt_model_grads(m), np * sizeof(float));
        memset(dt_model_grads(m), 0xff, np * sizeof(float)); /* NaN: a gradient not yet written shows */
        dt_model_set_grads_ready(m, on_ready, &r);
        dt_model_set_seed(m, 0);
        dt_model_forward(m, x, batch, 1);
        dt_model_backward(m, y, NULL);
        CHECK_MSG(r.calls >= dt_model_num_tensors(m) / 2, "%s: %d calls", name, r.calls);
        CHECK_MSG(r.grew == 0 && r.early == 0 && r.last_from == 0, "%s: grew %d, early %d, last %zu", name, r.grew,
                  r.early, r.last_from);
        /* without the hook nothing is called */
        dt_model_set_grads_ready(m, NULL, NULL);
        const int calls = r.calls;
        dt_model_backward(m, y, NULL);
        CHECK(r.calls == calls);
        free(r.final_grads);
        free(x);
        dt_model_free(m);
    }
    free(gpt);
}

/* A tied head's weight is written under both its names (PyTorch's state_dict has both), read
 * from either, and refused when the two differ; in .weights and .safetensors alike. */
static void test_tied_weights(void) {
    char *spec = dt_gpt_spec(1, 2, 8, 4, 5);
    dt_model *a = NULL, *b = NULL;
    CHECK(spec && dt_model_from_spec(spec, "gpt", &a) == DT_OK && dt_model_from_spec(spec, "gpt", &b) == DT_OK);
    free(spec);
    if (!a || !b) { dt_model_free(a); dt_model_free(b); return; }
    dt_model_init(a, 1);
    dt_model_init(b, 2);
    char dir[] = "/tmp/dtrain-tie-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const size_t bytes = dt_model_num_params(a) * sizeof(float);
    for (int k = 0; k < 2; k++) {
        char path[256], edited[256];
        snprintf(path, sizeof path, "%s/g.%s", dir, k ? "safetensors" : "weights");
        snprintf(edited, sizeof edited, "%s/e.weights", dir);
        CHECK(dt_model_save(a, path) == DT_OK);
        dt_tfile f;
        CHECK(dt_weights_read(path, &f) == DT_OK);
        const dt_record *wte = dt_tfile_find(&f, "transformer.wte.weight"), *head = dt_tfile_find(&f, "lm_head.weight");
        CHECK_MSG(wte && head && head->numel == 5 * 8 && head->shape[0] == 5 && head->shape[1] == 8 &&
                  !memcmp(wte->data, head->data, wte->numel * sizeof(float)), "%s: lm_head.weight", path);
        memset(dt_model_params(b), 0, bytes);
        CHECK(dt_model_load(b, path) == DT_OK && !memcmp(dt_model_params(a), dt_model_params(b), bytes));
        if (k == 1 || !wte || !head) { dt_tfile_free(&f); continue; }
        /* lm_head.weight alone stands in for the embedding's */
        dt_record *r = malloc((size_t)f.n * sizeof *r);
        int n = 0;
        for (int i = 0; i < f.n; i++)
            if (strcmp(f.recs[i].name, "transformer.wte.weight") != 0) r[n++] = f.recs[i];
        CHECK(dt_tfile_write(edited, r, n) == DT_OK);
        memset(dt_model_params(b), 0, bytes);
        CHECK(dt_model_load(b, edited) == DT_OK && !memcmp(dt_model_params(a), dt_model_params(b), bytes));
        /* both, different: one weight cannot be two */
        head->data[3] += 1.0f;
        CHECK(dt_tfile_write(edited, f.recs, f.n) == DT_OK);
        CHECK(dt_model_load(b, edited) == DT_ERR_FORMAT);
        CHECK_MSG(strstr(dt_last_error(), "'transformer.wte.weight' and 'lm_head.weight' differ") != NULL, "%s",
                  dt_last_error());
        free(r);
        unlink(edited);
        dt_tfile_free(&f);
    }
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s/g.weights", dir);
    snprintf(p2, sizeof p2, "%s/g.safetensors", dir);
    unlink(p1);
    unlink(p2);
    CHECK(rmdir(dir) == 0);
    dt_model_free(a);
    dt_model_free(b);
}

/* Weights files name their model (and its spec text), dataset and scheme in text records;
 * files without them (older builds) still load and say nothing. */
static void test_weights_meta(void) {
    char dir[] = "/tmp/dtrain-meta-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], old[256], spec[256], copy[256];
    snprintf(path, sizeof path, "%s/m.weights", dir);
    snprintf(old, sizeof old, "%s/old.weights", dir);
    snprintf(spec, sizeof spec, "%s/net.spec", dir);
    snprintf(copy, sizeof copy, "%s/copy.spec", dir);
    /* texts of every length modulo 4 come back as they were, padded to whole floats */
    {
        const char *texts[] = {"", "a", "ab", "abc", "abcd", "abcde"};
        const size_t floats[] = {1, 1, 1, 1, 2, 2}; /* (len / 4 + 1): always room for a NUL */
        dt_records l = {0};
        for (int i = 0; i < 6; i++) {
            char name[24];
            snprintf(name, sizeof name, "meta:t%d", i);
            CHECK(dt_records_add_text(&l, name, texts[i]) == DT_OK);
            CHECK(l.r[i].numel == floats[i]);
        }
        CHECK(dt_tfile_write(path, l.r, l.n) == DT_OK);
        dt_records_free(&l);
        dt_tfile f;
        CHECK(dt_tfile_read(path, &f) == DT_OK);
        for (int i = 0; i < 6; i++) {
            char name[24];
            snprintf(name, sizeof name, "meta:t%d", i);
            char *t = dt_tfile_text(&f, name);
            CHECK_MSG(t && !strcmp(t, texts[i]), "%s: '%s', expected '%s'", name, t ? t : "(none)", texts[i]);
            free(t);
        }
        CHECK(dt_tfile_text(&f, "meta:missing") == NULL);
        dt_tfile_free(&f);
    }
    dt_model *m = NULL, *m2 = NULL;
    CHECK(dt_model_from_name("cnn1", &m) == DT_OK);
    CHECK(dt_model_from_name("cnn1", &m2) == DT_OK);
    dt_model_init(m, 1);
    dt_model_init(m2, 2);
    CHECK(dt_model_save_meta(m, path, "cnn1", "fashion-mnist", "allreduce") == DT_OK);
    dt_weights_meta w;
    CHECK(dt_weights_meta_read(path, &w) == DT_OK);
    char *cnn1 = dt_model_spec_text("cnn1");
    CHECK(w.model && !strcmp(w.model, "cnn1"));
    CHECK(w.data && !strcmp(w.data, "fashion-mnist"));
    CHECK(w.scheme && !strcmp(w.scheme, "allreduce"));
    CHECK(w.spec && cnn1 && !strcmp(w.spec, cnn1));
    CHECK(dt_weights_meta_same_model(&w, "cnn1") == 1);
    CHECK(dt_weights_meta_same_model(&w, "cnn2") == 0);
    dt_weights_meta_free(&w);
    /* the metadata is not a tensor of the model: it loads, and is bit for bit the model saved */
    CHECK(dt_model_load(m2, path) == DT_OK);
    CHECK(memcmp(dt_model_params(m), dt_model_params(m2), dt_model_num_params(m) * sizeof(float)) == 0);
    /* a file without metadata (as older builds wrote): loads, and says nothing */
    CHECK(dt_model_save(m, old) == DT_OK);
    CHECK(dt_weights_meta_read(old, &w) == DT_OK);
    CHECK(!w.model && !w.spec && !w.data && !w.scheme);
    CHECK(dt_weights_meta_same_model(&w, "cnn2") == 1); /* unknown: the shapes will tell */
    dt_weights_meta_free(&w);
    dt_model_init(m2, 3);
    CHECK(dt_model_load(m2, old) == DT_OK);
    CHECK(memcmp(dt_model_params(m), dt_model_params(m2), dt_model_num_params(m) * sizeof(float)) == 0);
    /* a spec file: its text is kept; a copy is the same model, an edited one is not */
    FILE *o = fopen(spec, "w");
    fputs(cnn1, o);
    fclose(o);
    CHECK(dt_model_save_meta(m, path, spec, "mnist", "local") == DT_OK);
    o = fopen(copy, "w");
    fputs(cnn1, o);
    fclose(o);
    CHECK(dt_weights_meta_read(path, &w) == DT_OK);
    CHECK(w.model && !strcmp(w.model, spec));
    CHECK(w.spec && !strcmp(w.spec, cnn1));
    CHECK(dt_weights_meta_same_model(&w, copy) == 1);
    CHECK(dt_weights_meta_same_model(&w, "cnn1") == 1); /* the built-in of the same text */
    o = fopen(copy, "a");
    fputs("relu\n", o);
    fclose(o);
    CHECK(dt_weights_meta_same_model(&w, copy) == 0);
    dt_weights_meta_free(&w);
    free(cnn1);
    dt_model_free(m);
    dt_model_free(m2);
    unlink(path); unlink(old); unlink(spec); unlink(copy);
    CHECK(rmdir(dir) == 0);
}

/* What no loader accepts: a non-finite value (training never writes one), a record written
 * twice. (What is planted beside a file being written: test_files.) */
static void test_weights_refused(void) {
    char dir[] = "/tmp/dtrain-refused-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/m.weights", dir);
    dt_model *m = NULL, *m2 = NULL;
    CHECK(dt_model_from_name("resblock-tiny", &m) == DT_OK);
    CHECK(dt_model_from_name("resblock-tiny", &m2) == DT_OK);
    dt_model_init(m, 1);
    dt_model_init(m2, 2);
    const float before = dt_model_params(m2)[0];
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        const size_t at = dt_model_tensor(m, 1)->offset + 1;
        const float keep = dt_model_params(m)[at];
        dt_model_params(m)[at] = bad[i];
        CHECK(dt_model_save(m, path) == DT_OK);
        dt_model_params(m)[at] = keep;
        CHECK(dt_model_load(m2, path) == DT_ERR_FORMAT);
        char want[200];
        snprintf(want, sizeof want, "tensor '%s' holds a non-finite value", dt_model_tensor(m, 1)->name);
        CHECK_MSG(strstr(dt_last_error(), want) && strstr(dt_last_error(), path), "%s", dt_last_error());
        CHECK(dt_model_params(m2)[0] == before); /* untouched */
    }
    dt_record *r = calloc((size_t)(dt_model_num_tensors(m) + dt_model_num_state_tensors(m)) + 1, sizeof *r);
    int n = dt_model_records(m, r);
    CHECK(n >= 2);
    r[n] = r[1]; /* the second tensor again, last */
    CHECK(dt_tfile_write(path, r, n + 1) == DT_OK);
    dt_tfile f;
    CHECK(dt_tfile_read(path, &f) == DT_ERR_FORMAT);
    char want[400];
    snprintf(want, sizeof want, "%s: record '%s' appears twice", path, r[1].name);
    CHECK_MSG(strstr(dt_last_error(), want), "%s", dt_last_error());
    dt_tfile_free(&f);
    free(r);
    unlink(path);
    CHECK(rmdir(dir) == 0);
    dt_model_free(m);
    dt_model_free(m2);
}

/* Every message is one line that does nothing to a terminal: text from a file keeps its
 * control bytes, C1 controls and bytes that are not UTF-8 as \xNN, valid UTF-8 as it is. */
static void test_messages_escaped(void) {
    dt_fail(DT_ERR_FORMAT, "f: '%s'", "a\033]0;t\007b\nc\177\xc2\x9b|\xc3\xa9|\xff\xe2\x82|\xed\xa0\x80|\xf0\x9f\x98\x80");
    CHECK_MSG(!strcmp(dt_last_error(), "f: 'a\\x1b]0;t\\x07b\\x0ac\\x7f\\xc2\\x9b|\xc3\xa9|\\xff\\xe2\\x82|"
                                       "\\xed\\xa0\\x80|\xf0\x9f\x98\x80'"), "%s", dt_last_error());
    /* a cause given more context: dt_last_error() may be an argument */
    dt_fail(DT_ERR_IO, "x: %s", "y\tz");
    dt_fail(DT_ERR_IO, "outer: %s", dt_last_error());
    CHECK_MSG(!strcmp(dt_last_error(), "outer: x: y\\x09z"), "%s", dt_last_error());
    /* a long run of escapes is cut at a whole one, never in the middle */
    char many[400];
    memset(many, 27, sizeof many - 1);
    many[sizeof many - 1] = 0;
    dt_fail(DT_ERR_FORMAT, "%s", many);
    const char *e = dt_last_error();
    const size_t len = strlen(e);
    CHECK(len > 400 && len % 4 == 0 && !strncmp(e + len - 4, "\\x1b", 4));
}

int main(void) {
    dt_runtime_init();
    test_grads_ready();
    test_zoo();
    test_spec_errors();
    test_weights_file();
    test_weights_meta();
    test_tied_weights();
    test_weights_refused();
    test_messages_escaped();
    test_sgd();
    return test_summary("test_model");
}
