// DeepSeek-V4's attention over a sliding window of raw keys plus compressed entries, with a sink (backend.h
// compressed_attention), as attention.cu runs GQA: in key splits, joined per row in split order.
//
// Query i (position t = pos0 + i) has window + entry_slots key slots: slot j < window is the raw position
// t - window + 1 + j (none below 0; kv's row for positions from pos0, else the ring's row p mod R), slot
// window + e the entry e (or the e-th of the query's selection; none for -1) when its window has closed,
// e < (t + 1) / ratio. Keys are the values (one head shared by every query head). A split's block finds
// its slots' rows, scores them (a warp per key, lanes over the dims), and writes its largest score m,
// l = sum exp(s - m) and o = sum exp(s - m) key; the combine adds the sink to the denominator:
//   M = max(sink, max_c m_c),  out = sum_c e^(m_c - M) o_c / (e^(sink - M) + sum_c e^(m_c - M) l_c).
#include <algorithm>
#include <cfloat>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"

namespace coli::cuda {
namespace {

constexpr int kThreads = 128;                   // threads per block of both kernels
constexpr int kWarps = kThreads / kWarp;        // warps per block
constexpr int64_t kSplitMinKeys = 64;           // key slots of a split at least
constexpr int64_t kSplitMaxKeys = 512;          // ... at most (their rows and scores in shared memory)
constexpr int64_t kBlocksPerSm = 8;             // blocks of a pass that keep an SM's loads in flight
constexpr int64_t kScratchFloats = 16LL << 20;  // partial results of one pass, at most (64 MB)
constexpr int kPartialExtra = 2;                // floats of a split's result besides its sum: m and l
constexpr int64_t kMaxGridQueries = 65535;      // queries of a pass: the grid's z dimension at most

// Row of key slot j of query i, or nullptr when the slot holds no key.
__device__ const float* slot_row(const CompressedAttentionIo& io, const CompressedAttentionArgs& a, int64_t i,
                                 int64_t j) {
    const int64_t t = a.pos0 + i, hd = a.head_dim;
    if (j < a.window) {
        const int64_t p = t - a.window + 1 + j;
        if (p < 0) return nullptr;
        return p >= a.pos0 ? io.kv + (p - a.pos0) * hd : io.ring + (p % a.ring_rows) * hd;
    }
    if (a.ratio == 0) return nullptr;
    const int64_t e = j - a.window, visible = (t + 1) / a.ratio;
    int64_t w = e;
    if (io.selection != nullptr) {
        const float id = io.selection[i * a.entry_slots + e];
        w = id >= 0.0f ? static_cast<int64_t>(id) : -1;
    }
    return w >= 0 && w < visible ? io.entries + w * hd : nullptr;
}

// Split c of row (query i, head h): o, then m and l, at partial[(((i - i0) heads + h) splits + c) (hd + 2)].
__global__ void __launch_bounds__(kThreads)
    compressed_split_kernel(CompressedAttentionIo io, CompressedAttentionArgs a, int64_t i0,
                            int64_t split_keys, int64_t splits, float* __restrict__ partial) {
    extern __shared__ __align__(16) float smem[];  // the slots' row pointers first: 8-byte aligned
    __shared__ float reduce_shared[kWarps];
    const int64_t c = blockIdx.x, i = i0 + blockIdx.z;
    const int h = blockIdx.y, hd = a.head_dim;
    const int64_t slots = a.window + a.entry_slots, j0 = c * split_keys;
    const int count = static_cast<int>(slots - j0 < split_keys ? slots - j0 : split_keys);
    const float** rows = reinterpret_cast<const float**>(smem);  // [split_keys]: each slot's row or nullptr
    float* qs = reinterpret_cast<float*>(rows + split_keys);     // [hd]
    float* p = qs + hd;                                          // [count]: scores, then exp(s - m)
    for (int j = threadIdx.x; j < count; j += kThreads) rows[j] = slot_row(io, a, i, j0 + j);
    for (int d = threadIdx.x; d < hd; d += kThreads) qs[d] = io.q[(i * a.n_heads + h) * hd + d];
    __syncthreads();

    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    float local_max = -FLT_MAX;
    for (int j = warp; j < count; j += kWarps) {
        const float* key = rows[j];
        if (key == nullptr) {  // exp(-inf - m) = 0: the slot adds nothing
            if (lane == 0) p[j] = -INFINITY;
            continue;
        }
        float dot = 0.0f;
        for (int d = lane; d < hd; d += kWarp) dot = fmaf(qs[d], key[d], dot);
        const float s = warp_sum(dot) * a.scale;
        if (lane == 0) p[j] = s;
        local_max = fmaxf(local_max, s);
    }
    const float m = block_reduce<kThreads>(local_max, reduce_shared, true);  // also orders p's writes
    const float l = block_exp_sum<kThreads>(p, count, m, reduce_shared);     // syncs after p's rewrite

    float* result = partial + (((i - i0) * a.n_heads + h) * splits + c) * (hd + kPartialExtra);
    for (int d = threadIdx.x; d < hd; d += kThreads) {
        float o = 0.0f;
        for (int j = 0; j < count; ++j)
            if (rows[j] != nullptr) o = fmaf(p[j], rows[j][d], o);
        result[d] = o;
    }
    if (threadIdx.x == 0) {
        result[hd] = m;
        result[hd + 1] = l;
    }
}

// out row (i, h) from its splits' partial results, in split order, with the head's sink.
__global__ void __launch_bounds__(kThreads)
    compressed_combine_kernel(const float* __restrict__ partial, const float* __restrict__ sinks,
                              CompressedAttentionArgs a, int64_t i0, int64_t splits,
                              float* __restrict__ out) {
    extern __shared__ float weight[];  // [splits]: e^(m_c - M) / total
    const int64_t i = i0 + blockIdx.y;
    const int h = blockIdx.x, hd = a.head_dim;
    const float* row = partial + ((i - i0) * a.n_heads + h) * splits * (hd + kPartialExtra);
    const auto m_of = [&](int64_t c) { return row[c * (hd + kPartialExtra) + hd]; };
    const auto l_of = [&](int64_t c) { return row[c * (hd + kPartialExtra) + hd + 1]; };
    const float sink = sinks[h];
    float big = sink;
    for (int64_t c = 0; c < splits; ++c) big = fmaxf(big, m_of(c));
    float total = expf(sink - big);
    for (int64_t c = 0; c < splits; ++c) total += expf(m_of(c) - big) * l_of(c);
    for (int64_t c = threadIdx.x; c < splits; c += kThreads) weight[c] = expf(m_of(c) - big) / total;
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += kThreads) {
        float o = 0.0f;
        for (int64_t c = 0; c < splits; ++c) o = fmaf(weight[c], row[c * (hd + kPartialExtra) + d], o);
        out[(i * a.n_heads + h) * hd + d] = o;
    }
}

}  // namespace

