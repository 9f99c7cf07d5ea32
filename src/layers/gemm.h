/* The one single-precision GEMM entry point of the layers: row-major
 * C = alpha * op(A) op(B) + beta * C, op(A) [m x k], op(B) [k x n], trans_* nonzero for transposed.
 * A thin wrapper over cblas_sgemm that keeps the training step free of allocations (gemm.c). */
#ifndef DT_GEMM_H
#define DT_GEMM_H

void dt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

#endif
