#include "backend/cuda/product.h"

#include "backend/cuda/blas.h"
#include "core/error.h"

namespace coli::cuda {

void product_run(cublasHandle_t h, const Product& p, float alpha, float beta) {
    const cublasStatus_t st = blas_api().sgemm_strided_batched(
        h, p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p.m),
        static_cast<int>(p.n), static_cast<int>(p.k), &alpha, p.a, static_cast<int>(p.lda), p.stride_a, p.b,
        static_cast<int>(p.ldb), p.stride_b, &beta, p.c, static_cast<int>(p.ldc), p.stride_c,
        static_cast<int>(p.batch));
    check(st == CUBLAS_STATUS_SUCCESS, "cuda: cublasSgemmStridedBatched failed ({})",
          blas_api().status_text(st));
}

}  // namespace coli::cuda
