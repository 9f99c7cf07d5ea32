/* PyTorch oracle test: builds each model in C, copies in the parameters PyTorch used (by
 * name), runs one forward + backward on PyTorch's batch and compares logits, loss, every
 * parameter gradient, the input gradient and (train-mode batch-norm) the running statistics
 * against tests/data/<model>_oracle.bin, written by scripts/torch_oracle.py (file format in
 * that script's docstring).
 *
 * Tolerance per element: |got - ref| <= 1e-4 * max(1, max|ref| of the tensor). Because most
 * tensors here have max|ref| < 1 that is an absolute 1e-4, which would miss a wrong scale in
 * a small tensor (the cnn1 input gradient peaks at ~1.4e-3), so each tensor must also satisfy
 * |got - ref| <= 1e-3 * max|ref| + 1e-7 (float32 noise measured against float64 is ~1e-6 of
 * max|ref|, so both bounds leave wide margins).
 *
 * --precision bf16 is compared the same way with <model>_oracle_bf16.bin (its rules written
 * out in PyTorch) and <model>_oracle_autocast.bin (PyTorch's bf16 autocast), with the
 * tolerances given at BF16 and AUTOCAST below. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtrain.h"
#include "models/model.h"
#include "oracle_models.h"

#define TOL_REL 1e-4
#define TOL_SCALE 1e-3
#define TOL_FLOOR 1e-7

/* One comparison: the model's precision, the oracle file's suffix and the tolerances. */
typedef struct variant {
    dt_precision precision;
    const char *suffix; /* "" (fp32), "_bf16", "_autocast" */
    double rel, scale;  /* |got - ref| <= rel * max(1, max|ref|) and <= scale * max|ref| + floor */
} variant;

static const variant FP32 = {DT_PRECISION_FP32, "", TOL_REL, TOL_SCALE};
/* A GPT (gpt-micro: gpt-tiny's structure, smaller) within 1e-5 of each tensor's max|ref|,
 * as issue 45 asks; measured: at most ~1e-6 (printed below). */
static const variant FP32_GPT = {DT_PRECISION_FP32, "", 1e-5, 1e-5};
/* --precision bf16 against dtrain's rules written out in PyTorch (scripts/torch_oracle.py):
 * two bf16 rounding units (2 x 2^-8). Measured: at most 2.5e-3 of max|ref| (resblock-tiny's
 * conv1 weight gradient; most tensors 1e-7), from sums taken in another order, which round a
 * value the other way now and then. The fp32 engine is 0.2 of max|ref| away from the same file
 * (cnn1's input gradient), so the tolerance tells the precisions apart: main checks that. */
static const variant BF16 = {DT_PRECISION_BF16, "_bf16", 0x1p-7, 0x1p-7};
/* Against PyTorch's own bf16 autocast, only a coarse check (signs, scales, nothing missing):
 * autocast differs from fp32 by up to 0.49 of max|ref| (cnn1's input gradient, a sum of terms
 * a hundred times its size, each off by bf16's rounding) and from dtrain's rules by 0.51, as it
 * also rounds weight gradients and runs oneDNN's bf16 kernels. */
static const variant AUTOCAST = {DT_PRECISION_BF16, "_autocast", 0.75, 0.75};
/* gpt-micro against the same rules: 2^-8 of max|ref|, one bf16 rounding unit. Measured: 5.1e-4
 * here (Zen's OpenBLAS kernels, AVX2), 2.1e-3 with other kernels (OPENBLAS_CORETYPE=Sandybridge)
 * or the portable tier (libm's exp): a value summed in another order, or exp'd by another exp,
 * rounds to the other bf16 neighbour now and then, and the token embedding's gradient, a sum
 * over every position, moves by up to a unit of its own. Two units (resblock-tiny's 2^-7) would
 * be too loose: the fp32 engine is 4.9 units from this file, 2.4 of those. */
static const variant BF16_GPT = {DT_PRECISION_BF16, "_bf16", 0x1p-8, 0x1p-8};
/* The fp32 engine against the bf16 rules' file, measured only (probe). */
static const variant FP32_VS_BF16 = {DT_PRECISION_FP32, "_bf16", 0x1p-7, 0x1p-7};
static const variant FP32_VS_BF16_GPT = {DT_PRECISION_FP32, "_bf16", 0x1p-8, 0x1p-8};

/* The largest error of a run as a fraction of its scale tolerance; with probe set, errors
 * are only measured, not failed (to show that a tolerance tells the precisions apart). */
