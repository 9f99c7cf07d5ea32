/* Run-time choice of the AVX-512 kernels (src/layers/kernels.h): the library is compiled for
 * any x86-64 and takes them only where the CPU has AVX-512 F/BW/VL/DQ and the OS saves the
 * AVX-512 registers (libgcc's __builtin_cpu_supports checks both). DTRAIN_NO_AVX512 set to
 * anything but "" or "0" forces the portable loops, so they are testable on an AVX-512 machine. */
#include "layers/kernels.h"

#include <stdlib.h>
#include <string.h>

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
#endif
