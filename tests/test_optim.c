/* The optimiser (dtrain.h: dt_optim, dt_clip_grad_norm, dt_schedule) against references
 * computed elsewhere:
 * - AdamW against PyTorch 1.13: 10 steps of torch.optim.AdamW (single-tensor, two groups: decay
 *   on the conv and linear weights only: not on norms, biases or a GPT's embeddings), for
 *   resblock-tiny and gpt-micro (gpt-tiny's structure, smaller; its head tied to the token
 *   embedding), each after clip_grad_norm_, at nanoGPT's warm-up and cosine lr, from the same
 *   weights and gradients (tests/data/adamw_oracle.tns, written by
 *   scripts/torch_adamw_oracle.py): bit for bit until the first step that clips (the norm may
 *   then differ in its last bit: PyTorch sums it in float; gpt-micro clips from its first step),
 *   the parameters and both moments after 10 steps within 1e-6 of each tensor's scale; the
 *   clipping norms within 1e-6; the decay mask (dt_model_tensor_decays) PyTorch's groups;
 * - the schedule against nanoGPT's get_lr computed in Python (the same file): every step of the
 *   shakespeare_char recipe (warm-up 100, cosine to 1e-4 at step 5000) exactly, at float32;
 * - SGD through dt_optim against PyTorch's SGD written out here (momentum, Nesterov, L2), bit
 *   for bit (the run's default path must not change);
 * - a step over slices (as downpour's servers take it) against one over the whole, bit for bit,
 *   for sgd and adamw, and the masks' effect per tensor;
 * - the optimiser's checkpoint records: a round trip, and another optimiser or beta refused in
 *   one line naming the flag. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/tensorfile.h"
#include "dtrain.h"
#include "optim/optim.h"
#include "oracle_models.h"

static int has_text(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* a zoo model, or the oracles' gpt-micro (oracle_models.h), initialised */
static dt_model *model(const char *name) {
    dt_model *m = NULL;
    CHECK_MSG(open_oracle_model(name, &m) == DT_OK, "%s: %s", name, dt_last_error());
    if (m) dt_model_init(m, 7);
    return m;
}

static void fill(float *x, size_t n, dt_rng *r, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2 * dt_rng_uniform(r) - 1);
}

static const dt_record *rec(const dt_tfile *f, const char *prefix, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const dt_record *r = dt_tfile_find(f, full);
    CHECK_MSG(r != NULL, "oracle record %s missing (regenerate: /usr/bin/python3 scripts/torch_adamw_oracle.py)", full);
    return r;
}

/* |got - want| <= tol * max|want| of the tensor (relative to its scale: a moment summed from
 * terms that cancel is near zero, and a last-bit change of a term is then a large part of it);
 * returns the worst ratio to the tolerance, counting the values that differ at all */
static double compare(const char *what, const float *got, const float *want, size_t n, double tol, size_t *differ) {
    double big = 0, worst = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]) / (tol * big);
        if (!(e <= worst)) worst = e;
        *differ += got[i] != want[i];
    }
    CHECK_MSG(worst <= 1, "%s: off by %.3g of the tolerance %.0e", what, worst, tol);
    return worst;
}

/* ------------------------------------------------------------------ AdamW against PyTorch */

/* a record of one model's AdamW oracle: MP its prefix ("" resblock-tiny, "gpt:" gpt-micro) */
static const dt_record *orec(const dt_tfile *f, const char *mp, const char *prefix, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "%s%s", mp, prefix);
    return rec(f, full, name);
}

