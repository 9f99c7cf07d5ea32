/* Softmax cross-entropy (loss.h), row by row from the row's largest logit, so a large logit
 * neither overflows exp nor loses the others. The exps are float (layers/vmath.h: eight at a
 * time), each taken once and kept for the gradient; the row's log-sum and the mean over rows
 * are doubles. A language model's step has batch x T rows of a vocabulary each (gpt-tiny:
 * 768 x 256), where two libm exps in double per logit cost 5% of the step. */
#include "models/loss.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

#include "layers/vmath.h"

float dt_softmax_xent(const float *logits, const uint16_t *targets, int rows, int classes, float *dlogits,
                      int *correct) {
    double total = 0;
    int ok = 0;
    for (int b = 0; b < rows; b++) {
        const float *z = logits + (size_t)b * classes;
        const int t = targets[b];
        assert(t < classes);
        const float mx = dt_vmax(z, (size_t)classes);
        float *d = dlogits ? dlogits + (size_t)b * classes : NULL;
        const float sum = dt_vexp_sum(d, z, (size_t)classes, mx);
        total += log((double)sum) - (double)(z[t] - mx);
        /* a hit: the target is the first of the largest (as a scan keeping the first maximum) */
        if (z[t] == mx) {
            int first = 1;
            for (int c = 0; c < t && first; c++) first = z[c] != mx;
            ok += first;
        }
        if (d) {
            dt_vscale(d, (size_t)classes, 1.0f / (sum * (float)rows));
            d[t] -= 1.0f / (float)rows;
        }
    }
    if (correct) *correct = ok;
    return (float)(total / rows);
}
