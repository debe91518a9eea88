// Softmax top-k router: one block per token. Probabilities in shared memory; k rounds of a block argmax
// (ties to the lower expert id, as on the CPU), then optional renormalization over the chosen k.
#include <climits>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;  // threads per token

struct Best {
    float p;  // probability, -1 when none
    int id;   // expert id
};

__device__ __forceinline__ Best better(Best a, Best b) {
    return (b.p > a.p || (b.p == a.p && b.id < a.id)) ? b : a;
}

__global__ void __launch_bounds__(kThreads)
    route_kernel(const float* __restrict__ logits, int64_t n_experts, int k, bool renormalize,
                 int32_t* __restrict__ ids, float* __restrict__ weights) {
    extern __shared__ float p[];  // [n_experts]
    __shared__ float red[kThreads / kWarp];
    __shared__ Best best_red[kThreads / kWarp];
    const int64_t t = blockIdx.x;
    const float* l = logits + t * n_experts;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;

    float m = -INFINITY;
    for (int64_t e = threadIdx.x; e < n_experts; e += kThreads) m = fmaxf(m, l[e]);
    for (int o = kWarp / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int i = 1; i < kThreads / kWarp; ++i) m = fmaxf(m, red[i]);
    __syncthreads();

    float sum = 0.0f;
    for (int64_t e = threadIdx.x; e < n_experts; e += kThreads) {
        p[e] = expf(l[e] - m);
        sum += p[e];
    }
    sum = warp_sum(sum);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int i = 0; i < kThreads / kWarp; ++i) sum += red[i];
    for (int64_t e = threadIdx.x; e < n_experts; e += kThreads) p[e] /= sum;
    __syncthreads();

    float kept = 0.0f;
    for (int j = 0; j < k; ++j) {
        Best b{-1.0f, INT_MAX};
        for (int64_t e = threadIdx.x; e < n_experts; e += kThreads)
            b = better(b, Best{p[e], static_cast<int>(e)});
        for (int o = kWarp / 2; o > 0; o /= 2) {
            Best other{__shfl_xor_sync(kFullMask, b.p, o), __shfl_xor_sync(kFullMask, b.id, o)};
            b = better(b, other);
        }
        if (lane == 0) best_red[warp] = b;
        __syncthreads();
        b = best_red[0];
        for (int i = 1; i < kThreads / kWarp; ++i) b = better(b, best_red[i]);
        if (threadIdx.x == 0) {
            ids[t * k + j] = b.id;
            weights[t * k + j] = b.p;
            p[b.id] = -1.0f;  // taken
        }
        kept += b.p;
        __syncthreads();
    }
    if (renormalize && threadIdx.x == 0)
        for (int j = 0; j < k; ++j) weights[t * k + j] /= kept;
}

}  // namespace

void route_softmax_topk(const float* logits, int64_t n, int64_t n_experts, int k, bool renormalize,
                        int32_t* ids, float* weights, cudaStream_t s) {
    if (n == 0) return;
    const size_t smem = static_cast<size_t>(n_experts) * sizeof(float);
    cuda_check(cudaFuncSetAttribute(route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "router shared memory");
    route_kernel<<<static_cast<unsigned>(n), kThreads, smem, s>>>(logits, n_experts, k, renormalize, ids,
                                                                  weights);
    cuda_check(cudaGetLastError(), "router launch");
}

}  // namespace coli::cuda
