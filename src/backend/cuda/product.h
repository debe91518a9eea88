// f32 products on cuBLAS (no TF32: the handle's default math) for the attention kernels that run as
// products over many queries (mla_attend.cpp, gqa_attend.cpp).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

namespace coli::cuda {

// Column-major C = alpha op(A) B + beta C, batch times at the given strides (all in floats).
struct Product {
    bool transpose_a = false;     // op(A) = A^T with A stored [k, m], else A stored [m, k]
    int64_t m = 0, n = 0, k = 0;  // C is [m, n]; the products' inner size is k
    const float* a = nullptr;     // A, leading dimension lda, next batch stride_a further
    int64_t lda = 0, stride_a = 0;
    const float* b = nullptr;  // B [k, n], leading dimension ldb, next batch stride_b further
    int64_t ldb = 0, stride_b = 0;
    float* c = nullptr;  // C, leading dimension ldc, next batch stride_c further
    int64_t ldc = 0, stride_c = 0;
    int64_t batch = 1;  // products
};

// Queues p on h's stream; throws with cuBLAS's reason when it is refused.
void product_run(cublasHandle_t h, const Product& p, float alpha, float beta);

}  // namespace coli::cuda