static void test_adamw_oracle(const dt_tfile *f, const char *name, const char *mp) {
    dt_model *m = model(name);
    if (!m) return;
    const dt_record *cfg = orec(f, mp, "", "config"), *lrs = orec(f, mp, "", "lr"), *norms = orec(f, mp, "", "norm");
    if (!cfg || !lrs || !norms || cfg->numel != 11) return;
    const float *k = cfg->data; /* LR, MIN_LR, WARMUP, LAST, BETA1, BETA2, EPS, WD, CLIP, STEPS, EXACT */
    const int steps = (int)k[9], exact = (int)k[10];
    const size_t np = dt_model_num_params(m);
    float *w = dt_model_params(m), *g = dt_model_grads(m), *norm_copy = malloc(np * sizeof(float));
    const int T = dt_model_num_tensors(m);
    for (int i = 0; i < T; i++) { /* the starting weights, and the decay mask against PyTorch's groups */
        const dt_tensor_view *v = dt_model_tensor(m, i);
        const dt_record *p0 = orec(f, mp, "param0:", v->name), *d = orec(f, mp, "decay:", v->name);
        if (!p0 || !d || p0->numel != v->numel) { CHECK_MSG(0, "%s: no such tensor in the oracle", v->name); goto done; }
        memcpy(w + v->offset, p0->data, v->numel * sizeof(float));
        CHECK_MSG(dt_model_tensor_decays(m, i) == (d->data[0] != 0), "%s: decays %d, PyTorch's group says %g", v->name,
                  dt_model_tensor_decays(m, i), (double)d->data[0]);
    }
    /* the configuration as the command builds it from --optim adamw --beta2 0.99 ... */
    dt_optim_config oc;
    dt_optim_config_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.beta1 = 0.9; /* the script's BETAS, EPS: doubles, as Python's */
    oc.beta2 = 0.99;
    oc.eps = 1e-8;
    oc.weight_decay = k[7];
    oc.clip = k[8];
    CHECK(oc.beta1 == (double)(float)k[4] || (float)oc.beta1 == k[4]);
    CHECK((float)oc.beta2 == k[5] && (float)oc.eps == k[6]);
    dt_optim o;
    CHECK_MSG(dt_optim_init(&o, &oc, m) == DT_OK, "%s", dt_last_error());
    CHECK(o.cfg.decay_on == DT_DECAY_WEIGHTS); /* auto, for adamw */
    dt_schedule s;
    char sched[64];
    snprintf(sched, sizeof sched, "cosine:%.9g", (double)k[1]);
    CHECK(dt_schedule_parse(sched, k[0], &s) == DT_OK);
    CHECK(dt_schedule_steps(&s, (long)k[2], (long)k[3]) == DT_OK);
    int clipped = 0;
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < T; i++) {
            const dt_tensor_view *v = dt_model_tensor(m, i);
            char pre[16];
            snprintf(pre, sizeof pre, "grad%d:", step);
            const dt_record *r = orec(f, mp, pre, v->name);
            if (!r || r->numel != v->numel) goto free_opt;
            memcpy(g + v->offset, r->data, v->numel * sizeof(float));
        }
        const float lr = dt_schedule_lr_at(&s, step, 0, 1);
        CHECK_MSG(lr == lrs->data[step], "step %d: lr %.9g, nanoGPT's get_lr %.9g", step, (double)lr, (double)lrs->data[step]);
        memcpy(norm_copy, g, np * sizeof(float));
        const float norm = dt_clip_grad_norm(norm_copy, np, INFINITY); /* the norm, nothing clipped */
        CHECK_MSG(fabs(norm - norms->data[step]) <= 1e-6 * norms->data[step], "step %d: norm %.9g, PyTorch's %.9g", step,
                  (double)norm, (double)norms->data[step]);
        clipped += norm > oc.clip;
        dt_optim_step(&o, w, g, lr);
        if (exact > 0 && step + 1 == exact) /* before the first step that clips: PyTorch's bits */
            for (int i = 0; i < T; i++) {
                const dt_tensor_view *v = dt_model_tensor(m, i);
                char pre[24];
                snprintf(pre, sizeof pre, "param%d:", exact);
                const dt_record *p = orec(f, mp, pre, v->name);
                CHECK_MSG(p && !memcmp(p->data, w + v->offset, v->numel * sizeof(float)),
                          "%s after %d steps: not PyTorch's AdamW bit for bit", v->name, exact);
            }
    }
    CHECK_MSG(clipped > 0 && clipped < steps, "clipping took %d of %d steps: the oracle should cover both", clipped, steps);
    CHECK(o.steps == steps);
    size_t differ = 0, n = 0;
    double worst = 0;
    for (int i = 0; i < T; i++) {
        const dt_tensor_view *v = dt_model_tensor(m, i);
        char pre[16], what[96];
        snprintf(pre, sizeof pre, "param%d:", steps);
        const dt_record *p = orec(f, mp, pre, v->name), *ea = orec(f, mp, "exp_avg:", v->name), *eb = orec(f, mp, "exp_avg_sq:", v->name);
        if (!p || !ea || !eb) continue;
        snprintf(what, sizeof what, "%s after %d steps", v->name, steps);
        worst = fmax(worst, compare(what, w + v->offset, p->data, v->numel, 1e-6, &differ));
        snprintf(what, sizeof what, "exp_avg:%s", v->name);
        worst = fmax(worst, compare(what, o.m + v->offset, ea->data, v->numel, 1e-6, &differ));
        snprintf(what, sizeof what, "exp_avg_sq:%s", v->name);
        worst = fmax(worst, compare(what, o.v + v->offset, eb->data, v->numel, 1e-6, &differ));
        n += 3 * v->numel;
    }
    printf("adamw against PyTorch (%s): %d steps (%d clipped), %zu values: worst %.3g of the 1e-6 tolerance, %zu not bit "
           "for bit\n", name, steps, clipped, n, worst, differ);
