/* The single-process example of include/dtrain.h: trains cnn1 on the first 4096 examples of MNIST
 * for one pass, then measures accuracy on the first 1000 test images. Exit status 0 when the
 * accuracy reaches the bar (argument 2, default 0.80), 1 below it, 2 on an error.
 *
 *     cc train_one.c $(pkg-config --cflags --libs dtrain) -o train_one
 *     ./train_one [TRAIN_EXAMPLES [MIN_ACCURACY]]     # MNIST from $DTRAIN_DATA/mnist or data/mnist
 */
#include <dtrain.h>

#include <stdio.h>
#include <stdlib.h>

#define BATCH 64

int main(int argc, char **argv) {
    const int ntrain = argc > 1 ? atoi(argv[1]) : 4096;
    const double bar = argc > 2 ? atof(argv[2]) : 0.80;
    const char *root = getenv("DTRAIN_DATA");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mnist", root ? root : "data");

    dt_runtime_init();                               /* one BLAS thread */
    dt_model *m = NULL;
    dt_dataset train = {0}, test = {0};
    if (dt_model_from_name("cnn1", &m) != DT_OK ||
        dt_dataset_load("mnist", dir, 1, &train) != DT_OK ||
        dt_dataset_load("mnist", dir, 0, &test) != DT_OK) {
        fprintf(stderr, "train_one: %s\n", dt_last_error());
        return 2;
    }
    if (ntrain > 0 && ntrain < train.n) dt_dataset_truncate(&train, ntrain);
    if (test.n > 1000) dt_dataset_truncate(&test, 1000);
    dt_model_init(m, 1);                             /* same seed -> same weights */
    dt_sgd sgd;
    if (dt_model_reserve(m, BATCH) != DT_OK ||       /* all activations sized once */
        dt_sgd_init(&sgd, dt_model_num_params(m), 0.9f, 0.0f, 0) != DT_OK) {
        fprintf(stderr, "train_one: %s\n", dt_last_error());
        return 2;
    }
    static float x[BATCH * 784];
    uint8_t y[BATCH];
    int idx[BATCH];
    for (int b = 0; b + BATCH <= train.n; b += BATCH) {
        for (int i = 0; i < BATCH; i++) idx[i] = b + i;
        dt_batch_fill(&train, idx, BATCH, x, y, 0, NULL);
        dt_model_forward(m, x, BATCH, 1);
        dt_model_backward(m, y, NULL);               /* loss + all gradients */
        dt_sgd_step(&sgd, dt_model_params(m), dt_model_grads(m), 0.05f);
    }
    int correct = 0, seen = 0;
    for (int b = 0; b < test.n; b += BATCH) {
        const int n = test.n - b < BATCH ? test.n - b : BATCH;
        int c = 0;
        for (int i = 0; i < n; i++) idx[i] = b + i;
        dt_batch_fill(&test, idx, n, x, y, 0, NULL);
        dt_model_forward(m, x, n, 0);
        dt_model_loss(m, y, &c);
        correct += c; seen += n;
    }
    const double acc = (double)correct / seen;
    printf("train_one: %d examples, test accuracy %.4f on %d (bar %.2f)\n", train.n, acc, seen, bar);
    dt_sgd_free(&sgd); dt_dataset_free(&train); dt_dataset_free(&test);
    dt_model_free(m);                                /* whoever creates frees */
    return acc >= bar ? 0 : 1;
}
