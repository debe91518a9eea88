// DSA's selection rule (backend.h dsa_topk_row) on the device, one block per query row, whose visible keys
// are the first (pos0 + i + 1) / ratio (ratio 1: dsa_select's causal keys; index_topk's compressed keys):
//   1. radix select: four passes of 8 bits over the scores, as order-preserving integer keys (the first
//      kCachedKeys of them kept in shared memory), find the key T of the want-th largest score (want =
//      min(top_k, visible)) and how many scores equal to T it takes to reach want;
//   2. collection, in position order: every score above T, and the first of those equal to T (a scan over
//      the row in chunks, so that ties go to the lower positions);
//   3. a bitonic sort of the picked (score, position) pairs: score descending, then position ascending,
//      which is dsa_topk_row's order; slots past want get -1.
#include <cstdint>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 1024;                 // threads per block (one block per row)
constexpr int kWarps = kThreads / kWarp;       // warps per block
constexpr int kDigitBits = 8;                  // key bits decided per radix pass
constexpr int kBins = 1 << kDigitBits;         // histogram bins per pass
constexpr int kBinsPerLane = kBins / kWarp;    // bins one lane of the digit-finding warp sums
constexpr int kKeyBits = 32;                   // bits of a score key
constexpr uint32_t kDigitMask = kBins - 1;     // one digit
constexpr uint32_t kSignBit = 0x80000000u;     // f32 sign
constexpr int kNoDigit = kBins;                // a lane outside the row or the current prefix
constexpr uint64_t kEmptySlot = ~uint64_t{0};  // sorts after every picked pair
constexpr int kPositionBits = 32;              // low half of a sort word: the position
// Keys of a row kept in shared memory for the five passes over it (128 KB); later positions are re-read.
constexpr int64_t kCachedKeys = 32768;

static_assert(kBins % kWarp == 0, "the digit-finding warp splits the bins evenly");

// A key whose unsigned order is the scores' float order; -0 and +0 are equal, as they compare in C++.
__device__ __forceinline__ uint32_t score_key(float x) {
    const uint32_t bits = __float_as_uint(x == 0.0f ? 0.0f : x);
    return (bits & kSignBit) ? ~bits : bits | kSignBit;
}

// The sort word of a picked pair: ascending words are scores descending, then positions ascending.
__device__ __forceinline__ uint64_t sort_word(uint32_t key, int64_t pos) {
    return (static_cast<uint64_t>(~key) << kPositionBits) | static_cast<uint64_t>(pos);
}

// Block-wide: the digit d of this pass such that the keys matching the prefix with a digit above d number
// fewer than `remaining`, and with digit d at least that many; remaining becomes what is left to take from
// those with digit d.
__device__ uint32_t digit_find(const uint32_t* hist, uint32_t& remaining, uint32_t* result) {
    if (threadIdx.x < kWarp) {
        // Lane l sums the bins from the top: lane 0 the highest kBinsPerLane digits.
        const int lane = threadIdx.x, top = kBins - 1 - lane * kBinsPerLane;
        uint32_t own = 0;
        for (int b = 0; b < kBinsPerLane; ++b) own += hist[top - b];
        uint32_t above = own;  // inclusive scan over lanes: the keys in bins at or above this lane's
        for (int o = 1; o < kWarp; o *= 2) {
            const uint32_t other = __shfl_up_sync(kFullMask, above, o);
            if (lane >= o) above += other;
        }
        above -= own;  // exclusive: the keys above this lane's bins
        if (above < remaining && above + own >= remaining) {
            int b = 0;
            for (; hist[top - b] + above < remaining; ++b) above += hist[top - b];
            result[0] = static_cast<uint32_t>(top - b);
            result[1] = remaining - above;
        }
    }
    __syncthreads();
    remaining = result[1];
    const uint32_t digit = result[0];
    __syncthreads();  // result is rewritten by the next pass
    return digit;
}

