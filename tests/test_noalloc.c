/* No allocation inside the training step: after dt_model_reserve and the first step (the
 * optimiser's momentum buffer), a step -- batch assembly with augmentation, forward in
 * training mode, backward, SGD with momentum and weight decay -- and an evaluation forward
 * call malloc/calloc/realloc zero times, for every model kind in the zoo, in fp32 and bf16
 * (gpt-tiny: token ids and a target at every position, without a data set).
 * Except inside oneDNN (the conv layers it runs): its primitive execution allocates a few small
 * blocks per call through C++'s operator new (its argument map), which the count tells apart
 * and only requires to be about the same in every step (within 1% and 2). Counted by
 * interposing the allocator (glibc's __libc_* entry points), so BLAS is counted too. The
 * sanitizers replace the allocator themselves: there the count is skipped (and said so). */
#define _GNU_SOURCE /* alloc_count.h: dl_iterate_phdr */
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "check.h"
#include "dtrain.h"

/* A synthetic data set shaped like the model's input (augmentation on, as for CIFAR). */
static void make_data(dt_dataset *d, int c, int h, int w, int classes, int n) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "synthetic");
    d->n = n; d->c = c; d->h = h; d->w = w; d->classes = classes;
    d->images = malloc((size_t)n * c * h * w);
    d->labels = malloc((size_t)n);
    for (size_t i = 0; i < (size_t)n * c * h * w; i++) d->images[i] = (uint8_t)(i * 2654435761u >> 24);
    for (int i = 0; i < n; i++) d->labels[i] = (uint8_t)(i % classes);
    for (int k = 0; k < 3; k++) { d->mean[k] = 0.5f; d->std[k] = 0.25f; }
    d->augment = c == 3;
}

/* The zoo's model name, initialised, at this precision, reserved for batch; NULL on failure */
static dt_model *reserved(const char *name, int batch, dt_precision precision) {
    dt_model *m = NULL;
    CHECK_MSG(dt_model_from_name(name, &m) == DT_OK, "%s: %s", name, dt_last_error());
    if (!m) return NULL;
    dt_model_init(m, 1);
    CHECK(dt_model_set_precision(m, precision) == DT_OK);
    CHECK(dt_model_reserve(m, batch) == DT_OK);
    return m;
}

