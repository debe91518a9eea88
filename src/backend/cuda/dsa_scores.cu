// The scoring half of the DSA lightning indexer (backend.h dsa_select): for query i and every visible key s,
//   I(s) = sum_h weights[i][h] weight_scale relu(scale q_h(i) . key(s)).
// Block (tile of kWarp keys, query): the query's heads and the keys in shared memory, a lane per key and
// each warp scoring a share of the heads with float4 loads (a broadcast query row and a padded key row per
// lane), then the warps' partial sums added in warp order. Small tiles: many blocks in flight per SM.
//
// index_topk's scores over compressed keys (index_scores) are compared with the CPU's bit for bit (the
// top-k they choose must be the same), so they take the CPU's order instead: one thread per key, each dot
// product one running sum over the dims and the heads' terms added in head order, every product and sum
// rounded apart (the CPU's loops have no fused multiply-add). A block's keys pass through shared memory,
// transposed so that the threads' reads of one dim fall in distinct banks.
#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;             // threads per block
constexpr int kWarps = kThreads / kWarp;  // warps per block
constexpr int kHeadsPerThread = 8;        // dot products one thread accumulates per pass over a key
constexpr int kHeadsPerPass = kWarps * kHeadsPerThread;  // heads the block covers per pass over a key
constexpr int kVec = 4;                                  // floats per float4
constexpr int kKeyPad = kVec;   // key rows padded by one float4: the lanes' rows start in distinct banks
constexpr int kIndexKeys = 64;  // keys (threads) of an index_scores block
// A dim's row of the transposed key tile, padded by one float: the fill's writes of consecutive dims fall in
// distinct banks; the tile of kCudaIndexMaxHeadDim dims fits the 48 KB every device gives without opting in.
constexpr int kIndexTileStride = kIndexKeys + 1;
constexpr int64_t kMaxGridRows = 65535;  // query rows of one index_scores launch: the grid's y dimension

static_assert(kCudaIndexMaxHeadDim * kIndexTileStride * sizeof(float) <= 48 * 1024, "index_scores tile size");

// Shared memory of one block: the query's heads, a padded key sub-tile and the warps' partial sums.
size_t smem_bytes(const DsaArgs& a) {
    return (static_cast<size_t>(a.n_heads) * a.head_dim + kWarp * (a.head_dim + kKeyPad) + kWarps * kWarp) *
           sizeof(float);
}

__global__ void __launch_bounds__(kThreads)
    dsa_scores_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                      const float* __restrict__ keys, int64_t pos0, int64_t total, DsaArgs a,
                      float* __restrict__ scores) {
    extern __shared__ float smem[];
    const int64_t i = blockIdx.y, visible = pos0 + i + 1;
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kWarp;
    if (t0 >= visible) return;  // causal: a whole block past this query's last key
    const int64_t count = visible - t0 < kWarp ? visible - t0 : kWarp;
    const int dim = a.head_dim, stride = dim + kKeyPad, q_vecs = a.n_heads * dim / kVec;
    float* qs = smem;                                       // [n_heads, head_dim]
    float* ks = qs + static_cast<size_t>(a.n_heads) * dim;  // [kWarp, head_dim + kKeyPad]
    float* partial = ks + kWarp * stride;                   // [kWarps, kWarp]
    const float4* qi = reinterpret_cast<const float4*>(q + i * a.n_heads * dim);
    for (int j = threadIdx.x; j < q_vecs; j += kThreads) reinterpret_cast<float4*>(qs)[j] = qi[j];
    for (int j = threadIdx.x; j < count * dim; j += kThreads)
        ks[(j / dim) * stride + j % dim] = keys[t0 * dim + j];
    __syncthreads();
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const float* wi = weights + i * a.n_heads;

    // Lane = key, warp = heads warp, warp + kWarps, ...: the query row is the same for the whole warp.
    const float4* key = reinterpret_cast<const float4*>(ks + lane * stride);
    float sum = 0.0f;
    for (int h0 = 0; h0 < a.n_heads; h0 += kHeadsPerPass) {
        float dot[kHeadsPerThread] = {};
        for (int d = 0; d < dim / kVec; ++d) {
            const float4 k = key[d];
#pragma unroll
            for (int j = 0; j < kHeadsPerThread; ++j) {
                const int h = h0 + warp + j * kWarps;
                if (h >= a.n_heads) break;
                const float4 qv = reinterpret_cast<const float4*>(qs + h * dim)[d];
                dot[j] = fmaf(qv.x, k.x, fmaf(qv.y, k.y, fmaf(qv.z, k.z, fmaf(qv.w, k.w, dot[j]))));
            }
        }
#pragma unroll
        for (int j = 0; j < kHeadsPerThread; ++j) {
            const int h = h0 + warp + j * kWarps;
            if (h >= a.n_heads) break;
            sum += wi[h] * a.weight_scale * fmaxf(dot[j] * a.scale, 0.0f);
        }
    }
    partial[warp * kWarp + lane] = sum;
    __syncthreads();
    if (warp == 0 && lane < count) {
        float total_score = 0.0f;
        for (int w = 0; w < kWarps; ++w) total_score += partial[w * kWarp + lane];
        scores[i * total + t0 + lane] = total_score;
    }
}