static double worst_share;
static int probe;

typedef struct orec {
    char name[96];
    int ndim;
    int dims[4];
    size_t numel;
    const float *data; /* points into the file buffer (copied aligned below) */
} orec;

typedef struct ofile {
    char model[64];
    int batch;
    int nrec;
    orec *rec;
    float *store; /* aligned copy of all record data */
} ofile;

static uint32_t rd_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float rd_f32(const unsigned char *p) {
    uint32_t u = rd_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void ofile_free(ofile *f) {
    free(f->rec);
    free(f->store);
    memset(f, 0, sizeof *f);
}

/* Returns 0 on success; on failure prints why and returns -1. */
static int ofile_read(const char *path, ofile *out) {
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "oracle file %s is missing: generate it with "
                "`/usr/bin/python3 scripts/torch_oracle.py` (needs PyTorch)\n", path);
        return -1;
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(fp); fprintf(stderr, "%s: out of memory\n", path); return -1; }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) break;
    }
    int ioerr = ferror(fp);
    fclose(fp);
    if (ioerr) { free(buf); fprintf(stderr, "%s: read error\n", path); return -1; }

#define NEED(nbytes, what) do { if (len - pos < (size_t)(nbytes)) { \
        fprintf(stderr, "%s: truncated at byte %zu reading %s\n", path, pos, what); goto bad; } } while (0)
    size_t pos = 0;
    NEED(8, "magic");
    if (memcmp(buf, "DTORACL1", 8) != 0) {
        fprintf(stderr, "%s: bad magic (expected DTORACL1)\n", path);
        goto bad;
    }
    pos = 8;
    NEED(4, "model name length");
    uint32_t nl = rd_u32(buf + pos); pos += 4;
    if (nl == 0 || nl >= sizeof out->model) { fprintf(stderr, "%s: bad model name length %u\n", path, nl); goto bad; }
    NEED(nl, "model name");
    memcpy(out->model, buf + pos, nl); out->model[nl] = 0; pos += nl;
    NEED(8, "batch and record count");
    out->batch = (int)rd_u32(buf + pos); pos += 4;
    uint32_t nrec = rd_u32(buf + pos); pos += 4;
    if (out->batch <= 0 || out->batch > 4096 || nrec == 0 || nrec > 10000) {
        fprintf(stderr, "%s: implausible batch %d / record count %u\n", path, out->batch, nrec);
        goto bad;
    }
    out->rec = calloc(nrec, sizeof *out->rec);
    out->store = malloc(len); /* data is a subset of the file, so len floats' bytes suffice */
    if (!out->rec || !out->store) { fprintf(stderr, "%s: out of memory\n", path); goto bad; }
    size_t used = 0; /* floats used in store */
    for (uint32_t r = 0; r < nrec; r++) {
        orec *o = &out->rec[r];
        NEED(4, "record name length");
        uint32_t rl = rd_u32(buf + pos); pos += 4;
        if (rl == 0 || rl >= sizeof o->name) { fprintf(stderr, "%s: record %u: bad name length %u\n", path, r, rl); goto bad; }
        NEED(rl, "record name");
        memcpy(o->name, buf + pos, rl); o->name[rl] = 0; pos += rl;
        NEED(4, "ndim");
        o->ndim = (int)rd_u32(buf + pos); pos += 4;
        if (o->ndim < 0 || o->ndim > 4) { fprintf(stderr, "%s: record %s: bad ndim %d\n", path, o->name, o->ndim); goto bad; }
        o->numel = 1;
        for (int d = 0; d < o->ndim; d++) {
            NEED(4, "dims");
            o->dims[d] = (int)rd_u32(buf + pos); pos += 4;
            if (o->dims[d] < 0 || o->dims[d] > (1 << 24)) { fprintf(stderr, "%s: record %s: bad dim %d\n", path, o->name, o->dims[d]); goto bad; }
            o->numel *= (size_t)o->dims[d];
        }
        if (o->numel > (len - pos) / 4) { fprintf(stderr, "%s: record %s: data truncated\n", path, o->name); goto bad; }
        float *dst = out->store + used;
        for (size_t i = 0; i < o->numel; i++) dst[i] = rd_f32(buf + pos + 4 * i);
        o->data = dst;
        used += o->numel;
        pos += 4 * o->numel;
        out->nrec++;
    }
    if (pos != len) { fprintf(stderr, "%s: %zu trailing bytes\n", path, len - pos); goto bad; }
