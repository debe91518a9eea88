// matmul on device memory: decode GEMV for few tokens, tensor-core GEMMs (cuBLAS) for many.
//   f32           cublasSgemm in plain f32 (no TF32).
//   bf16          x is split into bf16 hi + lo parts (x = hi + lo to ~2^-17) and two bf16 GEMMs on the
//                 weights as stored accumulate in f32: near-f32 accuracy at tensor-core speed.
//   other formats rows are decoded into bf16 hi + lo parts in chunks, and y = Whi xhi + Whi xlo + Wlo xhi
//                 (Wlo xlo is below f32 rounding); mxfp4 values are exact in bf16, so Wlo is zero and
//                 skipped. Used from kCudaDequantMinTokens, where the decoded copy pays for itself.
// A grouped (block-diagonal) matmul runs the same per group, on a view of the group's rows of the weight
// (fp8 rows that split a 128-row scale block: decoded to f32 first), with the group's columns of x gathered
// and its columns of y scattered by strided copies (none for one token: both are contiguous then).
#include <algorithm>
#include <optional>
#include <vector>

#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/support.h"
#include "core/error.h"

namespace coli {

using cuda::cuda_check;

namespace {

constexpr size_t kDequantChunkBytes = 256ull << 20;  // bf16 hi + lo scratch for one chunk of decoded rows

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

// y[n, rows] = x w^T (accumulate: y +=) with bf16 w [rows, cols] and bf16 x [n, cols], f32 y (ld ldy).
void gemm_bf16(cublasHandle_t h, const void* w, int64_t rows, int64_t cols, const uint16_t* x, int64_t n,
               float* y, int64_t ldy, bool accumulate) {
    const float one = 1.0f, zero = 0.0f;
    const auto m = static_cast<int>(rows), nn = static_cast<int>(n), k = static_cast<int>(cols);
    blas_check(cuda::blas_api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &one, w, CUDA_R_16BF, k, x,
                                        CUDA_R_16BF, k, accumulate ? &one : &zero, y, CUDA_R_32F,
                                        static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (bf16)");
}

int64_t gemm_min_tokens(Format f) {
    return (f == Format::f32 || f == Format::bf16) ? kCudaBlasMinTokens : kCudaDequantMinTokens;
}

// Rows [r0, r0 + count) of w as a weight of their own: the device copy keeps format.h's layout, so the
// host's view arithmetic (pointers only, nothing read) applies. None for fp8 rows that split a scale block.
std::optional<cuda::DeviceWeight> rows_view(const cuda::DeviceWeight& w, int64_t r0, int64_t count) {
    const std::optional<WeightView> v =
        weight_rows_view(WeightView{w.format, w.rows, w.cols, w.data, w.scales}, r0, count);
    if (!v) return std::nullopt;
    return cuda::DeviceWeight{v->format, v->rows, v->cols, v->data, v->scales};
}

}  // namespace

void CudaBackend::matmul_grouped(const cuda::DeviceWeight& w, int64_t groups, const float* x, int64_t n,
                                 float* y) {
    if (n == 0 || w.rows == 0) return;
    cudaStream_t s = ctx_->compute;
    const int64_t r = w.rows / groups, cols = w.cols;
    // One token: the group's x columns and y columns are contiguous, read and written in place.
    const bool direct = n == 1;
    cuda::Scratch<float> xs(ctx_, direct ? 0 : n * cols), ys(ctx_, direct ? 0 : n * r);  // [n, cols], [n, r]
    std::optional<cuda::Scratch<float>> decoded;                                         // [r, cols]
    std::optional<cuda::Scratch<int32_t>> ids;                                           // [r]
    for (int64_t g = 0; g < groups; ++g) {
        std::optional<cuda::DeviceWeight> view = rows_view(w, g * r, r);
        if (!view) {  // decoded to f32 by the embedding kernel (rows g r .. of the weight as its "tokens")
            if (!decoded) decoded.emplace(ctx_, r * cols);
            if (!ids) ids.emplace(ctx_, r);
            std::vector<int32_t> rows(r);
            for (int64_t j = 0; j < r; ++j) rows[j] = static_cast<int32_t>(g * r + j);
            // Pageable source: the call returns once the ids are staged, so `rows` may go away after it.
            cuda_check(cudaMemcpyAsync(ids->get(), rows.data(), rows.size() * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, s),
                       "grouped matmul row ids");
            cuda::embedding(w, ids->get(), r, decoded->get(), s);
            view = cuda::DeviceWeight{Format::f32, r, cols, decoded->get(), nullptr};
        }
        if (direct) {
            matmul_device(*view, x + g * cols, 1, y + g * r);
            continue;
        }
        cuda_check(
            cudaMemcpy2DAsync(xs.get(), cols * sizeof(float), x + g * cols, groups * cols * sizeof(float),
                              cols * sizeof(float), n, cudaMemcpyDeviceToDevice, s),
            "grouped matmul x gather");
        matmul_device(*view, xs.get(), n, ys.get());
        cuda_check(cudaMemcpy2DAsync(y + g * r, w.rows * sizeof(float), ys.get(), r * sizeof(float),
                                     r * sizeof(float), n, cudaMemcpyDeviceToDevice, s),
                   "grouped matmul y scatter");
    }
}

void CudaBackend::matmul_device(const cuda::DeviceWeight& w, const float* x, int64_t n, float* y) {
    if (n == 0 || w.rows == 0) return;
    cudaStream_t s = ctx_->compute;
    if (n < gemm_min_tokens(w.format) || w.cols == 0) return cuda::gemv(w, x, n, y, s);
    cublasHandle_t h = ctx_->blas;
    if (w.format == Format::f32)
        return sgemm(h, static_cast<const float*>(w.data), w.rows, w.cols, x, n, y, w.rows);

    cuda::Scratch<uint16_t> xhi(ctx_, n * w.cols), xlo(ctx_, n * w.cols);
    cuda::split_bf16(x, n * w.cols, xhi.get(), xlo.get(), s);
    if (w.format == Format::bf16) {
        gemm_bf16(h, w.data, w.rows, w.cols, xhi.get(), n, y, w.rows, false);
        gemm_bf16(h, w.data, w.rows, w.cols, xlo.get(), n, y, w.rows, true);
        return;
    }
    const bool exact = w.format == Format::mxfp4;  // e2m1 times a power of two: a bf16 value
    const int64_t chunk_rows =
        std::max<int64_t>(1, std::min<int64_t>(w.rows, kDequantChunkBytes / (2 * sizeof(uint16_t) * w.cols)));
    cuda::Scratch<uint16_t> whi(ctx_, chunk_rows * w.cols), wlo(ctx_, exact ? 0 : chunk_rows * w.cols);
    for (int64_t r0 = 0; r0 < w.rows; r0 += chunk_rows) {
        const int64_t r1 = std::min(w.rows, r0 + chunk_rows);
        cuda::dequant_bf16(w, r0, r1, whi.get(), exact ? nullptr : wlo.get(), s);
        gemm_bf16(h, whi.get(), r1 - r0, w.cols, xhi.get(), n, y + r0, w.rows, false);
        gemm_bf16(h, whi.get(), r1 - r0, w.cols, xlo.get(), n, y + r0, w.rows, true);
        if (!exact) gemm_bf16(h, wlo.get(), r1 - r0, w.cols, xhi.get(), n, y + r0, w.rows, true);
    }
}

}  // namespace coli
