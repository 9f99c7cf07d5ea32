/* Whether --precision bf16 has bf16 kernels in this build on this CPU (oneDNN's, where the CPU
 * has bf16 arithmetic), and if not, why: the build's half of the answer, kept with the layers
 * so that models/precision.c states its rules without asking how dtrain was built. */
#ifndef DT_LAYERS_BF16_KERNELS_H
#define DT_LAYERS_BF16_KERNELS_H

#include "layers/kernels.h"

#ifdef DT_WITH_DNNL
int dt_dnnl_bf16_hw(void); /* (layers/dnnl_op.h, which needs oneDNN's headers) */

/* NULL: bf16 kernels run here; else why not */
static inline const char *dt_bf16_kernels_missing(void) {
    return dt_dnnl_bf16_hw() ? NULL : "this CPU has no bf16 arithmetic (AVX512_BF16 or AMX) for oneDNN";
}
#elif defined DT_KERNELS_AVX512
static inline const char *dt_bf16_kernels_missing(void) {
    return __builtin_cpu_supports("avx512bf16") ? "this build has no bf16 kernels: built without oneDNN"
                                                : "this CPU has no bf16 arithmetic (AVX512_BF16), nor this build oneDNN";
}
#else
static inline const char *dt_bf16_kernels_missing(void) { return "this build has no bf16 kernels: built without oneDNN"; }
#endif

#endif
