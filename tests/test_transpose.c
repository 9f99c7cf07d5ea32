/* dt_transpose (layers/transpose.h), the reorders around oneDNN's convolutions: against the
 * definition, element by element, for bf16 and fp32, written and added to, on shapes with
 * every kind of edge (rows and columns not multiples of 16, a single row, pitches wider than
 * the matrix), with the AVX-512 tiles and without; the two give the same bits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/bf16.h"
#include "layers/kernels.h"
#include "layers/transpose.h"

static uint32_t next(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (uint32_t)(*s >> 32);
}

/* A value of the given size from random bits: bf16 ones of every class (NaN included), fp32
 * ones finite (fp32 adds compare as floats: NaN != NaN) */
static void fill(void *v, size_t n, int size, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = next(&seed);
        if (size == 2) ((uint16_t *)v)[i] = (uint16_t)u;
        else ((float *)v)[i] = (float)(int32_t)u / 65536.0f;
    }
}

/* The same values: the same bits, but for NaNs, which are all alike (which operand's payload
 * a sum of two NaNs keeps depends on the order the compiler gave the addition) */
static int same(const void *a, const void *b, size_t n, int size) {
    if (size == 4) return memcmp(a, b, n * size) == 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
        const int nx = (x & 0x7fff) > 0x7f80, ny = (y & 0x7fff) > 0x7f80;
        if (nx != ny || (!nx && x != y)) return 0;
    }
    return 1;
}

static void check_shape(size_t rows, size_t cols, size_t sp, size_t dp, int size, int add, const char *tier) {
    const size_t sn = rows * sp, dn = cols * dp;
    char *src = malloc(sn * size), *dst = malloc(dn * size), *want = malloc(dn * size);
    fill(src, sn, size, rows * 1000 + cols);
    fill(dst, dn, size, 77 + rows);
    memcpy(want, dst, dn * size);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) {
            const size_t s = r * sp + j, d = j * dp + r;
            if (size == 4) {
                float *w = (float *)want + d;
                *w = add ? *w + ((float *)src)[s] : ((float *)src)[s];
            } else {
                uint16_t *w = (uint16_t *)want + d, v = ((uint16_t *)src)[s];
                *w = add ? dt_f32_to_bf16(dt_bf16_to_f32(*w) + dt_bf16_to_f32(v)) : v;
            }
        }
    dt_transpose(dst, dp, src, sp, rows, cols, size, add);
    CHECK_MSG(same(dst, want, dn, size), "%s: %zu x %zu (pitches %zu, %zu), %s, %s: differs from the definition",
              tier, rows, cols, sp, dp, size == 2 ? "bf16" : "fp32", add ? "added" : "written");
    free(src); free(dst); free(want);
}

int main(void) {
    static const size_t shapes[][2] = {{16, 16}, {64, 1024}, {1024, 64}, {3, 1024}, {1024, 3}, {17, 33}, {1, 1},
                                       {1, 40}, {40, 1}, {48, 256}, {512, 16}, {31, 17}};
#ifdef DT_KERNELS_AVX512
    const int had = dt_cpu_avx512();
    for (int tier = 0; tier < 2; tier++) {
        atomic_store(&dt_avx512_state, tier == 0 ? had : 0);
        const char *name = dt_cpu_avx512() ? "avx512" : "portable";
#else
    {
        const char *name = "portable";
#endif
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int size = 2; size <= 4; size += 2)
                for (int add = 0; add < 2; add++) {
                    const size_t rows = shapes[k][0], cols = shapes[k][1];
                    check_shape(rows, cols, cols, rows, size, add, name);
                    check_shape(rows, cols, cols + 5, rows + 16, size, add, name); /* wider pitches */
                }
    }
#ifdef DT_KERNELS_AVX512
    atomic_store(&dt_avx512_state, -1);
    if (!had) printf("test_transpose: this CPU (or DTRAIN_NO_AVX512) has no AVX-512: the portable loop only\n");
#endif
    return test_summary("test_transpose");
}
