/* Run-time choice of the AVX-512 kernels (src/layers/kernels.h): the library is compiled for
 * any x86-64 and takes them only where the CPU has AVX-512 F/BW/VL/DQ and the OS saves the
 * AVX-512 registers (libgcc's __builtin_cpu_supports checks both). DTRAIN_NO_AVX512 set to
 * anything but "" or "0" forces the portable loops, so they are testable on an AVX-512 machine;
 * DTRAIN_NO_AVX2 likewise for the AVX2 kernels of CPUs without AVX-512 (conv_avx2.h). */
#include "layers/kernels.h"
#include "layers/layer.h"

#include <stdlib.h>
#include <string.h>

_Thread_local int dt_tier_cap;

#ifdef DT_KERNELS_AVX512
_Atomic int dt_avx512_state = -1;

int dt_cpu_avx512_detect(void) {
    const char *off = getenv("DTRAIN_NO_AVX512");
    const int forced_off = off && *off && strcmp(off, "0") != 0;
    const int v = !forced_off && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    atomic_store_explicit(&dt_avx512_state, v, memory_order_relaxed);
    return v;
}

_Atomic int dt_avx2_state = -1;

int dt_cpu_avx2_detect(void) {
    const char *off = getenv("DTRAIN_NO_AVX2");
    const int forced_off = off && *off && strcmp(off, "0") != 0;
    const int v = !forced_off && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    atomic_store_explicit(&dt_avx2_state, v, memory_order_relaxed);
    return v;
}
#endif

const char *dt_layer_kernels(void) {
#ifdef DT_KERNELS_AVX512
    if (dt_cpu_avx512()) return "avx512";
    if (dt_cpu_avx2()) return "avx2";
#endif
    return "portable";
}

static const char *const kernel_names[DT_KERNEL_COUNT] = {"rule",         "own",           "onednn", "onednn-bf16",
                                                          "own-winograd", "onednn-direct", "own-avx2"};

const char *dt_kernel_name(int kernel) {
    return kernel >= 0 && kernel < DT_KERNEL_COUNT ? kernel_names[kernel] : "?";
}

int dt_kernel_parse(const char *name) {
    for (int k = 0; k < DT_KERNEL_COUNT; k++)
        if (strcmp(name, kernel_names[k]) == 0) return k;
    return -1;
}
