// CudaBackend::copy_gbps_measure: device-to-device copies of a large buffer, timed by events on the
// compute stream. The bound that reads of device memory are judged by (`coli bench --model`, `coli
// test-ops --bench`).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/error.h"
#include "core/median.h"
#include "core/timer.h"

namespace coli {

using cuda::cuda_check;

namespace {
constexpr uint64_t kCopyMaxBytes = 1ull << 30;   // bytes per copy at most
constexpr uint64_t kCopyMinBytes = 64ull << 20;  // fewer: the copy measures its launch, not the memory
constexpr uint64_t kFreeShare = 4;       // each of the two buffers takes at most this share of free memory
constexpr double kWarmupSeconds = 0.05;  // copies before timing, so that the clocks are up
constexpr int kRuns = 9;                 // timed copies; the median is reported
constexpr double kGiga = 1e9;
}  // namespace

double CudaBackend::copy_gbps_measure() {
    size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    const uint64_t bytes = std::min<uint64_t>(kCopyMaxBytes, free_bytes / kFreeShare);
    if (bytes < kCopyMinBytes) return 0;
    cudaStream_t s = ctx_->compute;
    const cuda::Scratch<uint8_t> src(ctx_, bytes), dst(ctx_, bytes);
    cuda_check(cudaMemsetAsync(src.get(), 1, bytes, s), "copy rate: fill");
    const auto copy = [&] {
        cuda_check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s), "copy rate");
    };
    for (const Timer warm; warm.seconds() < kWarmupSeconds;) {
        copy();
        cuda_check(cudaStreamSynchronize(s), "copy rate: warm-up");
    }
    cudaEvent_t a, b;
    cuda_check(cudaEventCreate(&a), "cudaEventCreate");
    cuda_check(cudaEventCreate(&b), "cudaEventCreate");
    std::vector<float> ms(kRuns);
    for (float& run : ms) {
        cudaEventRecord(a, s);
        copy();
        cudaEventRecord(b, s);
        cuda_check(cudaEventSynchronize(b), "copy rate: timing");
        cudaEventElapsedTime(&run, a, b);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 2.0 * static_cast<double>(bytes) / (median(ms) * 1e-3) / kGiga;
}

}  // namespace coli
