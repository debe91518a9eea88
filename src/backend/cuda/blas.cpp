#include "backend/cuda/blas.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace coli::cuda {

namespace {

template <typename F>
void resolve(void* lib, const char* name, F& fn) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    check(fn != nullptr, "cuda: {} is missing from libcublas: {}", name, dlerror());
}

BlasApi load() {
    // The soname of the cuBLAS this was compiled against (libcublas.so.13 for CUDA 13), then any.
    const std::string versioned = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(versioned.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    check(lib != nullptr,
          "cuda: cannot load {} ({}): install the CUDA toolkit's cuBLAS or add its folder to LD_LIBRARY_PATH",
          versioned, dlerror());
    BlasApi api{};
    resolve(lib, "cublasCreate_v2", api.create);
    resolve(lib, "cublasDestroy_v2", api.destroy);
    resolve(lib, "cublasSetStream_v2", api.set_stream);
    resolve(lib, "cublasSetMathMode", api.set_math_mode);
    resolve(lib, "cublasSgemm_v2", api.sgemm);
    resolve(lib, "cublasSgemmStridedBatched", api.sgemm_strided_batched);
    resolve(lib, "cublasGemmEx", api.gemm_ex);
    resolve(lib, "cublasGetStatusString", api.status_text);
    return api;  // the library stays loaded for the life of the process
}

}  // namespace

const BlasApi& blas_api() {
    static const BlasApi api = load();
    return api;
}

}  // namespace coli::cuda