free_opt:
    dt_optim_free(&o);
done:
    free(norm_copy);
    dt_model_free(m);
}

/* ------------------------------------------------------------------ the schedule against nanoGPT */

static void check_table(const dt_tfile *f, const char *name, const char *sched, float lr, long warmup, long last,
                        int exact) {
    const dt_record *r = rec(f, "sched:", name);
    dt_schedule s;
    CHECK(dt_schedule_parse(sched, lr, &s) == DT_OK);
    CHECK(dt_schedule_steps(&s, warmup, last) == DT_OK);
    if (!r) return;
    CHECK_MSG(r->numel == (size_t)last + 11, "sched:%s has %zu values", name, r->numel);
    int bad = 0;
    for (size_t it = 0; it < r->numel && bad < 3; it++) {
        const float got = dt_schedule_lr_at(&s, (long)it, 0, 1), want = r->data[it];
        /* exact: from the same float lr and MIN_LR; else within float rounding of the decimals */
        const int ok = exact ? got == want : fabsf(got - want) <= 0x1p-23f * want;
        bad += !ok;
        CHECK_MSG(ok, "%s: step %zu: lr %.9g, nanoGPT's get_lr %.9g", name, it, (double)got, (double)want);
    }
}

static void test_schedule(const dt_tfile *f) {
    check_table(f, "char", "cosine:0.0001", 1e-3f, 100, 5000, 1);
    check_table(f, "char-exact", "cosine:0.0001", 1e-3f, 100, 5000, 0);
    check_table(f, "short", "cosine", 0.05f, 5, 29, 1);
    /* the nanoGPT defaults' landmarks, by hand: lr/101 at step 0, lr at the warm-up's end, the
     * minimum at the last step */
    dt_schedule s;
    CHECK(dt_schedule_parse("cosine:0.0001", 1e-3f, &s) == DT_OK && dt_schedule_steps(&s, 100, 1999) == DT_OK);
    CHECK(dt_schedule_lr_at(&s, 0, 0, 1) == (float)(1e-3f / 101.0));
    CHECK(dt_schedule_lr_at(&s, 100, 0, 1) == 1e-3f);
    CHECK(dt_schedule_lr_at(&s, 1999, 0, 1) == 1e-4f);
    /* a warm-up that never ends before the last step: one line naming the flag */
    CHECK(dt_schedule_steps(&s, 100, 100) == DT_ERR_ARG && has_text(dt_last_error(), "--lr-warmup 100"));
    CHECK(dt_schedule_steps(&s, 0, 0) == DT_OK); /* a one-step run without warm-up */
    /* not counted in steps: dt_schedule_lr's epochs, as before, for every kind */
    const char *kinds[] = {"const", "step:2:0.5", "cosine:0.001"};
    for (int i = 0; i < 3; i++) {
        CHECK(dt_schedule_parse(kinds[i], 0.05f, &s) == DT_OK);
        for (double e = 0; e < 5; e += 0.37) CHECK(dt_schedule_lr_at(&s, (long)(e * 100), e, 5) == dt_schedule_lr(&s, e, 5));
    }
    /* a warm-up before step:EVERY:GAMMA, which still counts epochs */
    CHECK(dt_schedule_parse("step:1:0.5", 0.1f, &s) == DT_OK && dt_schedule_steps(&s, 4, 99) == DT_OK);
    CHECK(dt_schedule_lr_at(&s, 1, 0.02, 5) == (float)(0.1f * 2.0 / 5.0));
    CHECK(dt_schedule_lr_at(&s, 50, 2.5, 5) == 0.1f * 0.25f);
}

