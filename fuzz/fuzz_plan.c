/* libFuzzer target: the kernel plan files of `--plan FILE` (src/models/plan.c), read through
 * inih. What it accepts must hold together: a batch from 1, fp32 or bf16, every kernel a real
 * one, no layer named twice; and written back and read again, it writes the same file (the
 * second round trip is byte for byte the first's). */
#include <math.h>

#include "fuzz_util.h"
#include "models/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = dt_fuzz_write("plan.ini", data, size);
    dt_plan p, q, r;
    if (dt_plan_read(path, &p) != DT_OK) return 0;
    if (p.batch < 1 || (p.precision != DT_PRECISION_FP32 && p.precision != DT_PRECISION_BF16) ||
        (p.runs != DT_PRECISION_FP32 && p.runs != DT_PRECISION_BF16) || p.n < 0 ||
        (p.precision == DT_PRECISION_FP32 && p.runs != DT_PRECISION_FP32))
        abort();
    for (int i = 0; i < p.n; i++) {
        if (p.kernel[i] <= DT_KERNEL_RULE || p.kernel[i] >= DT_KERNEL_COUNT) abort();
        for (int j = 0; j < i; j++)
            if (!strcmp(p.node[i], p.node[j])) abort();
    }
    const char *one = dt_fuzz_path("one.ini"), *two = dt_fuzz_path("two.ini");
    if (dt_plan_write(one, &p) != DT_OK) abort();
    if (dt_plan_read(one, &q) != DT_OK) abort();
    if (dt_plan_write(two, &q) != DT_OK || dt_plan_read(two, &r) != DT_OK) abort();
    static char first[1 << 17];
    strcpy(first, dt_fuzz_slurp(one));
    if (strcmp(first, dt_fuzz_slurp(two)) != 0) abort();
    if (q.n != p.n || r.n != p.n) abort();
    dt_plan_free(&p);
    dt_plan_free(&q);
    dt_plan_free(&r);
    return 0;
}