__global__ void __launch_bounds__(kThreads)
    dsa_topk_kernel(const float* __restrict__ scores, int64_t total, int64_t pos0, int ratio, int top_k,
                    float* __restrict__ out) {
    extern __shared__ uint32_t cached[];  // [min(visible, kCachedKeys)]: score keys of the row's start
    __shared__ uint32_t hist[kBins];
    __shared__ uint32_t found[2];           // digit_find's digit and remaining
    __shared__ uint32_t warp_ties[kWarps];  // ties to T per warp in the current chunk
    __shared__ uint32_t above_count, ties_taken;
    __shared__ uint64_t picked[kCudaDsaMaxTopK];  // sort words
    const int64_t i = blockIdx.x, visible = (pos0 + i + 1) / ratio;
    const float* row = scores + i * total;
    const uint32_t want = static_cast<uint32_t>(visible < top_k ? visible : top_k);
    if (want == 0) {  // no key visible yet (compressed keys): every slot empty
        for (int s = threadIdx.x; s < top_k; s += kThreads) out[i * top_k + s] = -1.0f;
        return;
    }
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t n_cached = visible < kCachedKeys ? visible : kCachedKeys;
    for (int64_t j = threadIdx.x; j < n_cached; j += kThreads) cached[j] = score_key(row[j]);
    __syncthreads();
    const auto key_at = [&](int64_t j) { return j < n_cached ? cached[j] : score_key(row[j]); };

    // 1. The key T of the want-th largest score, digit by digit from the top.
    uint32_t prefix = 0, prefix_mask = 0, remaining = want;
    for (int shift = kKeyBits - kDigitBits; shift >= 0; shift -= kDigitBits) {
        for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
        __syncthreads();
        for (int64_t base = 0; base < visible; base += kThreads) {
            const int64_t j = base + threadIdx.x;
            uint32_t digit = kNoDigit;
            if (j < visible) {
                const uint32_t key = key_at(j);
                if ((key & prefix_mask) == prefix) digit = (key >> shift) & kDigitMask;
            }
            // One atomic per distinct digit in the warp: scores often share their top bits.
            const unsigned peers = __match_any_sync(kFullMask, digit);
            if (digit != kNoDigit && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
        }
        __syncthreads();
        prefix |= digit_find(hist, remaining, found) << shift;
        prefix_mask |= kDigitMask << shift;
    }
    const uint32_t threshold = prefix, ties_wanted = remaining, above_wanted = want - remaining;

    // 2. Every score above T (any order: the sort decides), then the first ties_wanted equal to T.
    if (threadIdx.x == 0) above_count = ties_taken = 0;
    __syncthreads();
    for (int64_t base = 0; base < visible; base += kThreads) {
        const int64_t j = base + threadIdx.x;
        const uint32_t key = j < visible ? key_at(j) : 0;
        const bool tie = j < visible && key == threshold;
        if (j < visible && key > threshold) picked[atomicAdd(&above_count, 1u)] = sort_word(key, j);
        const unsigned ballot = __ballot_sync(kFullMask, tie);
        if (lane == 0) warp_ties[warp] = __popc(ballot);
        __syncthreads();
        uint32_t rank = ties_taken + __popc(ballot & ((1u << lane) - 1u));
        for (int w = 0; w < warp; ++w) rank += warp_ties[w];
        if (tie && rank < ties_wanted) picked[above_wanted + rank] = sort_word(key, j);
        __syncthreads();
        if (threadIdx.x == 0)
            for (int w = 0; w < kWarps; ++w) ties_taken += warp_ties[w];
        __syncthreads();
    }

    // 3. Sort the want picked words (padded to a power of two) and write their positions.
    uint32_t width = 1;
    while (width < want) width *= 2;
    for (uint32_t s = want + threadIdx.x; s < width; s += kThreads) picked[s] = kEmptySlot;
    __syncthreads();
    for (uint32_t size = 2; size <= width; size *= 2) {
        for (uint32_t stride = size / 2; stride > 0; stride /= 2) {
            for (uint32_t s = threadIdx.x; s < width; s += kThreads) {
                const uint32_t partner = s ^ stride;
                if (partner <= s) continue;
                const bool ascending = (s & size) == 0;
                const uint64_t a = picked[s], b = picked[partner];
                if ((a > b) == ascending) {
                    picked[s] = b;
                    picked[partner] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int s = threadIdx.x; s < top_k; s += kThreads)  // the low half of a sort word is the position
        out[i * top_k + s] =
            s < static_cast<int>(want) ? static_cast<float>(static_cast<uint32_t>(picked[s])) : -1.0f;
}

}  // namespace

void dsa_topk(const float* scores, int64_t n, int64_t total, int64_t pos0, int ratio, int top_k, float* out,
              cudaStream_t s) {
    if (n == 0) return;
    const size_t smem = static_cast<size_t>(total < kCachedKeys ? total : kCachedKeys) * sizeof(uint32_t);
    cuda_check(cudaFuncSetAttribute(dsa_topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "dsa_topk shared memory");
    dsa_topk_kernel<<<static_cast<unsigned>(n), kThreads, smem, s>>>(scores, total, pos0, ratio, top_k, out);
    cuda_check(cudaGetLastError(), "dsa_topk launch");
}

}  // namespace coli::cuda
