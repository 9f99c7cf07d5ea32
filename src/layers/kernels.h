/* Small vector kernels shared by the layers (runs of a few dozen floats, where a libc call per
 * run costs more than the work). AVX-512 masked loads/stores when the CPU has them; plain loops
 * otherwise. The library is compiled for any x86-64: the AVX-512 functions carry
 * DT_AVX512 (a function-level target attribute) and are called only when dt_cpu_avx512() says
 * the CPU (and the OS) runs them, as OpenBLAS picks its kernels (src/layers/cpu.c;
 * DTRAIN_NO_AVX512=1 forces the portable path, for tests). The sanitizer build compiles the
 * AVX-512 code too: see dt_lanes_check. */
#ifndef DT_KERNELS_H
#define DT_KERNELS_H

#include <stddef.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdatomic.h>
#define DT_KERNELS_AVX512 1
#define DT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

#define DT_AVX2 __attribute__((target("avx2,fma")))

/* 1: the AVX-512 kernels run here, 0: not (or DTRAIN_NO_AVX512 is set), -1: not asked yet. */
extern _Atomic int dt_avx512_state;
int dt_cpu_avx512_detect(void);
/* Whether to take the AVX-512 kernels (one relaxed load once known; races only recompute the
 * same answer). */
/* A plan's tier for the layer this thread runs (DT_KERNEL_OWN_AVX2: 1, the AVX2 kernels even
 * where the CPU has AVX-512); 0: the CPU's. Set and reset around one layer's pass (conv.c). */
extern _Thread_local int dt_tier_cap;
static inline int dt_cpu_avx512(void) {
    if (dt_tier_cap >= 1) return 0;
    int v = atomic_load_explicit(&dt_avx512_state, memory_order_relaxed);
    return v >= 0 ? v : dt_cpu_avx512_detect();
}

/* The same for the AVX2 kernels (conv_avx2.h): 1 where the CPU has AVX2 and FMA and
 * DTRAIN_NO_AVX2 is not set. */
extern _Atomic int dt_avx2_state;
int dt_cpu_avx2_detect(void);
static inline int dt_cpu_avx2(void) {
    int v = atomic_load_explicit(&dt_avx2_state, memory_order_relaxed);
    return v >= 0 ? v : dt_cpu_avx2_detect();
}

/* GCC's AddressSanitizer (checked with GCC 12) does not instrument the masked intrinsics at
 * all: _mm512_maskz_loadu_ps / _mm512_mask_storeu_ps with every lane past the end of a
 * malloc'd block pass silently (clang's ASan does check them, lane by lane). So under
 * DTRAIN_SANITIZE every masked access goes through dt_lanes_check, which reads each enabled
 * lane with a plain scalar load: ASan checks those like any other access and reports an
 * enabled lane outside its block with the kernel's stack. Disabled lanes are not touched,
 * as the hardware does not touch them. */
#ifdef DT_SANITIZE
static inline void dt_lanes_check(const void *p, __mmask16 m) {
    const volatile int *q = (const volatile int *)p;
    for (int l = 0; l < 16; l++)
        if (m >> l & 1) (void)q[l];
}
/* 8 lanes, from _mm256_movemask_ps of an AVX2 mask */
static inline void dt_lanes_check8(const void *p, int m) {
    const volatile int *q = (const volatile int *)p;
    for (int l = 0; l < 8; l++)
        if (m >> l & 1) (void)q[l];
}
#else
#define dt_lanes_check(p, m) ((void)0)
#define dt_lanes_check8(p, m) ((void)0)
#endif

/* The masked accesses the kernels use, checked under DTRAIN_SANITIZE. */
DT_AVX512 static inline __m512 dt_maskz_loadu_ps(__mmask16 m, const float *p) {
    dt_lanes_check(p, m);
    return _mm512_maskz_loadu_ps(m, p);
}
DT_AVX512 static inline void dt_mask_storeu_ps(float *p, __mmask16 m, __m512 v) {
    dt_lanes_check(p, m);
    _mm512_mask_storeu_ps(p, m, v);
}
DT_AVX512 static inline void dt_mask_storeu_epi32(void *p, __mmask16 m, __m512i v) {
    dt_lanes_check(p, m);
    _mm512_mask_storeu_epi32(p, m, v);
}

/* Lanes l of a 16-lane vector starting at index base with lo <= base + l < hi. */
static inline __mmask16 dt_mask_range(int lo, int hi, int base) {
    int a = lo - base, b = hi - base;
    if (a < 0) a = 0;
    if (b > 16) b = 16;
    if (b <= a) return 0;
    return (__mmask16)(((1u << (b - a)) - 1u) << a);
}
#endif

#ifdef DT_KERNELS_AVX512
DT_AVX512 static inline void dt_copy_run_avx512(float *restrict d, const float *restrict s, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_loadu_ps(s + i));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        dt_mask_storeu_ps(d + i, m, dt_maskz_loadu_ps(m, s + i));
    }
}
#endif

/* d[0..n) = s[0..n) */
static inline void dt_copy_run(float *restrict d, const float *restrict s, int n) {
#ifdef DT_KERNELS_AVX512
    if (dt_cpu_avx512()) { dt_copy_run_avx512(d, s, n); return; }
#endif
    for (int i = 0; i < n; i++) d[i] = s[i];
}

/* Sum of a run in 16 independent lanes (fixed order: deterministic, and it vectorises). */
static inline float dt_sum_run(const float *x, int n) {
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] += x[i + l];
    float s = 0;
    for (; i < n; i++) s += x[i];
    for (int l = 0; l < 16; l++) s += acc[l];
    return s;
}

#endif
