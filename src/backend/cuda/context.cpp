#include "backend/cuda/context.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/blas.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"
#include "core/error.h"

namespace coli::cuda {

namespace {
constexpr int kCudaMajorDiv = 1000;  // cudaRuntimeGetVersion: 1000 * major + 10 * minor
constexpr int kCudaMinorDiv = 10;
constexpr double kBytesPerGB = 1e9;
}  // namespace

void cuda_check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return;
    const std::string message =
        fmt::format("cuda: {} failed: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err));
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // not sticky: cleared, so that the next launch's check does not see it
        throw OutOfMemory(message);
    }
    throw Error(message);
}

Context::Context(int dev) : device(dev) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    cuda_check(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
    cuda_check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "compute stream");
    cuda_check(cudaStreamCreateWithFlags(&upload, cudaStreamNonBlocking), "upload stream");
    // Keep freed memory in the pool (no release to the driver at each sync): ops allocate scratch constantly.
    cudaMemPool_t pool = nullptr;
    cuda_check(cudaDeviceGetDefaultMemPool(&pool, device), "default memory pool");
    uint64_t keep = UINT64_MAX;
    cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
               "pool release threshold");
    const BlasApi& api = blas_api();
    const cublasStatus_t st = api.create(&blas);
    check(st == CUBLAS_STATUS_SUCCESS, "cuda: cublasCreate failed ({})", api.status_text(st));
    api.set_stream(blas, compute);
    // Plain f32 arithmetic for f32 GEMMs (no TF32): placement must not change results beyond the op
    // tolerances.
    api.set_math_mode(blas, CUBLAS_DEFAULT_MATH);
    cuda_check(cudaMallocHost(&readback, kCudaReadbackBytes), "pinned readback memory");
}

Context::~Context() {
    cudaStreamSynchronize(compute);
    cudaStreamSynchronize(upload);
    if (blas) blas_api().destroy(blas);
    cudaStreamDestroy(compute);
    cudaStreamDestroy(upload);
    cudaFreeHost(readback);
}

void device_read(Context& ctx, const void* src, void* dst, size_t bytes) {
    if (bytes > kCudaReadbackBytes) {
        cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.compute), "device read");
        cuda_check(cudaStreamSynchronize(ctx.compute), "device read (or an earlier kernel)");
        return;
    }
    const std::lock_guard<std::mutex> lock(ctx.readback_mutex);
    if (bytes > 0)
        cuda_check(cudaMemcpyAsync(ctx.readback, src, bytes, cudaMemcpyDeviceToHost, ctx.compute),
                   "device read");
    cuda_check(cudaStreamSynchronize(ctx.compute), "device read (or an earlier kernel)");
    std::memcpy(dst, ctx.readback, bytes);
}

std::shared_ptr<void> buffer_new(const std::shared_ptr<Context>& ctx, size_t bytes, cudaStream_t stream) {
    void* p = nullptr;
    if (bytes > 0) cuda_check(cudaMallocAsync(&p, bytes, stream), "cudaMallocAsync");
    return std::shared_ptr<void>(p, [ctx](void* q) {
        if (q) cudaFreeAsync(q, ctx->compute);
    });
}

std::string device_summary(const cudaDeviceProp& p, int runtime_version) {
    return fmt::format("{}, {} SMs, {:.1f} GB, sm_{}{}, CUDA {}.{}", p.name, p.multiProcessorCount,
                       static_cast<double>(p.totalGlobalMem) / kBytesPerGB, p.major, p.minor,
                       runtime_version / kCudaMajorDiv, (runtime_version % kCudaMajorDiv) / kCudaMinorDiv);
}

}  // namespace coli::cuda
