/* dt_sgemm (src/layers/gemm.c), the layers' one GEMM entry point: over a sweep of shapes, all
 * four transpose combinations, beta 0 and 1 and padded leading dimensions, (a) no call
 * allocates -- OpenBLAS's AVX-512 small-matrix kernel mallocs for one NoTrans/NoTrans shape
 * family unless dt_sgemm splits K (run with OPENBLAS_CORETYPE=SkylakeX to exercise it) -- and
 * (b) the result matches a triple loop in double. Allocations are counted as in test_noalloc
 * (alloc_count.h; not under the sanitizers). */
#define _GNU_SOURCE /* alloc_count.h: dl_iterate_phdr */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "check.h"
#include "dtrain.h"
#include "layers/gemm.h"

#define MAXD 512 /* largest m, n or k below */
#define PAD 3    /* leading dimensions are padded by this much */
#define LD (MAXD + PAD)

static float A[(size_t)MAXD * LD], B[(size_t)MAXD * LD], C[(size_t)MAXD * LD], C0[(size_t)MAXD * LD];

static int reported;           /* failures printed (the rest only counted) */
static int allocating, wrong;  /* calls that allocated, calls with a wrong result */

/* one call: allocation count and comparison with the double reference */
static void one(int ta, int tb, int m, int n, int k, float beta) {
    const float alpha = 0.75f;
    const int lda = (ta ? m : k) + PAD, ldb = (tb ? k : n) + PAD, ldc = n + PAD;
    for (size_t i = 0; i < (size_t)m * ldc; i++) C[i] = beta == 0.0f ? NAN : C0[i];
    const long before = allocations;
    dt_sgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    const long got = allocations - before;
    if (got) allocating++;
    if (got && reported++ < 10)
        fprintf(stderr, "  dt_sgemm(%c%c, m=%d, n=%d, k=%d, beta=%g): %ld allocations\n",
                ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, beta, got);
    int bad = 0;
    for (int i = 0; i < m && !bad; i++)
        for (int j = 0; j < n && !bad; j++) {
            double s = 0, scale = 0;
            for (int p = 0; p < k; p++) {
                double a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                double b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                s += a * b;
                scale += fabs(a * b);
            }
            double want = alpha * s, c0 = C0[(size_t)i * ldc + j];
            scale = alpha * scale;
            if (beta != 0.0f) { want += beta * c0; scale += fabs(beta * c0); }
            double c = C[(size_t)i * ldc + j];
            if (!(fabs(c - want) <= 1e-5 * scale + 1e-30)) {
                bad = 1;
                if (reported++ < 10)
                    fprintf(stderr, "  dt_sgemm(%c%c, m=%d, n=%d, k=%d, beta=%g): C[%d][%d] = %g, want %g\n",
                            ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, beta, i, j, c, want);
            }
        }
    wrong += bad;
}

int main(void) {
    dt_runtime_init();
    check_alloc_counter();
    unsigned s = 12345;
    for (size_t i = 0; i < (size_t)MAXD * LD; i++) {
        s = s * 1664525u + 1013904223u; A[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        s = s * 1664525u + 1013904223u; B[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        s = s * 1664525u + 1013904223u; C0[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    /* BLAS's own start-up (thread pool, buffers) is not the step's: one call first */
    dt_sgemm(0, 0, 64, 64, 64, 1.0f, A, LD, B, LD, 0.0f, C, LD);
    /* what the library does without dt_sgemm's split, for the record (the cnn2 shape below) */
    long before = allocations;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 500, 100, 1.0f, A, LD, B, LD, 0.0f,
                C, LD);
    printf("cblas_sgemm NN m=16 n=500 k=100 directly: %ld allocations%s\n", allocations - before,
           COUNTING ? "" : " (not counted under the sanitizers)");

    /* every n mod 16; k on both sides of 32 and of the chunk boundaries; a few m */
    static const int ms[] = {1, 2, 7, 16, 17, 33, 70};
    static const int ks[] = {1, 5, 16, 31, 32, 33, 47, 62, 63, 64, 70};
    int calls = 0;
    before = allocations;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int bi = 0; bi < 2; bi++)
                for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
                    for (int n = 1; n <= 70; n++)
                        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++, calls++)
                            one(ta, tb, ms[mi], n, ks[ki], (float)bi);
    /* shapes of the zoo's linear layers (cnn2: 500 -> 100 at batch 16) and one over the
     * small-kernel limit */
    static const int big[][3] = {{16, 500, 100}, {16, 100, 500}, {32, 120, 400}, {8, 500, 250},
                                 {64, 264, 100}};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++, calls++)
                    one(ta, tb, big[i][0], big[i][1], big[i][2], (float)bi);
    printf("dt_sgemm: %d calls, %ld allocations%s, %d wrong results\n", calls,
           allocations - before, COUNTING ? "" : " (not counted under the sanitizers)", wrong);
    CHECK_MSG(allocating == 0, "%d of %d dt_sgemm calls allocated (expected 0)", allocating, calls);
    CHECK_MSG(wrong == 0, "%d of %d dt_sgemm calls differ from the reference", wrong, calls);
    return test_summary("test_gemm");
}
