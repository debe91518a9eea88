// cuBLAS, loaded with dlopen when the CUDA backend starts. Linking it would cost every coli process about
// 200 MB of resident memory (the library's relocations), CPU-only runs included.
#pragma once

#include <cublas_v2.h>

namespace coli::cuda {

// cublasGemmEx as exported (C++ also sees an inline overload taking cudaDataType as the compute type).
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                    int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                    cublasGemmAlgo_t);

// The cuBLAS entry points the backend uses.
struct BlasApi {
    decltype(&cublasCreate_v2) create;                           // cublasCreate
    decltype(&cublasDestroy_v2) destroy;                         // cublasDestroy
    decltype(&cublasSetStream_v2) set_stream;                    // cublasSetStream
    decltype(&cublasSetMathMode) set_math_mode;                  // cublasSetMathMode
    decltype(&cublasSgemm_v2) sgemm;                             // cublasSgemm
    decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;  // cublasSgemmStridedBatched
    GemmExFn gemm_ex;                                            // cublasGemmEx
    decltype(&cublasGetStatusString) status_text;                // cublasGetStatusString
};

// Loads libcublas on first use; throws coli::Error naming the library and dlerror() when it is missing.
const BlasApi& blas_api();

}  // namespace coli::cuda