#undef NEED
    free(buf);
    return 0;
bad:
    free(buf);
    ofile_free(out);
    return -1;
}

static const orec *ofind(const ofile *f, const char *prefix, const char *name) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    for (int i = 0; i < f->nrec; i++)
        if (strcmp(f->rec[i].name, full) == 0) return &f->rec[i];
    return NULL;
}

static void fmt_shape(char *s, size_t n, int ndim, const int *dims) {
    size_t k = (size_t)snprintf(s, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(s + k, n - k, d ? ",%d" : "%d", dims[d]);
    if (k < n) snprintf(s + k, n - k, "]");
}

/* Same shape as the view (and the same numel)? Reports mismatches. */
static int shape_matches(const char *what, const dt_tensor_view *v, const orec *o) {
    int same = v->ndim == o->ndim && v->numel == o->numel;
    for (int d = 0; same && d < v->ndim; d++) same = v->shape[d] == o->dims[d];
    char a[64], b[64];
    fmt_shape(a, sizeof a, v->ndim, v->shape);
    fmt_shape(b, sizeof b, o->ndim, o->dims);
    CHECK_MSG(same, "%s %s: model shape %s (numel %zu), oracle shape %s (numel %zu)",
              what, v->name, a, v->numel, b, o->numel);
    return same;
}

/* Compares n floats against the reference; prints the worst element on failure. */
static void compare(const variant *v, const char *model, const char *name, const float *got, const float *ref,
                    size_t n) {
    double maxref = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)ref[i]) > maxref) maxref = fabs((double)ref[i]);
    double tol = v->rel * (maxref > 1.0 ? maxref : 1.0);
    double tol_scale = v->scale * maxref + TOL_FLOOR;
    double worst = -1.0;
    size_t wi = 0, nbad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        if (e != e) e = INFINITY; /* NaN counts as the worst possible */
        if (!(e <= tol)) nbad++;
        if (e > worst) { worst = e; wi = i; }
    }
    printf("  %-14s %-38s n=%-6zu max|ref|=%-10.4g max err=%.3g (%.3g of max|ref|)\n", model, name, n, maxref,
           worst, maxref > 0 ? worst / maxref : worst);
    if (worst / tol_scale > worst_share) worst_share = worst / tol_scale;
    if (probe) return;
    CHECK_MSG(nbad == 0, "%s %s: %zu of %zu elements off by more than %.3g; worst at [%zu]: "
              "got %.9g, want %.9g (err %.3g)", model, name, nbad, n, tol, wi,
              (double)got[wi], (double)ref[wi], worst);
    CHECK_MSG(worst <= tol_scale, "%s %s: error %.3g at [%zu] exceeds %.0e of the tensor's "
              "max|ref| %.3g (got %.9g, want %.9g)", model, name, worst, wi, v->scale, maxref,
              (double)got[wi], (double)ref[wi]);
}

