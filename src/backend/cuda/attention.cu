// Causal softmax attention over the KV cache: one block per (query, head). The block's scores live in
// shared memory (so the cache length is bounded, see kCudaAttentionMaxKeys); the output is the
// probability-weighted sum of value rows, probabilities normalized first as on the CPU.
#include <cfloat>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps: one key per warp at a time for the scores

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, const float* __restrict__ kc, const float* __restrict__ vc,
                     int64_t pos0, AttentionArgs a, float* __restrict__ out) {
    extern __shared__ float smem[];
    __shared__ float partial[kThreads / kWarp];
    const int h = blockIdx.x;
    const int64_t i = blockIdx.y;
    const int hd = a.head_dim;
    const int kvh = h / (a.n_heads / a.n_kv_heads);
    const int64_t q_width = static_cast<int64_t>(a.n_heads) * hd,
                  kv_width = static_cast<int64_t>(a.n_kv_heads) * hd;
    const int64_t n_keys = pos0 + i + 1;  // causal
    float* qs = smem;                     // [hd]
    float* scores = smem + hd;            // [n_keys]
    for (int d = threadIdx.x; d < hd; d += kThreads) qs[d] = q[i * q_width + h * hd + d];
    __syncthreads();

    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    float local_max = -FLT_MAX;
    for (int64_t j = warp; j < n_keys; j += kThreads / kWarp) {
        const float* kj = kc + j * kv_width + kvh * hd;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += kWarp) dot = fmaf(qs[d], kj[d], dot);
        dot = warp_sum(dot) * a.scale;
        if (lane == 0) scores[j] = dot;
        local_max = fmaxf(local_max, dot);
    }
    block_softmax<kThreads>(scores, n_keys, local_max, partial);
    for (int d = threadIdx.x; d < hd; d += kThreads) {
        float o = 0.0f;
        for (int64_t j = 0; j < n_keys; ++j) o = fmaf(scores[j], vc[j * kv_width + kvh * hd + d], o);
        out[i * q_width + h * hd + d] = o;
    }
}

}  // namespace

size_t attention_smem_bytes(int64_t n_keys, int head_dim) {
    return static_cast<size_t>(n_keys + head_dim) * sizeof(float);
}

void attention(const float* q, const float* k_cache, const float* v_cache, int64_t n, int64_t pos0,
               const AttentionArgs& a, float* out, cudaStream_t s) {
    if (n == 0) return;
    const size_t smem = attention_smem_bytes(pos0 + n, a.head_dim);
    cuda_check(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "attention shared memory");
    const dim3 grid(static_cast<unsigned>(a.n_heads), static_cast<unsigned>(n));
    attention_kernel<<<grid, kThreads, smem, s>>>(q, k_cache, v_cache, pos0, a, out);
    cuda_check(cudaGetLastError(), "attention launch");
}

}  // namespace coli::cuda
