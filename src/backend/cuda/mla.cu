// The kernels of absorbed multi-head latent attention (backend.h mla_attention) around the two cuBLAS
// products that mla_attend.cpp runs, f32 throughout:
//   mla_absorb   q_abs[i][h] = W_UK[h]^T q_nope[i][h]        block (i h, column tile), rows split in groups
//   mla_gather   the latent and rope-key rows of DSA's selection, contiguous per query (zeros for -1)
//   mla_softmax  masked softmax over each (query, head) row of scores: causal, or the selection's slots
//   sum_chunks   the split-K partial mixes added in chunk order
//   mla_output   out[i][h] = W_UV[h] mixed[i][h]                block (i, h, row tile), warp per row
// W_UK[h] and W_UV[h] are rows of w_kvb, decoded element by element in any weight format (one kernel each).
#include <algorithm>
#include <cmath>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;                          // threads per block of the other MLA kernels
constexpr int kAbsorbCols = 16;                        // latent columns per mla_absorb block
constexpr int kAbsorbGroups = kThreads / kAbsorbCols;  // row groups per column: more loads in flight
constexpr int kSoftmaxThreads = 1024;          // threads per softmax row: decode has only one row per head
constexpr int kGatherThreads = 128;            // threads per gathered key row
constexpr int kSumBlocks = 1024;               // grid of sum_chunks (grid-stride)
constexpr int kUnroll = 4;                     // weight loads of a thread in flight together
constexpr int kOutputRows = kThreads / kWarp;  // W_UV rows per mla_output block: more blocks in flight

template <Format F>
__global__ void __launch_bounds__(kThreads)
    mla_absorb_kernel(const float* __restrict__ q, DeviceWeight w, MlaArgs a, float* __restrict__ q_abs) {
    extern __shared__ float q_nope[];  // [nope_dim]
    __shared__ float partial[kAbsorbGroups][kAbsorbCols];
    const int64_t ih = blockIdx.x, i = ih / a.n_heads;
    const int h = static_cast<int>(ih % a.n_heads);
    const int64_t q_width = static_cast<int64_t>(a.n_heads) * (a.nope_dim + a.rope_dim);
    for (int j = threadIdx.x; j < a.nope_dim; j += kThreads)
        q_nope[j] = q[i * q_width + h * (a.nope_dim + a.rope_dim) + j];
    __syncthreads();
    const int group = threadIdx.x / kAbsorbCols, col = threadIdx.x % kAbsorbCols;
    const int64_t c = static_cast<int64_t>(blockIdx.y) * kAbsorbCols + col;
    const int64_t row0 = static_cast<int64_t>(h) * (a.nope_dim + a.v_dim);
    float sum = 0.0f;
    if (c < a.kv_lora)
#pragma unroll kUnroll
        for (int j = group; j < a.nope_dim; j += kAbsorbGroups)
            sum = fmaf(q_nope[j], decode_as<F>(w, row0 + j, c), sum);
    partial[group][col] = sum;
    __syncthreads();
    if (group == 0 && c < a.kv_lora) {
        float total = 0.0f;
        for (int g = 0; g < kAbsorbGroups; ++g) total += partial[g][col];
        q_abs[ih * a.kv_lora + c] = total;
    }
}

// Block (j, i): row j of query i's selection; gridDim.x is the selection's width.
__global__ void __launch_bounds__(kGatherThreads)
    mla_gather_kernel(const float* __restrict__ latents, const float* __restrict__ rope_keys,
                      const float* __restrict__ selection, MlaArgs a, float* __restrict__ latent_rows,
                      float* __restrict__ rope_rows) {
    const int64_t slot = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
    const auto key = static_cast<int64_t>(selection[slot]);
    float* lat = latent_rows + slot * a.kv_lora;
    float* rope = rope_rows + slot * a.rope_dim;
    for (int64_t c = threadIdx.x; c < a.kv_lora; c += kGatherThreads)
        lat[c] = key >= 0 ? latents[key * a.kv_lora + c] : 0.0f;
    for (int d = threadIdx.x; d < a.rope_dim; d += kGatherThreads)
        rope[d] = key >= 0 ? rope_keys[key * a.rope_dim + d] : 0.0f;
}

// Block r: row r = (query q, head h) of scores [rows, keys]. Masked keys weigh exactly nothing.
__global__ void __launch_bounds__(kSoftmaxThreads)
    mla_softmax_kernel(float* __restrict__ scores, int n_heads, int64_t keys, int64_t causal0,
                       const float* __restrict__ selection) {
    __shared__ float partial[kSoftmaxThreads / kWarp];
    const int64_t r = blockIdx.x, query = r / n_heads, visible = causal0 + query + 1;
    float* row = scores + r * keys;
    float local_max = -INFINITY;
    for (int64_t j = threadIdx.x; j < keys; j += kSoftmaxThreads) {
        const bool masked = selection ? selection[query * keys + j] < 0.0f : j >= visible;
        const float v = masked ? -INFINITY : row[j];
        row[j] = v;
        local_max = fmaxf(local_max, v);
    }
    block_softmax<kSoftmaxThreads>(row, keys, local_max, partial);
}

