// Absorbed multi-head latent attention (backend.h mla_attention) in three kernels, f32 throughout:
//   mla_absorb   q_abs[i][h] = W_UK[h]^T q_nope[i][h]                      block (i, h), thread per column
//   mla_attend   scores over the latent + rope-key cache, softmax, mixed = sum_s p(s) latent(s)
//                (one block per (h, i); keys in tiles with a running max and sum, so any context fits)
//   mla_output   out[i][h] = W_UV[h] mixed[i][h]                          block (i, h), warp per row
// and the scoring half of the DSA indexer (dsa_scores), whose top-k the backend takes on the host.
// W_UK[h] and W_UV[h] are rows of w_kvb, decoded element by element in any weight format.
#include <cfloat>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"
#include "backend/cuda/reduce.cuh"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;  // threads per block of every MLA kernel
constexpr int kKeyTile = 512;  // keys scored per step of mla_attend
// Latent columns one mla_attend thread accumulates: kv_lora up to kThreads * this (kCudaMlaMaxLatent).
constexpr int kMaxColsPerThread = kCudaMlaMaxLatent / kThreads;

__global__ void __launch_bounds__(kThreads)
    mla_absorb(const float* __restrict__ q, DeviceWeight w, MlaArgs a, float* __restrict__ q_abs) {
    extern __shared__ float q_nope[];  // [nope_dim]
    const int h = blockIdx.y;
    const int64_t i = blockIdx.x, q_width = static_cast<int64_t>(a.n_heads) * (a.nope_dim + a.rope_dim);
    for (int j = threadIdx.x; j < a.nope_dim; j += kThreads)
        q_nope[j] = q[i * q_width + h * (a.nope_dim + a.rope_dim) + j];
    __syncthreads();
    const int64_t row0 = static_cast<int64_t>(h) * (a.nope_dim + a.v_dim);
    for (int64_t c = threadIdx.x; c < a.kv_lora; c += kThreads) {
        float sum = 0.0f;
        for (int j = 0; j < a.nope_dim; ++j) sum = fmaf(q_nope[j], decode_at(w, row0 + j, c), sum);
        q_abs[(i * a.n_heads + h) * a.kv_lora + c] = sum;
    }
}

__global__ void __launch_bounds__(kThreads)
    mla_attend(const float* __restrict__ q, const float* __restrict__ q_abs,
               const float* __restrict__ latents, const float* __restrict__ rope_keys, int64_t pos0,
               const float* __restrict__ selection, int64_t sel_cols, MlaArgs a, float* __restrict__ mixed) {
    extern __shared__ float smem[];
    __shared__ float partial[kThreads / kWarp];
    const int h = blockIdx.x;
    const int64_t i = blockIdx.y;
    // Keys: every position up to this query's (causal), or the row of DSA's selection (-1: none).
    const int64_t n_keys = selection ? sel_cols : pos0 + i + 1;
    const float* sel = selection ? selection + i * sel_cols : nullptr;
    const int64_t q_width = static_cast<int64_t>(a.n_heads) * (a.nope_dim + a.rope_dim);
    float* qa = smem;                 // [kv_lora]: absorbed query
    float* qp = smem + a.kv_lora;     // [rope_dim]: rope part of the query
    float* scores = qp + a.rope_dim;  // [kKeyTile]
    const float* qa_src = q_abs + (i * a.n_heads + h) * a.kv_lora;
    for (int64_t c = threadIdx.x; c < a.kv_lora; c += kThreads) qa[c] = qa_src[c];
    for (int d = threadIdx.x; d < a.rope_dim; d += kThreads)
        qp[d] = q[i * q_width + h * (a.nope_dim + a.rope_dim) + a.nope_dim + d];
    __syncthreads();

    // Thread t accumulates columns t, t + kThreads, ... of the mix, rescaled whenever the running max grows.
    float acc[kMaxColsPerThread] = {};
    float run_max = -FLT_MAX, run_sum = 0.0f;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int64_t t0 = 0; t0 < n_keys; t0 += kKeyTile) {
        const int64_t tile = n_keys - t0 < kKeyTile ? n_keys - t0 : kKeyTile;
        float local_max = -FLT_MAX;
        for (int64_t j = warp; j < tile; j += kThreads / kWarp) {
            const int64_t key = sel ? static_cast<int64_t>(sel[t0 + j]) : t0 + j;
            float dot = -FLT_MAX;  // an empty selection slot weighs nothing
            if (key >= 0) {
                const float* ls = latents + key * a.kv_lora;
                const float* ks = rope_keys + key * a.rope_dim;
                dot = 0.0f;
                for (int64_t c = lane; c < a.kv_lora; c += kWarp) dot = fmaf(qa[c], ls[c], dot);
                for (int d = lane; d < a.rope_dim; d += kWarp) dot = fmaf(qp[d], ks[d], dot);
                dot = warp_sum(dot) * a.scale;
            }
            if (lane == 0) scores[j] = dot;
            local_max = fmaxf(local_max, dot);
        }
        const float new_max = fmaxf(run_max, block_reduce<kThreads>(local_max, partial, true));
        const float rescale = expf(run_max - new_max);
        float local_sum = 0.0f;
        for (int64_t j = threadIdx.x; j < tile; j += kThreads) {
            scores[j] = expf(scores[j] - new_max);
            local_sum += scores[j];
        }
        run_sum = run_sum * rescale + block_reduce<kThreads>(local_sum, partial, false);
        run_max = new_max;
#pragma unroll
        for (int k = 0; k < kMaxColsPerThread; ++k) {
            const int64_t c = threadIdx.x + int64_t{k} * kThreads;
            if (c >= a.kv_lora) break;
            float m = acc[k] * rescale;
            for (int64_t j = 0; j < tile; ++j) {
                const int64_t key = sel ? static_cast<int64_t>(sel[t0 + j]) : t0 + j;
                if (key >= 0) m = fmaf(scores[j], latents[key * a.kv_lora + c], m);
            }
            acc[k] = m;
        }
        __syncthreads();  // the next tile overwrites the scores
    }
