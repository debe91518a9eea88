// The conversions of the GEMM path: weights decoded and split into bf16 hi + lo parts, activations split
// the same way, so that tensor-core bf16 GEMMs give a near-f32 product (gemm.cpp).
#include <cuda_bf16.h>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;                     // threads per block
constexpr int64_t kMaxGridBlocks = 65535LL * 32;  // grid-stride kernels cap their grid here

// hi = bf16(v), lo = bf16(v - hi) (lo skipped when null).
__device__ __forceinline__ void bf16_split_store(float v, int64_t i, __nv_bfloat16* hi, __nv_bfloat16* lo) {
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    hi[i] = h;
    if (lo) lo[i] = __float2bfloat16_rn(v - __bfloat162float(h));
}

__global__ void dequant_bf16_kernel(DeviceWeight w, int64_t r0, int64_t count, __nv_bfloat16* __restrict__ hi,
                                    __nv_bfloat16* __restrict__ lo) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        bf16_split_store(decode_at(w, r0 + i / w.cols, i % w.cols), i, hi, lo);
}

__global__ void split_bf16_kernel(const float* __restrict__ x, int64_t count, __nv_bfloat16* __restrict__ hi,
                                  __nv_bfloat16* __restrict__ lo) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        bf16_split_store(x[i], i, hi, lo);
}

unsigned grid_for(int64_t count) {
    const int64_t blocks = (count + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks));
}

__nv_bfloat16* as_bf16(uint16_t* p) {
    return reinterpret_cast<__nv_bfloat16*>(p);
}

}  // namespace

void dequant_bf16(const DeviceWeight& w, int64_t r0, int64_t r1, uint16_t* hi, uint16_t* lo, cudaStream_t s) {
    const int64_t count = (r1 - r0) * w.cols;
    if (count <= 0) return;
    dequant_bf16_kernel<<<grid_for(count), kThreads, 0, s>>>(w, r0, count, as_bf16(hi), as_bf16(lo));
    cuda_check(cudaGetLastError(), "dequant launch");
}

void split_bf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t s) {
    if (count <= 0) return;
    split_bf16_kernel<<<grid_for(count), kThreads, 0, s>>>(x, count, as_bf16(hi), as_bf16(lo));
    cuda_check(cudaGetLastError(), "split_bf16 launch");
}

}  // namespace coli::cuda