// Row i of scores: the keys e < (pos0 + i + 1) / ratio, a block of kIndexKeys keys per blockIdx.x.
__global__ void __launch_bounds__(kIndexKeys)
    index_scores_kernel(const float* __restrict__ q, const float* __restrict__ weights,
                        const float* __restrict__ keys, int64_t i0, int64_t pos0, int ratio, int64_t total,
                        DsaArgs a, float* __restrict__ scores) {
    extern __shared__ float tile[];  // [head_dim, kIndexTileStride]: the block's keys, transposed
    const int64_t i = i0 + blockIdx.y, visible = (pos0 + i + 1) / ratio;
    const int64_t e0 = static_cast<int64_t>(blockIdx.x) * kIndexKeys;
    if (e0 >= visible) return;  // the whole block past this query's last key
    const int count = static_cast<int>(visible - e0 < kIndexKeys ? visible - e0 : kIndexKeys);
    const int dim = a.head_dim;
    for (int x = threadIdx.x; x < count * dim; x += kIndexKeys)
        tile[(x % dim) * kIndexTileStride + x / dim] = keys[e0 * dim + x];
    __syncthreads();
    const int e = threadIdx.x;
    if (e >= count) return;
    const float* qi = q + i * a.n_heads * dim;
    const float* wi = weights + i * a.n_heads;
    float sum = 0.0f;
    for (int h = 0; h < a.n_heads; ++h) {
        float dot = 0.0f;
        for (int d = 0; d < dim; ++d)
            dot = __fadd_rn(dot, __fmul_rn(__ldg(qi + h * dim + d), tile[d * kIndexTileStride + e]));
        const float qk = __fmul_rn(dot, a.scale);
        sum = __fadd_rn(sum, __fmul_rn(__fmul_rn(wi[h], a.weight_scale), fmaxf(qk, 0.0f)));
    }
    scores[i * total + e0 + e] = sum;
}

}  // namespace

void index_scores(const float* q, const float* weights, const float* keys, int64_t n, int64_t pos0, int ratio,
                  const DsaArgs& a, float* scores, cudaStream_t s) {
    const int64_t total = (pos0 + n) / ratio;
    if (n == 0 || total == 0) return;
    const size_t smem = static_cast<size_t>(a.head_dim) * kIndexTileStride * sizeof(float);
    const auto blocks = static_cast<unsigned>((total + kIndexKeys - 1) / kIndexKeys);
    for (int64_t i0 = 0; i0 < n; i0 += kMaxGridRows) {
        const auto rows = static_cast<unsigned>(n - i0 < kMaxGridRows ? n - i0 : kMaxGridRows);
        index_scores_kernel<<<dim3(blocks, rows), kIndexKeys, smem, s>>>(q, weights, keys, i0, pos0, ratio,
                                                                         total, a, scores);
        cuda_check(cudaGetLastError(), "index_scores launch");
    }
}

size_t dsa_scores_smem_bytes(const DsaArgs& a) {
    return smem_bytes(a);
}

void dsa_scores(const float* q, const float* weights, const float* keys, int64_t n, int64_t pos0,
                const DsaArgs& a, float* scores, cudaStream_t s) {
    if (n == 0) return;
    const size_t smem = smem_bytes(a);
    cuda_check(cudaFuncSetAttribute(dsa_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "dsa_scores shared memory");
    const int64_t tiles = (pos0 + n + kWarp - 1) / kWarp;
    dsa_scores_kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(n)), kThreads, smem, s>>>(
        q, weights, keys, pos0, pos0 + n, a, scores);
    cuda_check(cudaGetLastError(), "dsa_scores launch");
}

}  // namespace coli::cuda
