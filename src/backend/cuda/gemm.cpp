// matmul on device memory: decode GEMV for few tokens, cuBLAS for many.
//   f32           cublasSgemm in plain f32 (no TF32).
//   bf16          tensor cores: x is split into bf16 hi + lo parts (x = hi + lo to ~2^-17) and the two bf16
//                 GEMMs accumulate in f32, so the product keeps near-f32 accuracy on exact bf16 weights.
//   other formats rows are dequantized to f32 in chunks, then cublasSgemm (from kCudaDequantMinTokens).
#include <algorithm>

#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/support.h"
#include "core/error.h"

namespace coli {

using cuda::cuda_check;

namespace {

constexpr size_t kDequantChunkBytes = 256ull << 20;  // f32 scratch for one chunk of dequantized rows

void blas_check(cublasStatus_t st, const char* what) {
    check(st == CUBLAS_STATUS_SUCCESS, "cuda: {} failed: {}", what, cuda::blas_api().status_text(st));
}

// y[n, rows] (+)= x[n, cols] w^T with w f32 [rows, cols] row-major (column-major: w^T is [cols, rows]).
void sgemm(cublasHandle_t h, const float* w, int64_t rows, int64_t cols, const float* x, int64_t n, float* y,
           int64_t ldy) {
    const float one = 1.0f, zero = 0.0f;
    blas_check(
        cuda::blas_api().sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                               static_cast<int>(cols), &one, w, static_cast<int>(cols), x,
                               static_cast<int>(cols), &zero, y, static_cast<int>(ldy)),
        "cublasSgemm");
}

int64_t gemm_min_tokens(Format f) {
    return (f == Format::f32 || f == Format::bf16 || f == Format::f16) ? kCudaBlasMinTokens
                                                                       : kCudaDequantMinTokens;
}

}  // namespace

void CudaBackend::matmul_device(const cuda::DeviceWeight& w, const float* x, int64_t n, float* y) {
    if (n == 0 || w.rows == 0) return;
    cudaStream_t s = ctx_->compute;
    if (n < gemm_min_tokens(w.format) || w.cols == 0) return cuda::gemv(w, x, n, y, s);
    cublasHandle_t h = ctx_->blas;
    if (w.format == Format::f32)
        return sgemm(h, static_cast<const float*>(w.data), w.rows, w.cols, x, n, y, w.rows);
    if (w.format == Format::bf16) {
        cuda::Scratch<uint16_t> hi(ctx_, n * w.cols), lo(ctx_, n * w.cols);
        cuda::split_bf16(x, n * w.cols, hi.get(), lo.get(), s);
        const float one = 1.0f, zero = 0.0f;
        const auto m = static_cast<int>(w.rows), nn = static_cast<int>(n), k = static_cast<int>(w.cols);
        blas_check(cuda::blas_api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &one, w.data, CUDA_R_16BF,
                                            k, hi.get(), CUDA_R_16BF, k, &zero, y, CUDA_R_32F, m,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (bf16 hi)");
        blas_check(cuda::blas_api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &one, w.data, CUDA_R_16BF,
                                            k, lo.get(), CUDA_R_16BF, k, &one, y, CUDA_R_32F, m,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (bf16 lo)");
        return;
    }
    const int64_t chunk_rows =
        std::max<int64_t>(1, std::min<int64_t>(w.rows, kDequantChunkBytes / (sizeof(float) * w.cols)));
    cuda::Scratch<float> deq(ctx_, chunk_rows * w.cols);
    for (int64_t r0 = 0; r0 < w.rows; r0 += chunk_rows) {
        const int64_t r1 = std::min(w.rows, r0 + chunk_rows);
        cuda::dequant_f32(w, r0, r1, deq.get(), s);
        sgemm(h, deq.get(), r1 - r0, w.cols, x, n, y + r0, w.rows);
    }
}

}  // namespace coli
