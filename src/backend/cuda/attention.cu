// Causal softmax attention over the KV cache, in key splits (as flash decoding): a decode step has one
// query, so one block per (query, head) would leave most SMs idle and walk the whole cache alone. Each block
// takes one split of a row's keys and writes the split's largest score m, its sum of exp(s - m) and its
// unnormalized weighted sum of value rows; attention_combine_kernel then joins the splits of each row in
// split order (the same result on every run):
//   out = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c,   M = max_c m_c.
// The heads of a GQA group read the same cached rows, the second and later ones from L2. Each query reads
// every row of its context, so a prefill of many queries takes cuBLAS products instead (gqa_attend.cpp).
#include <algorithm>
#include <cfloat>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"

namespace coli::cuda {
namespace {

constexpr int kThreads = 128;                   // threads per block of both kernels
constexpr int kWarps = kThreads / kWarp;        // warps per block
constexpr int kStepKeys = 4;                    // keys a warp's loads cover at once
constexpr int64_t kSplitMinKeys = 64;           // keys of a split at least: each block reads a few rows
constexpr int64_t kSplitMaxKeys = 1024;         // ... at most, while splits remain (scores in shared memory)
constexpr int64_t kMaxSplits = 1024;            // splits of a row at most (the combine's weights)
constexpr int64_t kBlocksPerSm = 8;             // blocks of a pass that keep an SM's loads in flight
constexpr int64_t kScratchFloats = 16LL << 20;  // partial results of one pass, at most (64 MB)
constexpr int kPartialExtra = 2;                // floats of a split's result besides its sum: m and l
constexpr int64_t kMaxGridQueries = 65535;      // queries of a pass: the grid's z dimension at most

// Split c of row (query i, head h): its keys' scores, their max m, l = sum of exp(s - m) and o = sum of
// exp(s - m) v, written at partial[(((i - i0) heads + h) splits + c) (head_dim + 2)]: o, then m, l. Splits
// past the row's causal end write nothing (the combine stops at the row's last split).
__global__ void __launch_bounds__(kThreads)
    attention_split_kernel(const float* __restrict__ q, const float* __restrict__ kc,
                           const float* __restrict__ vc, int64_t i0, int64_t pos0, AttentionArgs a,
                           int64_t split_keys, int64_t splits, float* __restrict__ partial) {
    extern __shared__ float smem[];
    __shared__ float reduce_shared[kWarps];
    const int64_t c = blockIdx.x, i = i0 + blockIdx.z;
    const int h = blockIdx.y, hd = a.head_dim, kvh = h / (a.n_heads / a.n_kv_heads);
    const int64_t n_keys = pos0 + i + 1;  // causal
    const int64_t j0 = c * split_keys;
    if (j0 >= n_keys) return;
    const int count = static_cast<int>(n_keys - j0 < split_keys ? n_keys - j0 : split_keys);
    const int64_t q_width = static_cast<int64_t>(a.n_heads) * hd,
                  kv_width = static_cast<int64_t>(a.n_kv_heads) * hd;
    float* qs = smem;      // [hd]
    float* p = smem + hd;  // [count]: scores, then exp(s - m)
    for (int d = threadIdx.x; d < hd; d += kThreads) qs[d] = q[i * q_width + h * hd + d];
    __syncthreads();

    const float* keys = kc + j0 * kv_width + kvh * hd;  // [count, kv_width] from this head's columns
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    float local_max = -FLT_MAX;
    for (int jj = warp * kStepKeys; jj < count; jj += kWarps * kStepKeys) {
        float dot[kStepKeys] = {};
        for (int d = lane; d < hd; d += kWarp) {
            const float qd = qs[d];
#pragma unroll
            for (int u = 0; u < kStepKeys; ++u)
                if (jj + u < count) dot[u] = fmaf(qd, keys[(jj + u) * kv_width + d], dot[u]);
        }
#pragma unroll
        for (int u = 0; u < kStepKeys; ++u) {
            const float s = warp_sum(dot[u]) * a.scale;
            if (jj + u < count) {
                if (lane == 0) p[jj + u] = s;
                local_max = fmaxf(local_max, s);
            }
        }
    }
    const float m = block_reduce<kThreads>(local_max, reduce_shared, true);  // also orders p's writes
    const float l = block_exp_sum<kThreads>(p, count, m, reduce_shared);

    float* result = partial + ((i - i0) * a.n_heads * splits + h * splits + c) * (hd + kPartialExtra);
    const float* values = vc + j0 * kv_width + kvh * hd;
    for (int d = threadIdx.x; d < hd; d += kThreads) {
        float o[kStepKeys] = {};  // independent sums, so that loads of several rows are in flight
        int j = 0;
        for (; j + kStepKeys <= count; j += kStepKeys)
#pragma unroll
            for (int u = 0; u < kStepKeys; ++u) o[u] = fmaf(p[j + u], values[(j + u) * kv_width + d], o[u]);
        for (; j < count; ++j) o[0] = fmaf(p[j], values[j * kv_width + d], o[0]);
        result[d] = (o[0] + o[1]) + (o[2] + o[3]);
    }
    if (threadIdx.x == 0) {
        result[hd] = m;
        result[hd + 1] = l;
    }
}

// out row (i, h) from its splits' partial results, in split order.
__global__ void __launch_bounds__(kThreads)
    attention_combine_kernel(const float* __restrict__ partial, int64_t i0, int64_t pos0, AttentionArgs a,
                             int64_t split_keys, int64_t splits, float* __restrict__ out) {
    __shared__ float weight[kMaxSplits];  // e^(m_c - M) / L
    const int64_t i = i0 + blockIdx.y;
    const int h = blockIdx.x, hd = a.head_dim;
    const int used = static_cast<int>((pos0 + i + split_keys) / split_keys);  // splits holding keys
    const float* row = partial + ((i - i0) * a.n_heads + h) * splits * (hd + kPartialExtra);
    auto m_of = [&](int c) { return row[c * (hd + kPartialExtra) + hd]; };
    auto l_of = [&](int c) { return row[c * (hd + kPartialExtra) + hd + 1]; };
    float big = -FLT_MAX;
    for (int c = 0; c < used; ++c) big = fmaxf(big, m_of(c));
    float total = 0.0f;
    for (int c = 0; c < used; ++c) total += expf(m_of(c) - big) * l_of(c);
    for (int c = threadIdx.x; c < used; c += kThreads) weight[c] = expf(m_of(c) - big) / total;
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += kThreads) {
        float o = 0.0f;
        for (int c = 0; c < used; ++c) o = fmaf(weight[c], row[c * (hd + kPartialExtra) + d], o);
        out[i * a.n_heads * hd + h * hd + d] = o;
    }
}

}  // namespace