#pragma unroll
    for (int k = 0; k < kMaxColsPerThread; ++k) {
        const int64_t c = threadIdx.x + int64_t{k} * kThreads;
        if (c >= a.kv_lora) break;
        mixed[(i * a.n_heads + h) * a.kv_lora + c] = acc[k] / run_sum;
    }
}

__global__ void __launch_bounds__(kThreads)
    mla_output(const float* __restrict__ mixed, DeviceWeight w, MlaArgs a, float* __restrict__ out) {
    extern __shared__ float mix[];  // [kv_lora]
    const int h = blockIdx.y;
    const int64_t i = blockIdx.x;
    const float* src = mixed + (i * a.n_heads + h) * a.kv_lora;
    for (int64_t c = threadIdx.x; c < a.kv_lora; c += kThreads) mix[c] = src[c];
    __syncthreads();
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t row0 = static_cast<int64_t>(h) * (a.nope_dim + a.v_dim) + a.nope_dim;
    for (int j = warp; j < a.v_dim; j += kThreads / kWarp) {
        float sum = 0.0f;
        for (int64_t c = lane; c < a.kv_lora; c += kWarp) sum = fmaf(decode_at(w, row0 + j, c), mix[c], sum);
        sum = warp_sum(sum);
        if (lane == 0) out[(i * a.n_heads + h) * a.v_dim + j] = sum;
    }
}

// Block i: the index score of every key s <= pos0 + i for query i (warp per key).
__global__ void __launch_bounds__(kThreads)
    dsa_scores_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                      const float* __restrict__ keys, int64_t pos0, int64_t total, DsaArgs a,
                      float* __restrict__ scores) {
    const int64_t i = blockIdx.x, visible = pos0 + i + 1;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const float* qi = q + i * a.n_heads * a.head_dim;
    for (int64_t t = warp; t < visible; t += kThreads / kWarp) {
        const float* kt = keys + t * a.head_dim;
        float sum = 0.0f;
        for (int h = 0; h < a.n_heads; ++h) {
            float dot = 0.0f;
            for (int d = lane; d < a.head_dim; d += kWarp) dot = fmaf(qi[h * a.head_dim + d], kt[d], dot);
            dot = warp_sum(dot) * a.scale;
            sum += weights[i * a.n_heads + h] * a.weight_scale * fmaxf(dot, 0.0f);
        }
        if (lane == 0) scores[i * total + t] = sum;
    }
}

}  // namespace

void dsa_scores(const float* q, const float* weights, const float* keys, int64_t n, int64_t pos0,
                const DsaArgs& a, float* scores, cudaStream_t s) {
    if (n == 0) return;
    dsa_scores_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(q, weights, keys, pos0, pos0 + n, a,
                                                                    scores);
    cuda_check(cudaGetLastError(), "dsa_scores launch");
}

void mla_attention(const float* q, const float* latents, const float* rope_keys, const DeviceWeight& w_kvb,
                   int64_t n, int64_t pos0, const float* selection, int64_t sel_cols, const MlaArgs& a,
                   float* q_abs, float* mixed, float* out, cudaStream_t s) {
    if (n == 0) return;
    const dim3 per_token_head(static_cast<unsigned>(n), static_cast<unsigned>(a.n_heads));
    mla_absorb<<<per_token_head, kThreads, a.nope_dim * sizeof(float), s>>>(q, w_kvb, a, q_abs);
    const size_t smem = (a.kv_lora + a.rope_dim + kKeyTile) * sizeof(float);  // well under 48 KB
    mla_attend<<<dim3(static_cast<unsigned>(a.n_heads), static_cast<unsigned>(n)), kThreads, smem, s>>>(
        q, q_abs, latents, rope_keys, pos0, selection, sel_cols, a, mixed);
    mla_output<<<per_token_head, kThreads, a.kv_lora * sizeof(float), s>>>(mixed, w_kvb, a, out);
    cuda_check(cudaGetLastError(), "mla_attention launch");
}

}  // namespace coli::cuda
