/* Row-major sgemm through cblas_sgemm, with one shape split so that OpenBLAS does not allocate.
 *
 * OpenBLAS (0.3.21 as Debian ships it) sends small products (M*N*K <= 1e6,
 * kernel/x86_64/sgemm_small_kernel_permit_skylakex.c) on AVX-512 cores (SkylakeX, Cooperlake)
 * to kernel/x86_64/sgemm_small_kernel_nn_skylakex.c. For a column-major NoTrans/NoTrans call
 * with M mod 16 in 1..8 and K >= 32, that kernel (both the beta == 0 variant and the general
 * one) mallocs an M mod 16 by K row-major copy of A's leftover rows on every call: an
 * allocation inside the training step. Swept over M, N, K in 1..70, that is the only shape that
 * allocates (NT, TN, TT never do). A row-major call (ta, tb, m, n, k) is the column-major call
 * (tb, ta, M = n, N = m, K = k), so here the condition reads: both NoTrans, n mod 16 in 1..8,
 * k >= 32, m*n*k <= 1e6. Such a call is made as a sum over K in chunks of at most 31 (the first
 * with the caller's beta, the rest with beta = 1), which the kernel serves without a copy.
 * Done whatever kernel family is in use: the products are small and the split costs little. */
#include "layers/gemm.h"

#include <cblas.h>

#define DT_GEMM_KCHUNK 31

static int allocating_shape(int trans_a, int trans_b, int m, int n, int k) {
    const int r = n % 16;
    return !trans_a && !trans_b && r >= 1 && r <= 8 && k > DT_GEMM_KCHUNK &&
           (double)m * n * k <= 1e6;
}

void dt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    const enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    if (!allocating_shape(trans_a, trans_b, m, n, k)) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* NoTrans/NoTrans: columns k0.. of A [m x k], rows k0.. of B [k x n] */
    for (int k0 = 0; k0 < k; k0 += DT_GEMM_KCHUNK) {
        const int kc = k - k0 < DT_GEMM_KCHUNK ? k - k0 : DT_GEMM_KCHUNK;
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, kc, alpha, A + k0, lda, B + (size_t)k0 * ldb, ldb,
                    k0 ? 1.0f : beta, C, ldc);
    }
}