static void steady_state(const char *name, int batch, dt_precision precision) {
    const long at_start = allocations;
    dt_model *m = reserved(name, batch, precision);
    if (!m) return;
    /* the library's own allocations are seen (so a zero below means something) */
    CHECK_MSG(!COUNTING || allocations > at_start, "%s: building and reserving the model counted no allocation", name);
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    dt_dataset d;
    make_data(&d, c, h, w, dt_model_num_classes(m), 4 * batch);
    float *x = malloc((size_t)batch * c * h * w * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    int *idx = malloc((size_t)batch * sizeof(int));
    dt_sgd opt;
    CHECK(dt_sgd_init(&opt, dt_model_num_params(m), 0.9f, 5e-4f, 1) == DT_OK);
    dt_rng rng;
    dt_rng_seed(&rng, 5);
    long during = 0, cxx_first = -1, cxx_steady = 1;
    float first = 0, last = 0;
    for (int s = 0; s < 6; s++) {
        const long before = allocations, cxx_before = cxx_allocations;
        for (int i = 0; i < batch; i++) idx[i] = (s * batch + i) % d.n;
        dt_batch_fill(&d, idx, batch, x, y, 1, &rng);
        dt_model_forward(m, x, batch, 1);
        float loss = dt_model_backward(m, y, NULL);
        dt_sgd_step(&opt, dt_model_params(m), dt_model_grads(m), 0.01f);
        dt_model_forward(m, x, batch, 0);
        if (s == 0) first = loss;
        last = loss;
        if (s >= 1) during += allocations - before; /* step 0 may create the momentum buffer */
        if (s == 1) cxx_first = cxx_allocations - cxx_before;
        /* (oneDNN's count moves by one now and then on a loaded machine, none of dtrain's) */
        const long cxx = cxx_allocations - cxx_before, slack = 2 + cxx_first / 100;
        if (s > 1 && (cxx > cxx_first + slack || cxx < cxx_first - slack)) {
            fprintf(stderr, "%s: step %d: %ld oneDNN allocations, step 1: %ld\n", name, s, cxx, cxx_first);
            cxx_steady = 0;
        }
    }
    CHECK_MSG(!COUNTING || during == 0, "%s: %ld allocations in 5 steady-state training steps (expected 0)", name, during);
    /* oneDNN's own, in its execution calls: about as many in every step (a cost per call, not
     * growth) */
    CHECK_MSG(!COUNTING || cxx_steady, "%s: oneDNN's allocations change from step to step", name);
    CHECK_MSG(last == last && first == first, "%s: loss is not a number", name);
    char engines[128];
    dt_model_engines(m, engines, sizeof engines);
    printf("%-16s %s batch %2d: %ld allocations in 5 steps%s; oneDNN's execution: %ld per step (%s)\n", name,
           dt_precision_name(precision), batch, during, COUNTING ? "" : " (not counted under the sanitizers)",
           cxx_first, *engines ? engines : "no engine but dtrain's own");
    dt_sgd_free(&opt);
    free(x); free(y); free(idx);
    dt_dataset_free(&d);
    dt_model_free(m);
}

/* A language model's step: token ids in, a target at every position (dt_model_backward_targets),
 * and the uint8 labels' form (widened in the model's buffer), then an evaluation forward and
 * its loss. No data set here: the text data sets are their own test's. */
static void steady_state_lm(const char *name, int batch, dt_precision precision) {
    dt_model *m = reserved(name, batch, precision);
    if (!m) return;
    int c, h, w;
    dt_model_input_shape(m, &c, &h, &w);
    const int rows = batch * dt_model_positions(m), vocab = dt_model_vocab(m);
    float *x = malloc((size_t)batch * h * sizeof(float));
    uint16_t *t = malloc((size_t)rows * sizeof *t);
    uint8_t *y = malloc((size_t)rows);
    dt_sgd opt;
    CHECK(dt_sgd_init(&opt, dt_model_num_params(m), 0.9f, 0.0f, 0) == DT_OK);
    long during = 0;
    float first = 0, last = 0;
    for (int s = 0; s < 4; s++) {
        const long before = allocations;
        for (int i = 0; i < batch * h; i++) x[i] = (float)((i * 31 + s * 7) % vocab);
        for (int i = 0; i < rows; i++) { t[i] = (uint16_t)((i * 17 + s) % vocab); y[i] = (uint8_t)t[i]; }
        dt_model_forward(m, x, batch, 1);
        const float loss = s % 2 ? dt_model_backward(m, y, NULL) : dt_model_backward_targets(m, t, NULL);
        dt_sgd_step(&opt, dt_model_params(m), dt_model_grads(m), 0.01f);
        dt_model_forward(m, x, batch, 0);
        int correct;
        dt_model_loss_targets(m, t, &correct);
        dt_model_loss(m, y, &correct);
        if (s == 0) first = loss;
        last = loss;
        if (s >= 1) during += allocations - before; /* step 0 may create the momentum buffer */
    }
    CHECK_MSG(!COUNTING || during == 0, "%s: %ld allocations in 3 steady-state training steps (expected 0)", name, during);
    CHECK_MSG(last == last && first == first, "%s: loss is not a number", name);
    printf("%-16s %s batch %2d: %ld allocations in 3 steps%s\n", name, dt_precision_name(precision), batch, during,
           COUNTING ? "" : " (not counted under the sanitizers)");
    dt_sgd_free(&opt);
    free(x); free(t); free(y);
    dt_model_free(m);
}

int main(void) {
    dt_runtime_init();
    check_alloc_counter();
    for (int p = DT_PRECISION_FP32; p <= DT_PRECISION_BF16; p++) {
        steady_state("mlp", 32, p);
        steady_state("cnn1", 16, p);
        steady_state("cnn2", 16, p);
        steady_state("downpour-cnn", 8, p);
        steady_state("alexnet-cifar", 4, p);
        steady_state("resnet18-cifar", 2, p);
        steady_state("resblock-tiny", 4, p);
        steady_state_lm("gpt-tiny", 4, p);
    }
    return test_summary("test_noalloc");
}
