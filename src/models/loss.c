/* Softmax cross-entropy (loss.h): in doubles, from the largest logit, so a large logit
 * neither overflows exp nor loses the others. */
#include "models/loss.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

float dt_softmax_xent(const float *logits, const uint8_t *labels, int batch, int classes, float *dlogits,
                      int *correct) {
    double total = 0;
    int ok = 0;
    for (int b = 0; b < batch; b++) {
        const float *z = logits + (size_t)b * classes;
        int arg = 0;
        float mx = z[0];
        for (int c = 1; c < classes; c++)
            if (z[c] > mx) { mx = z[c]; arg = c; }
        double sum = 0;
        for (int c = 0; c < classes; c++) sum += exp((double)(z[c] - mx));
        assert(labels[b] < classes);
        total += log(sum) - (double)(z[labels[b]] - mx);
        ok += arg == labels[b];
        if (dlogits) {
            float *d = dlogits + (size_t)b * classes;
            for (int c = 0; c < classes; c++)
                d[c] = (float)(exp((double)(z[c] - mx)) / sum) / (float)batch;
            d[labels[b]] -= 1.0f / (float)batch;
        }
    }
    if (correct) *correct = ok;
    return (float)(total / batch);
}