/* ------------------------------------------------------------------ sgd, slices, masks */

/* PyTorch's SGD (torch.optim.SGD, single tensor), written out: the run's default path */
static void sgd_reference(float *w, const float *g, float *buf, size_t n, float lr, float wd, float mu, int nesterov,
                          int first) {
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];
        if (mu != 0) {
            buf[i] = first ? d : mu * buf[i] + d;
            d = nesterov ? d + mu * buf[i] : buf[i];
        }
        w[i] -= lr * d;
    }
}

static void test_sgd_unchanged(void) {
    dt_model *m = model("cnn1");
    if (!m) return;
    const size_t n = dt_model_num_params(m);
    float *w = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float)), *buf = calloc(n, sizeof(float));
    const float cases[][3] = {{0, 0, 0}, {0.9f, 5e-4f, 0}, {0.9f, 5e-4f, 1}, {0, 1e-3f, 0}};
    for (int c = 0; c < 4; c++) {
        dt_optim_config oc;
        dt_optim_config_defaults(&oc);
        oc.momentum = cases[c][0];
        oc.weight_decay = cases[c][1];
        oc.nesterov = (int)cases[c][2];
        dt_optim o;
        CHECK(dt_optim_init(&o, &oc, m) == DT_OK);
        CHECK(o.cfg.decay_on == DT_DECAY_ALL && o.ndecay == 1); /* auto, for sgd: every tensor, one run */
        dt_rng r;
        dt_rng_seed(&r, 3);
        memcpy(w, dt_model_params(m), n * sizeof(float));
        memset(buf, 0, n * sizeof(float));
        for (int step = 0; step < 4; step++) {
            fill(g, n, &r, 0.1f);
            sgd_reference(w, g, buf, n, 0.05f, oc.weight_decay, oc.momentum, oc.nesterov, step == 0);
            dt_optim_step(&o, dt_model_params(m), g, 0.05f);
        }
        CHECK_MSG(!memcmp(w, dt_model_params(m), n * sizeof(float)), "sgd case %d: not PyTorch's SGD bit for bit", c);
        dt_model_init(m, 7);
        dt_optim_free(&o);
    }
    free(w); free(g); free(buf);
    dt_model_free(m);
}

/* A step over slices that cut tensors and decay runs anywhere == one over the whole */
static void test_slices(dt_optim_kind kind) {
    dt_model *a = model("resblock-tiny"), *b = model("resblock-tiny");
    if (!a || !b) return;
    const size_t n = dt_model_num_params(a);
    float *g = malloc(n * sizeof(float));
    dt_optim_config oc;
    dt_optim_config_defaults(&oc);
    oc.kind = kind;
    oc.weight_decay = 0.05f;
    oc.momentum = kind == DT_OPTIM_SGD ? 0.9f : 0;
    oc.decay_on = DT_DECAY_WEIGHTS; /* runs that decay and runs that do not, for sgd too */
    dt_optim oa, ob;
    CHECK(dt_optim_init(&oa, &oc, a) == DT_OK && dt_optim_init(&ob, &oc, b) == DT_OK);
    CHECK(oa.ndecay > 1); /* the cuts below cross runs that decay and runs that do not */
    dt_rng r;
    dt_rng_seed(&r, 11);
    for (int step = 0; step < 5; step++) {
        fill(g, n, &r, 0.2f);
        const float lr = 0.01f * (float)(step + 1);
        dt_optim_step(&oa, dt_model_params(a), g, lr);
        const size_t cut = n / 3 + (size_t)step * 7, cut2 = cut + 100; /* three slices, uneven */
        dt_optim_begin(&ob);
        dt_optim_apply(&ob, cut2, n - cut2, dt_model_params(b) + cut2, g + cut2, lr);
        dt_optim_apply(&ob, 0, cut, dt_model_params(b), g, lr);
        dt_optim_apply(&ob, cut, cut2 - cut, dt_model_params(b) + cut, g + cut, lr);
    }
    CHECK_MSG(!memcmp(dt_model_params(a), dt_model_params(b), n * sizeof(float)), "%s: slices != whole",
              dt_optim_names[kind]);
    CHECK(!memcmp(oa.m, ob.m, n * sizeof(float)));
    CHECK(kind == DT_OPTIM_SGD || !memcmp(oa.v, ob.v, n * sizeof(float)));
    /* a copy laid out as the model (a master) steps the same */
    dt_optim_free(&oa); dt_optim_free(&ob);
    free(g);
    dt_model_free(a); dt_model_free(b);
}