AttentionSplit compressed_attention_split(int64_t n, const CompressedAttentionArgs& a) {
    // As attention.cu plans its splits: enough blocks for every SM, then as many queries per pass as the
    // scratch holds.
    AttentionSplit p;
    const int64_t slots = a.window + a.entry_slots, blocks = kBlocksPerSm * sm_count();
    p.keys = std::clamp((slots * n * a.n_heads + blocks - 1) / blocks, kSplitMinKeys, kSplitMaxKeys);
    p.splits = (slots + p.keys - 1) / p.keys;
    const int64_t row_floats = p.splits * (a.head_dim + kPartialExtra) * a.n_heads;
    p.queries =
        std::clamp<int64_t>(kScratchFloats / row_floats, 1, std::clamp<int64_t>(n, 1, kMaxGridQueries));
    return p;
}

int64_t compressed_attention_scratch_floats(const AttentionSplit& p, const CompressedAttentionArgs& a) {
    return p.queries * a.n_heads * p.splits * (a.head_dim + kPartialExtra);
}

void compressed_attention(const CompressedAttentionIo& io, const CompressedAttentionArgs& a, int64_t n,
                          const AttentionSplit& p, float* scratch, float* out, cudaStream_t s) {
    if (n == 0) return;
    const size_t split_smem = static_cast<size_t>(p.keys) * sizeof(const float*) +
                              static_cast<size_t>(a.head_dim + p.keys) * sizeof(float);
    const size_t combine_smem = static_cast<size_t>(p.splits) * sizeof(float);
    cuda_check(cudaFuncSetAttribute(compressed_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(split_smem)),
               "compressed_attention shared memory");
    cuda_check(cudaFuncSetAttribute(compressed_combine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(combine_smem)),
               "compressed_attention combine shared memory");
    for (int64_t i0 = 0; i0 < n; i0 += p.queries) {
        const auto queries = static_cast<unsigned>(std::min(p.queries, n - i0));
        compressed_split_kernel<<<dim3(static_cast<unsigned>(p.splits), a.n_heads, queries), kThreads,
                                  split_smem, s>>>(io, a, i0, p.keys, p.splits, scratch);
        compressed_combine_kernel<<<dim3(a.n_heads, queries), kThreads, combine_smem, s>>>(
            scratch, io.sinks, a, i0, p.splits, out);
        cuda_check(cudaGetLastError(), "compressed_attention launch");
    }
}

}  // namespace coli::cuda