static void run_oracle(const char *dir, const char *model_name, int train, const variant *var) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_oracle%s.bin", dir, model_name, var->suffix);
    ofile f;
    if (ofile_read(path, &f) != 0) {
        CHECK_MSG(0, "cannot use oracle file %s (run /usr/bin/python3 scripts/torch_oracle.py)", path);
        return;
    }
    CHECK_MSG(strcmp(f.model, model_name) == 0, "%s names model '%s'", path, f.model);
    printf("%s: %s, batch %d, %d records, %s mode, dtrain in %s\n", path, f.model, f.batch, f.nrec,
           train ? "train" : "eval", dt_precision_name(var->precision));

    dt_model *m = NULL;
    float *dx = NULL;
    uint8_t *labels = NULL;
    uint16_t *targets = NULL;
    dt_status st = open_oracle_model(model_name, &m);
    CHECK_MSG(st == DT_OK && m, "dt_model_from_name(%s): %s", model_name, dt_last_error());
    if (st != DT_OK || !m) goto done;
    dt_model_init(m, 1); /* running stats mean 0 / var 1, as in PyTorch */
    st = dt_model_set_precision(m, var->precision);
    if (st == DT_OK) st = dt_model_reserve(m, f.batch);
    CHECK_MSG(st == DT_OK, "dt_model_reserve(%d): %s", f.batch, dt_last_error());
    if (st != DT_OK) goto done;

    /* Input, labels, logits records and their shapes. */
    const orec *xin = ofind(&f, "", "input");
    const orec *lab = ofind(&f, "", "labels");
    const orec *lgt = ofind(&f, "", "logits");
    const orec *los = ofind(&f, "", "loss");
    const orec *dxr = ofind(&f, "", "input_grad");
    CHECK_MSG(xin && lab && lgt && los && dxr, "%s lacks input/labels/logits/loss/input_grad", path);
    if (!(xin && lab && lgt && los && dxr)) goto done;
    int c = 0, h = 0, w = 0, classes = dt_model_num_classes(m);
    /* a language model: a target at every position (rows = batch x T), token ids in */
    const int rows = f.batch * dt_model_positions(m), lm = dt_model_vocab(m) > 0;
    dt_model_input_shape(m, &c, &h, &w);
    int in_ok = xin->ndim == 4 && xin->dims[0] == f.batch && xin->dims[1] == c &&
                xin->dims[2] == h && xin->dims[3] == w && dxr->numel == xin->numel;
    CHECK_MSG(in_ok, "input shape: model %dx%dx%d, oracle record has ndim %d numel %zu",
              c, h, w, xin->ndim, xin->numel);
    int out_ok = lgt->ndim == 2 && lgt->dims[0] == rows && lgt->dims[1] == classes;
    CHECK_MSG(out_ok, "logits: model has %d rows of %d classes, oracle logits numel %zu", rows, classes, lgt->numel);
    CHECK_MSG(lab->numel == (size_t)rows, "labels: %zu, rows %d", lab->numel, rows);
    CHECK_MSG(los->ndim == 0 && los->numel == 1, "loss record is not a scalar");
    if (!in_ok || !out_ok || lab->numel != (size_t)rows) goto done;
    labels = malloc((size_t)rows);
    targets = malloc((size_t)rows * sizeof *targets);
    if (!labels || !targets) goto done;
    for (int i = 0; i < rows; i++) {
        float v = lab->data[i];
        CHECK_MSG(v >= 0 && v < classes && v == floorf(v) && v < 256, "label %d = %g", i, (double)v);
        labels[i] = (uint8_t)v;
        targets[i] = (uint16_t)v;
    }

    /* Parameters: every model tensor in the file and vice versa, same shapes. */
    float *params = dt_model_params(m);
    int nt = dt_model_num_tensors(m), params_ok = 1;
    size_t covered = 0;
    CHECK_MSG(nt > 0, "%s has no parameter tensors", model_name);
    for (int i = 0; i < nt; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        const orec *o = ofind(&f, "param:", v->name);
        const orec *g = ofind(&f, "grad:", v->name);
        CHECK_MSG(o && g, "model tensor %s has no param:/grad: record in %s", v->name, path);
        if (!o || !g) { params_ok = 0; continue; }
        if (!shape_matches("param", v, o) || !shape_matches("grad", v, g)) { params_ok = 0; continue; }
        CHECK_MSG(v->offset + v->numel <= dt_model_num_params(m), "%s: view beyond buffer", v->name);
        memcpy(params + v->offset, o->data, v->numel * sizeof(float));
        covered += v->numel;
    }
    for (int r = 0; r < f.nrec; r++) {
        const char *rn = f.rec[r].name;
        const char *base = strncmp(rn, "param:", 6) == 0 ? rn + 6 : strncmp(rn, "grad:", 5) == 0 ? rn + 5 : NULL;
        if (!base) continue;
        int found = 0;
        for (int i = 0; i < nt && !found; i++) found = strcmp(dt_model_tensor(m, i)->name, base) == 0;
        CHECK_MSG(found, "oracle record %s has no model tensor %s", rn, base);
        if (!found) params_ok = 0;
    }
    CHECK_MSG(covered == dt_model_num_params(m), "tensors cover %zu of %zu parameters",
              covered, dt_model_num_params(m));
    if (!params_ok) goto done;

    /* Forward. */
    const float *logits = dt_model_forward(m, xin->data, f.batch, train);
    CHECK(logits != NULL);
    if (!logits) goto done;
    compare(var, model_name, "logits", logits, lgt->data, lgt->numel);
    int want_correct = 0;
    for (int i = 0; i < rows; i++) {
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (lgt->data[i * classes + k] > lgt->data[i * classes + best]) best = k;
        want_correct += best == labels[i];
    }

    /* Backward: poison the outputs first so anything not written shows up. */
    float *grads = dt_model_grads(m);
    for (size_t i = 0; i < dt_model_num_params(m); i++) grads[i] = NAN;
    dx = malloc(xin->numel * sizeof *dx);
    CHECK(dx != NULL);
    if (!dx) goto done;
    for (size_t i = 0; i < xin->numel; i++) dx[i] = NAN;
    int correct = -1;
    /* a language model through the targets' own API (uint16; the uint8 labels are widened into
     * the same), the loss alone first */
    if (lm) {
        int c2 = -1;
        const float l2 = dt_model_loss_targets(m, targets, &c2);
        compare(var, model_name, "loss (dt_model_loss_targets)", &l2, los->data, 1);
        CHECK_MSG(c2 == want_correct, "%s: dt_model_loss_targets: correct = %d, oracle argmax gives %d", model_name, c2,
                  want_correct);
    }
    float loss = lm ? dt_model_backward_targets(m, targets, &correct) : dt_model_backward_input(m, labels, &correct, dx);
    if (lm) memset(dx, 0, xin->numel * sizeof *dx); /* token ids have no gradient: the file's zeros */
    compare(var, model_name, "loss", &loss, los->data, 1);
    CHECK_MSG(correct == want_correct, "%s: correct = %d, oracle argmax gives %d", model_name,
              correct, want_correct);
    for (int i = 0; i < nt; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        char nm[96];
        snprintf(nm, sizeof nm, "grad:%s", v->name);
        compare(var, model_name, nm, grads + v->offset, ofind(&f, "grad:", v->name)->data, v->numel);
    }
    compare(var, model_name, "input_grad", dx, dxr->data, dxr->numel);

    /* Batch-norm running statistics after the one forward (both directions). */
    int ns = dt_model_num_state_tensors(m), nstate_rec = 0;
    float *state = dt_model_state(m);
    for (int i = 0; i < ns; i++) {
        const dt_tensor_view *v = dt_model_state_tensor(m, i);
        const orec *o = ofind(&f, "state:", v->name);
        CHECK_MSG(o != NULL, "model state tensor %s has no state: record in %s", v->name, path);
        if (!o || !shape_matches("state", v, o)) continue;
        char nm[96];
        snprintf(nm, sizeof nm, "state:%s", v->name);
        compare(var, model_name, nm, state + v->offset, o->data, v->numel);
    }
    for (int r = 0; r < f.nrec; r++) {
        const char *rn = f.rec[r].name;
        if (strncmp(rn, "state:", 6) != 0) continue;
        nstate_rec++;
        int found = 0;
        for (int i = 0; i < ns && !found; i++) found = strcmp(dt_model_state_tensor(m, i)->name, rn + 6) == 0;
        CHECK_MSG(found, "oracle record %s has no model state tensor", rn);
    }
    if (train) CHECK_MSG(nstate_rec > 0, "%s: train-mode oracle without state records", path);