/* Decoupled decay with a zero gradient moves exactly the tensors the mask names, by 1 - lr*wd */
static void test_masks(void) {
    const char *names[] = {"resblock-tiny", "cnn1"};
    for (int k = 0; k < 2; k++)
        for (int on = DT_DECAY_WEIGHTS; on <= DT_DECAY_ALL; on++) {
            dt_model *m = model(names[k]);
            if (!m) return;
            const size_t n = dt_model_num_params(m);
            float *before = malloc(n * sizeof(float)), *g = calloc(n, sizeof(float));
            memcpy(before, dt_model_params(m), n * sizeof(float));
            dt_optim_config oc;
            dt_optim_config_defaults(&oc);
            oc.kind = DT_OPTIM_ADAMW;
            oc.weight_decay = 0.5f;
            oc.decay_on = (dt_decay_on)on;
            dt_optim o;
            CHECK(dt_optim_init(&o, &oc, m) == DT_OK);
            dt_optim_step(&o, dt_model_params(m), g, 0.1f);
            int weights = 0, others = 0;
            for (int i = 0; i < dt_model_num_tensors(m); i++) {
                const dt_tensor_view *v = dt_model_tensor(m, i);
                const size_t len = strlen(v->name);
                const int is_weight = len > 7 && !strcmp(v->name + len - 7, ".weight") && v->ndim >= 2;
                const int want = on == DT_DECAY_ALL || (on == DT_DECAY_MATRICES ? v->ndim >= 2 : is_weight);
                weights += want;
                others += !want;
                const float *x = dt_model_params(m) + v->offset, *x0 = before + v->offset;
                int ok = 1;
                for (size_t j = 0; j < v->numel; j++) ok &= x[j] == (want ? x0[j] * (float)(1.0 - 0.1f * (double)0.5f) : x0[j]);
                CHECK_MSG(ok, "%s --decay-on %s: tensor %s %s", names[k], dt_decay_on_names[on], v->name,
                          want ? "not decayed" : "decayed");
                if (on == DT_DECAY_WEIGHTS) CHECK(dt_model_tensor_decays(m, i) == is_weight);
            }
            CHECK(weights > 0 && (on == DT_DECAY_ALL || others > 0));
            dt_optim_free(&o);
            free(before); free(g);
            dt_model_free(m);
        }
}

/* ------------------------------------------------------------------ clipping, checks, records */

static void test_clip(void) {
    float g[2] = {3, 4};
    CHECK(dt_clip_grad_norm(g, 2, 10) == 5 && g[0] == 3 && g[1] == 4); /* under the limit: untouched */
    const float coef = 1.0f / (5.0f + 1e-6f) * 1.0f;
    CHECK(dt_clip_grad_norm(g, 2, 1) == 5 && g[0] == 3 * coef && g[1] == 4 * coef);
    CHECK(fabsf(hypotf(g[0], g[1]) - 1) < 1e-6f);
}

