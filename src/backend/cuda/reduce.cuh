// Block-wide reductions shared by the kernels that reduce across a whole block (attention, MLA).
#pragma once

#include "backend/cuda/decode.cuh"

namespace coli::cuda {

// The max (is_max) or sum of v over the block's kThreads threads; every thread gets the result. shared:
// kThreads / kWarp floats. Synchronizes the block (so it also orders earlier shared-memory writes).
template <int kThreads>
__device__ float block_reduce(float v, float* shared, bool is_max) {
    for (int o = kWarp / 2; o > 0; o /= 2) {
        const float other = __shfl_xor_sync(kFullMask, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float r = shared[0];
    for (int i = 1; i < kThreads / kWarp; ++i) r = is_max ? fmaxf(r, shared[i]) : r + shared[i];
    __syncthreads();
    return r;
}

// scores[j] = exp(scores[j] - max_score) over [0, n) by the whole block; returns their sum (to every thread).
template <int kThreads>
__device__ float block_exp_sum(float* scores, int64_t n, float max_score, float* shared) {
    float local_sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += kThreads) {
        const float e = expf(scores[j] - max_score);
        scores[j] = e;
        local_sum += e;
    }
    return block_reduce<kThreads>(local_sum, shared, false);
}

// Softmax in place over scores[0, n) by the whole block: exp(s - max) / sum.
template <int kThreads>
__device__ void block_softmax(float* scores, int64_t n, float local_max, float* shared) {
    const float max_score = block_reduce<kThreads>(local_max, shared, true);
    const float sum = block_exp_sum<kThreads>(scores, n, max_score, shared);
    for (int64_t j = threadIdx.x; j < n; j += kThreads) scores[j] /= sum;
    __syncthreads();
}

}  // namespace coli::cuda