done:
    free(labels);
    free(targets);
    free(dx);
    if (m) dt_model_free(m);
    ofile_free(&f);
}

int main(void) {
    dt_runtime_init();
    const char *dir = getenv("DTRAIN_TEST_FILES");
    if (!dir || !*dir) dir = "tests/data";
    run_oracle(dir, "cnn1", 0, &FP32);
    run_oracle(dir, "resblock-tiny", 1, &FP32);
    run_oracle(dir, "cnn1", 0, &BF16);
    run_oracle(dir, "resblock-tiny", 1, &BF16);
    run_oracle(dir, "cnn1", 0, &AUTOCAST);
    run_oracle(dir, "resblock-tiny", 1, &AUTOCAST);
    run_oracle(dir, "gpt-micro", 0, &FP32_GPT);
    run_oracle(dir, "gpt-micro", 0, &BF16_GPT);
    run_oracle(dir, "gpt-micro", 0, &AUTOCAST);
    /* the bf16 tolerance is tight enough that the fp32 engine fails it on each model */
    probe = 1;
    const char *probed[] = {"cnn1", "resblock-tiny", "gpt-micro"};
    for (int i = 0; i < 3; i++) {
        worst_share = 0;
        run_oracle(dir, probed[i], i == 1, i == 2 ? &FP32_VS_BF16_GPT : &FP32_VS_BF16);
        printf("fp32 engine against the bf16 oracle: worst error %.1f bf16 tolerances\n", worst_share);
        CHECK_MSG(worst_share > 4, "fp32 is only %.2f bf16-tolerances from the bf16 oracle of %s: the bf16 "
                  "check would not notice bf16 being off", worst_share, probed[i]);
    }
    probe = 0;
    return test_summary("test_oracle");
}