static void test_config_checks(void) {
    dt_optim_config oc;
    dt_optim_config_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.momentum = 0.9f;
    CHECK(dt_optim_config_check(&oc) == DT_ERR_ARG && has_text(dt_last_error(), "--momentum 0.9: an sgd flag"));
    oc.momentum = 0;
    oc.beta2 = 1;
    CHECK(dt_optim_config_check(&oc) == DT_ERR_ARG && has_text(dt_last_error(), "--beta2 1:"));
    oc.beta2 = 0.99;
    oc.clip = -1;
    CHECK(dt_optim_config_check(&oc) == DT_ERR_ARG && has_text(dt_last_error(), "--clip -1"));
    dt_optim_config_defaults(&oc);
    oc.nesterov = 1;
    CHECK(dt_optim_config_check(&oc) == DT_ERR_ARG && has_text(dt_last_error(), "--nesterov: needs --momentum"));
}

/* saved, written, read and loaded into a fresh optimiser: the same state; then refused under
 * another optimiser or beta, naming the flag */
static void test_records(void) {
    dt_model *m = model("cnn1");
    if (!m) return;
    const size_t n = dt_model_num_params(m);
    float *g = malloc(n * sizeof(float));
    dt_rng r;
    dt_rng_seed(&r, 5);
    dt_optim_config oc;
    dt_optim_config_defaults(&oc);
    oc.kind = DT_OPTIM_ADAMW;
    oc.beta2 = 0.99;
    dt_optim o, back;
    CHECK(dt_optim_init(&o, &oc, m) == DT_OK && dt_optim_init(&back, &oc, m) == DT_OK);
    for (int step = 0; step < 3; step++) {
        fill(g, n, &r, 0.1f);
        dt_optim_step(&o, dt_model_params(m), g, 1e-3f);
    }
    char path[] = "/tmp/dtrain_test_optim_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    dt_records l = {0};
    dt_optim_head head;
    CHECK(dt_optim_save(&o, &head, &l) == DT_OK);
    CHECK(dt_tfile_write(path, l.r, l.n) == DT_OK);
    dt_records_free(&l);
    dt_tfile f;
    CHECK(dt_tfile_read(path, &f) == DT_OK);
    CHECK_MSG(dt_optim_load(&back, &f, path) == DT_OK, "%s", dt_last_error());
    CHECK(back.steps == 3 && !memcmp(back.m, o.m, n * sizeof(float)) && !memcmp(back.v, o.v, n * sizeof(float)));
    dt_optim other;
    oc.beta2 = 0.999;
    CHECK(dt_optim_init(&other, &oc, m) == DT_OK);
    CHECK(dt_optim_load(&other, &f, path) == DT_ERR_ARG && has_text(dt_last_error(), "--beta2 0.999: --resume") &&
          has_text(dt_last_error(), "saved with --beta2 0.99 "));
    dt_optim_free(&other);
    dt_optim_config_defaults(&oc);
    oc.momentum = 0.9f;
    CHECK(dt_optim_init(&other, &oc, m) == DT_OK);
    CHECK(dt_optim_load(&other, &f, path) == DT_ERR_ARG && has_text(dt_last_error(), "--optim sgd: --resume") &&
          has_text(dt_last_error(), "--optim adamw"));
    dt_optim_free(&other);
    dt_tfile_free(&f);
    unlink(path);
    dt_optim_free(&o); dt_optim_free(&back);
    free(g);
    dt_model_free(m);
}

int main(void) {
    dt_runtime_init();
    const char *dir = getenv("DTRAIN_TEST_FILES");
    char path[1024];
    snprintf(path, sizeof path, "%s/adamw_oracle.tns", dir && *dir ? dir : "tests/data");
    dt_tfile f;
    if (dt_tfile_read(path, &f) != DT_OK) {
        CHECK_MSG(0, "%s (write it with /usr/bin/python3 scripts/torch_adamw_oracle.py)", dt_last_error());
    } else {
        test_adamw_oracle(&f, "resblock-tiny", "");
        test_adamw_oracle(&f, "gpt-micro", "gpt:");
        test_schedule(&f);
        dt_tfile_free(&f);
    }
    test_sgd_unchanged();
    test_slices(DT_OPTIM_SGD);
    test_slices(DT_OPTIM_ADAMW);
    test_masks();
    test_clip();
    test_config_checks();
    test_records();
    return test_summary("test_optim");
}