AttentionSplit attention_split(int64_t n, int64_t pos0, const AttentionArgs& a) {
    AttentionSplit p;
    const int64_t keys = pos0 + n, rows = n * a.n_heads;
    const int64_t wanted = (keys * rows + kBlocksPerSm * sm_count() - 1) / (kBlocksPerSm * sm_count());
    p.keys = std::max(std::clamp(wanted, kSplitMinKeys, kSplitMaxKeys), (keys + kMaxSplits - 1) / kMaxSplits);
    p.splits = (keys + p.keys - 1) / p.keys;
    const int64_t row_floats = p.splits * (a.head_dim + kPartialExtra) * a.n_heads;
    p.queries =
        std::clamp<int64_t>(kScratchFloats / row_floats, 1, std::clamp<int64_t>(n, 1, kMaxGridQueries));
    return p;
}

int64_t attention_scratch_floats(const AttentionSplit& p, const AttentionArgs& a) {
    return p.queries * a.n_heads * p.splits * (a.head_dim + kPartialExtra);
}

void attention(const float* q, const float* k_cache, const float* v_cache, int64_t n, int64_t pos0,
               const AttentionArgs& a, const AttentionSplit& p, float* scratch, float* out, cudaStream_t s) {
    const size_t smem = static_cast<size_t>(a.head_dim + p.keys) * sizeof(float);
    cuda_check(cudaFuncSetAttribute(attention_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "attention shared memory");
    for (int64_t i0 = 0; i0 < n; i0 += p.queries) {
        const auto queries = static_cast<unsigned>(std::min(p.queries, n - i0));
        attention_split_kernel<<<dim3(static_cast<unsigned>(p.splits), a.n_heads, queries), kThreads, smem,
                                 s>>>(q, k_cache, v_cache, i0, pos0, a, p.keys, p.splits, scratch);
        attention_combine_kernel<<<dim3(a.n_heads, queries), kThreads, 0, s>>>(scratch, i0, pos0, a, p.keys,
                                                                               p.splits, out);
        cuda_check(cudaGetLastError(), "attention launch");
    }
}

}  // namespace coli::cuda
