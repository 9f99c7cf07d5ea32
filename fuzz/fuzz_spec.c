/* libFuzzer target: the model spec parser and builder (dt_model_from_spec). A spec that
 * builds and is tiny also runs a forward and backward pass of one image, so the layers'
 * shape arithmetic (and, with clang's AddressSanitizer, which checks masked AVX-512 lanes,
 * the vector kernels) see the odd shapes the fuzzer invents. */
#include "dtrain.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = dt_fuzz_str(data, size);
    dt_model *m;
    if (dt_model_from_spec(text, "fuzz.spec", &m) == DT_OK) {
        int c, h, w;
        dt_model_input_shape(m, &c, &h, &w);
        const int classes = dt_model_num_classes(m);
        if (c < 1 || h < 1 || w < 1 || classes < 1) abort();
        /* tiny: a pass costs microseconds, so the fuzzer keeps its pace. The weights stay
         * zero (dt_model_init would cost more than the pass and adds no shapes). */
        if (dt_model_num_params(m) <= 5000 && dt_model_flops(m) <= 2e5 && (size_t)c * h * w <= 1024 &&
            dt_model_reserve(m, 1) == DT_OK) {
            float *x = calloc((size_t)c * h * w, sizeof *x);
            if (!x) abort();
            for (size_t i = 0; i < (size_t)c * h * w; i++) x[i] = (float)(i % 7) - 3.0f;
            /* a label per prediction: each position of a sequence model's output */
            uint8_t *y = malloc((size_t)dt_model_positions(m));
            if (!y) abort();
            memset(y, classes - 1 < 255 ? classes - 1 : 255, (size_t)dt_model_positions(m));
            dt_model_forward(m, x, 1, 1);
            dt_model_backward(m, y, NULL);
            /* and in bf16, whose staging buffers are sized from the same shapes */
            if (dt_model_set_precision(m, DT_PRECISION_BF16) != DT_OK) abort();
            dt_model_forward(m, x, 1, 1);
            dt_model_backward(m, y, NULL);
            free(x);
            free(y);
        }
        dt_model_free(m);
    }
    free(text);
    return 0;
}