__global__ void sum_chunks_kernel(const float* __restrict__ parts, int64_t chunks, int64_t count,
                                  float* __restrict__ out) {
    for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < count;
         k += int64_t{gridDim.x} * blockDim.x) {
        float sum = 0.0f;
        for (int64_t c = 0; c < chunks; ++c) sum += parts[c * count + k];
        out[k] = sum;
    }
}

// Block (i, h, t): rows [t kOutputRows, + kOutputRows) of W_UV[h], a warp per row.
template <Format F>
__global__ void __launch_bounds__(kThreads)
    mla_output_kernel(const float* __restrict__ mixed, DeviceWeight w, MlaArgs a, float* __restrict__ out) {
    extern __shared__ float mix[];  // [kv_lora]
    const int h = blockIdx.y;
    const int64_t i = blockIdx.x;
    const float* src = mixed + (i * a.n_heads + h) * a.kv_lora;
    for (int64_t c = threadIdx.x; c < a.kv_lora; c += kThreads) mix[c] = src[c];
    __syncthreads();
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t row0 = static_cast<int64_t>(h) * (a.nope_dim + a.v_dim) + a.nope_dim;
    const int end = min(a.v_dim, static_cast<int>(blockIdx.z + 1) * kOutputRows);
    for (int j = blockIdx.z * kOutputRows + warp; j < end; j += kThreads / kWarp) {
        float sum = 0.0f;
#pragma unroll kUnroll
        for (int64_t c = lane; c < a.kv_lora; c += kWarp)
            sum = fmaf(decode_as<F>(w, row0 + j, c), mix[c], sum);
        sum = warp_sum(sum);
        if (lane == 0) out[(i * a.n_heads + h) * a.v_dim + j] = sum;
    }
}

}  // namespace

void mla_absorb(const float* q, const DeviceWeight& w_kvb, int64_t n, const MlaArgs& a, float* q_abs,
                cudaStream_t s) {
    if (n == 0) return;
    const dim3 grid(static_cast<unsigned>(n * a.n_heads),
                    static_cast<unsigned>((a.kv_lora + kAbsorbCols - 1) / kAbsorbCols));
    format_dispatch(w_kvb.format, [&](auto f) {
        mla_absorb_kernel<f()><<<grid, kThreads, a.nope_dim * sizeof(float), s>>>(q, w_kvb, a, q_abs);
    });
    cuda_check(cudaGetLastError(), "mla_absorb launch");
}

void mla_gather(const float* latents, const float* rope_keys, const float* selection, int64_t n,
                int64_t sel_cols, const MlaArgs& a, float* latent_rows, float* rope_rows, cudaStream_t s) {
    if (n == 0 || sel_cols == 0) return;
    mla_gather_kernel<<<dim3(static_cast<unsigned>(sel_cols), static_cast<unsigned>(n)), kGatherThreads, 0,
                        s>>>(latents, rope_keys, selection, a, latent_rows, rope_rows);
    cuda_check(cudaGetLastError(), "mla_gather launch");
}

void mla_softmax(float* scores, int64_t n, int n_heads, int64_t keys, int64_t causal0, const float* selection,
                 cudaStream_t s) {
    if (n == 0) return;
    mla_softmax_kernel<<<static_cast<unsigned>(n * n_heads), kSoftmaxThreads, 0, s>>>(scores, n_heads, keys,
                                                                                      causal0, selection);
    cuda_check(cudaGetLastError(), "mla_softmax launch");
}

void sum_chunks(const float* parts, int64_t chunks, int64_t count, float* out, cudaStream_t s) {
    const int64_t blocks = std::min<int64_t>(kSumBlocks, (count + kThreads - 1) / kThreads);
    if (blocks == 0) return;
    sum_chunks_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(parts, chunks, count, out);
    cuda_check(cudaGetLastError(), "sum_chunks launch");
}

void mla_output(const float* mixed, const DeviceWeight& w_kvb, int64_t n, const MlaArgs& a, float* out,
                cudaStream_t s) {
    if (n == 0) return;
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(a.n_heads),
                    static_cast<unsigned>((a.v_dim + kOutputRows - 1) / kOutputRows));
    format_dispatch(w_kvb.format, [&](auto f) {
        mla_output_kernel<f()><<<grid, kThreads, a.kv_lora * sizeof(float), s>>>(mixed, w_kvb, a, out);
    });
    cuda_check(cudaGetLastError(), "mla_output launch");
}

}  // namespace coli::cuda
