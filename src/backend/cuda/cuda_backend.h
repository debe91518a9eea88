// The CUDA backend, as the rest of the program sees it: a factory. No CUDA types here; the class is in
// cuda_backend_impl.h. Compiled only with -DCOLI_CUDA=ON.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace coli {

// Opens CUDA device 0. vram_bytes: budget for resident dense weights and the expert tier (0 = the free
// memory less kCudaVramReserve). Throws coli::Error with CUDA's reason when no device is usable.
std::unique_ptr<Backend> cuda_backend_create(uint64_t vram_bytes);

// `coli test-ops --bench`: decode GEMV GB/s per format beside the device-to-device copy, and prefill
// GEMM TFLOP/s beside cuBLAS bf16, printed to stdout as a table.
void cuda_bench_print();

}  // namespace coli
