// The device state every part of the CUDA backend shares: the device, its streams, the cuBLAS handle and
// stream-ordered buffers. Held by shared_ptr so that tensors outliving the backend still free correctly.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace coli::cuda {

struct Context {
    int device = 0;                  // CUDA device ordinal
    cudaStream_t compute = nullptr;  // every kernel and tensor copy, in program order
    cudaStream_t upload = nullptr;   // expert uploads into the VRAM tier, overlapping compute
    cublasHandle_t blas = nullptr;   // on the compute stream
    cudaDeviceProp props{};          // name, SM count, shared memory and L2 limits
    void* readback = nullptr;        // pinned host memory for small reads (device_read), kCudaReadbackBytes
    std::mutex readback_mutex;       // one read through it at a time

    explicit Context(int device);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
};

// host dst = device src (bytes), after every command queued before it on the compute stream (waits).
// Reads of up to kCudaReadbackBytes (routing, logits) go through pinned memory: one DMA, where a read into
// pageable memory is staged by the driver.
void device_read(Context& ctx, const void* src, void* dst, size_t bytes);

// Device memory freed in stream order on the compute stream when the last reference goes: allocation and
// release are queued with the kernels that use it (cudaMallocAsync / cudaFreeAsync on the device pool).
std::shared_ptr<void> buffer_new(const std::shared_ptr<Context>& ctx, size_t bytes, cudaStream_t stream);

// A typed scratch buffer for the duration of one op.
template <typename T>
class Scratch {
public:
    Scratch(const std::shared_ptr<Context>& ctx, size_t count)
        : mem_(buffer_new(ctx, count * sizeof(T), ctx->compute)) {}
    T* get() const { return static_cast<T*>(mem_.get()); }

private:
    std::shared_ptr<void> mem_;
};

// "NVIDIA H200, 132 SMs, 143.8 GB, sm_90, CUDA 13.0"
std::string device_summary(const cudaDeviceProp& p, int runtime_version);

}  // namespace coli::cuda
