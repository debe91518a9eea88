// Decode GEMV for every weight format: y[t] = W x[t] for a few tokens, reading W once.
//
// One warp computes R rows. Each lane takes every 32nd 16-byte chunk of codes of its R rows (R loads in
// flight, streamed past L1), decodes each 32-bit word with the format's Codec and multiplies it with the
// matching x of up to NT tokens, loaded once for the R rows. Chunk-scaled formats (int4 group, mxfp4
// block, fp8 block) scale each chunk's partial sums; the int8 row scale multiplies the row's sum. Rows that
// are not whole chunks take the scalar kernel.
//
// gemv_batch runs the same warp code over several matrices in one launch (blockIdx.y picks the job): the
// experts of a MoE layer in decode, where one launch per matrix would cost more than reading it; a single
// matrix is a batch of one. It is a dependent launch (dependent_launch.cuh): its blocks start as the launch
// before it drains and issue their first weight loads before waiting for its output.
//
// int4-g64, mxfp4 and fp8-e4m3-block go to the tensor-core GEMV (gemv_mma.cu) wherever it takes them: here
// they are bound by instruction issue. The kernels below keep the other formats (memory-bound, or int8,
// where they measured faster) and the shapes gemv_mma does not take.
#include <algorithm>

#include "backend/cuda/codec.cuh"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"

namespace coli::cuda {
namespace {

constexpr int kGemvBatchMax = 64;  // jobs per launch: they travel as kernel parameters, by value
struct GemvBatch {
    GemvJob jobs[kGemvBatchMax];  // the first `count` are used
    int count = 0;                // jobs in this launch
};

constexpr int kGemvThreads = 256;                     // threads per GEMV block
constexpr int kWarpsPerBlock = kGemvThreads / kWarp;  // warps per GEMV block
constexpr int kWordsPerChunk = 4;                     // 32-bit words in a 16-byte chunk
constexpr int kTargetWarpsPerSm = 16;                 // resident warps that keep enough loads in flight

// Rows per warp: more rows share each x load and keep more weight loads in flight; fewer leave registers
// for the per-token sums of larger token groups.
template <int NT>
__host__ __device__ constexpr int rows_per_warp() {
    return NT <= 2 ? 4 : 2;
}

template <Format F>
__host__ __device__ constexpr int chunk_elems() {
    return kWordsPerChunk * Codec<F>::kWordElems;
}

// x of up to NT tokens; load() gives the EW values of one word: token t from column col.
struct XGlobal {
    const float* __restrict__ x;  // [n, cols] in global memory
    int64_t cols;                 // row stride of x
    template <int EW>
    __device__ __forceinline__ void load(int t, int64_t col, float* xv) const {
        const float* xt = x + t * cols + col;
        if constexpr (EW == 1) {
            xv[0] = __ldg(xt);
        } else if constexpr (EW == 2) {
            const float2 a = __ldg(reinterpret_cast<const float2*>(xt));
            xv[0] = a.x;
            xv[1] = a.y;
        } else {
#pragma unroll
            for (int i = 0; i < EW / 4; ++i) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(xt) + i);
                xv[4 * i] = a.x;
                xv[4 * i + 1] = a.y;
                xv[4 * i + 2] = a.z;
                xv[4 * i + 3] = a.w;
            }
        }
    }
};

__device__ __forceinline__ uint32_t word_of(const uint4& q, int i) {
    return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// One chunk of R rows (codes q, chunk scales s) times the matching x of n <= NT tokens, into acc.
template <Format F, int NT, int R>
__device__ __forceinline__ void chunk_accumulate(const uint4 (&q)[R], const float (&s)[R], const XGlobal& xs,
                                                 int n, int64_t c, const Consts& k, float (&acc)[R][NT]) {
    using C = Codec<F>;
    constexpr int EW = C::kWordElems, E = chunk_elems<F>();
    float part[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) part[r][t] = 0.0f;
#pragma unroll
    for (int i = 0; i < kWordsPerChunk; ++i) {
        float v[R][EW];
#pragma unroll
        for (int r = 0; r < R; ++r) C::word_decode(word_of(q[r], i), k, v[r]);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t >= n) break;
            float xv[EW];
            xs.template load<EW>(t, c * E + i * EW, xv);
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int e = 0; e < EW; ++e) part[r][t] = fmaf(v[r][e], xv[e], part[r][t]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if constexpr (C::kChunkScale)
                acc[r][t] = fmaf(part[r][t] * C::kPreScale, s[r], acc[r][t]);
            else
                acc[r][t] += part[r][t];
        }
}

// The chunks part, part + parts, ... (of 32 each, one per lane) of rows [r0, r0 + R) (those below w.rows; r0
// is one) for n <= NT tokens, by one warp: acc gets each lane's partial sums. The next chunk's loads are
// issued before the current chunk is computed, so memory latency overlaps arithmetic; the first before
// waiting for the launch before (x is its output).
template <Format F, int NT, int R>
__device__ __forceinline__ void rows_partial(const DeviceWeight& w, const XGlobal& xs, int n, int64_t r0,
                                             int lane, int part, int parts, const Consts& k,
                                             float (&acc)[R][NT]) {
    using C = Codec<F>;
    const int64_t chunks = w.cols / chunk_elems<F>();
    const int64_t row_bytes = chunks * static_cast<int64_t>(sizeof(uint4));
    const uint4* rows[R];
    const void* scale_rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int64_t row = r0 + r < w.rows ? r0 + r : r0;  // past the end: read a valid row, drop its sums
        rows[r] = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + row * row_bytes);
        scale_rows[r] = C::kChunkScale ? scale_row<F>(w, row) : nullptr;
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

    const int64_t step = static_cast<int64_t>(kWarp) * parts;
    int64_t c = static_cast<int64_t>(part) * kWarp + lane;
    uint4 q[R];
    float s[R];
    auto load = [&](int64_t cc, uint4(&qq)[R], float(&ss)[R]) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            qq[r] = __ldcs(rows[r] + cc);
            ss[r] = C::kChunkScale ? chunk_scale<F>(scale_rows[r], cc) : 1.0f;
        }
    };
    if (c < chunks) load(c, q, s);
    grid_dependency_wait();
    for (; c < chunks; c += step) {
        uint4 qn[R];
        float sn[R];
        if (c + step < chunks) load(c + step, qn, sn);
        chunk_accumulate<F, NT, R>(q, s, xs, n, c, k, acc);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            q[r] = qn[r];
            s[r] = sn[r];
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
}

// Adds the `parts` warps' sums of each row group of the block (in part order) and writes y. Every thread of
// the block calls it (it synchronizes); `active` is false for warps past the last row.
template <Format F, int NT, int R>
__device__ __forceinline__ void rows_finish(const DeviceWeight& w, int n, float* __restrict__ y, int64_t r0,
                                            bool active, int part, int parts, const float (&acc)[R][NT]) {
    __shared__ float sums[kWarpsPerBlock][R][NT];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (parts > 1) {
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int t = 0; t < NT; ++t) sums[warp][r][t] = acc[r][t];
        __syncthreads();
    }
    if (!active || part != 0 || lane != 0) return;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int64_t row = r0 + r;
        if (row >= w.rows) break;
        const float row_scale = F == Format::int8_row ? scale_at(w.scales, row) : 1.0f;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t >= n) break;
            float sum = acc[r][t];
            for (int p = 1; p < parts; ++p) sum += sums[warp + p][r][t];
            y[t * w.rows + row] = F == Format::int8_row ? sum * row_scale : sum;
        }
    }
}

// Block b, warp `warp`: rows from r0 (row group warp / parts), chunk part warp % parts.
template <Format F, int NT>
__device__ __forceinline__ void block_gemv(const DeviceWeight& w, const float* __restrict__ x, int n,
                                           float* __restrict__ y, int parts, const Consts& k) {
    constexpr int R = rows_per_warp<NT>();
    const int warp = threadIdx.x / kWarp, part = warp % parts;
    const int64_t groups_per_block = kWarpsPerBlock / parts;
    const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * groups_per_block + warp / parts) * R;
    const bool active = r0 < w.rows;
    float acc[R][NT];
    if (active)
        rows_partial<F, NT, R>(w, XGlobal{x, w.cols}, n, r0, threadIdx.x % kWarp, part, parts, k, acc);
    rows_finish<F, NT, R>(w, n, y, r0, active, part, parts, acc);
}

template <Format F, int NT>
__global__ void __launch_bounds__(kGemvThreads) gemv_batch_chunked(GemvBatch batch, int parts, Consts k) {
    grid_dependents_launch();  // the next kernel's blocks may take the SMs this grid leaves
    const GemvJob& job = batch.jobs[blockIdx.y];
    block_gemv<F, NT>(job.w, job.x, job.n, job.y, parts, k);
}

// Any shape: one warp per row, one element per lane at a time.
template <int NT>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_scalar(DeviceWeight w, const float* __restrict__ x, int n, float* __restrict__ y) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (r >= w.rows) return;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int64_t c = lane; c < w.cols; c += kWarp) {
        const float v = decode_at(w, r, c);
#pragma unroll
        for (int t = 0; t < NT; ++t)
            if (t < n) acc[t] = fmaf(v, x[t * w.cols + c], acc[t]);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0 && t < n) y[t * w.rows + r] = s;
    }
}

// Calls f with the smallest token-group size NT >= n as a compile-time constant.
template <typename Fn>
void tokens_dispatch(int n, Fn&& fn) {
    if (n == 1) return fn(std::integral_constant<int, 1>{});
    if (n == 2) return fn(std::integral_constant<int, 2>{});
    if (n <= 4) return fn(std::integral_constant<int, 4>{});
    return fn(std::integral_constant<int, static_cast<int>(kCudaGemvMaxTokens)>{});
}

unsigned blocks_for(int64_t rows, int rows_per_warp) {
    const int64_t per_block = static_cast<int64_t>(kWarpsPerBlock) * rows_per_warp;
    return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

// Grid of a chunked GEMV over `jobs` matrices of up to `rows` rows of `chunks` chunks.
struct GemvGrid {
    unsigned blocks;  // blocks per matrix
    int parts;        // warps that split each row group's chunks
};

// Splits rows across warps until the device holds kTargetWarpsPerSm warps per SM (while every lane keeps a
// chunk): short, wide matrices otherwise leave most SMs idle.
template <Format F, int NT>
GemvGrid grid_plan(int64_t rows, int64_t cols, int64_t jobs) {
    const int sms = sm_count();
    constexpr int R = rows_per_warp<NT>();
    const int64_t groups = (rows + R - 1) / R, chunks = cols / chunk_elems<F>();
    int parts = 1;
    while (parts < kWarpsPerBlock && groups * jobs * parts < static_cast<int64_t>(kTargetWarpsPerSm) * sms &&
           chunks >= 2LL * kWarp * parts)
        parts *= 2;
    const int64_t groups_per_block = kWarpsPerBlock / parts;
    return {static_cast<unsigned>((groups + groups_per_block - 1) / groups_per_block), parts};
}

bool chunks_fit(const DeviceWeight& w) {
    bool fits = false;
    format_dispatch(w.format,
                    [&](auto format) { fits = w.cols % chunk_elems<decltype(format)::value>() == 0; });
    return fits;
}

int max_tokens(const GemvJob* jobs, int count) {
    int n = 1;
    for (int i = 0; i < count; ++i) n = std::max(n, jobs[i].n);
    return n;
}

// One group of n <= kCudaGemvMaxTokens tokens: a batch of one (the tensor-core kernel where it takes w, else
// the chunked one) where rows are whole chunks, else the scalar kernel.
void gemv_group(const DeviceWeight& w, const float* x, int n, float* y, cudaStream_t s) {
    if (chunks_fit(w)) {
        const GemvJob job{w, x, y, n};
        return gemv_batch(&job, 1, s);
    }
    tokens_dispatch(n, [&](auto tokens) {
        constexpr int NT = decltype(tokens)::value;
        gemv_scalar<NT><<<blocks_for(w.rows, 1), kGemvThreads, 0, s>>>(w, x, n, y);
    });
}

void jobs_check(const GemvJob* jobs, int count) {
    for (int i = 0; i < count; ++i)
        if (jobs[i].w.format != jobs[0].w.format || jobs[i].n < 1 || jobs[i].n > kCudaGemvMaxTokens ||
            !chunks_fit(jobs[i].w))
            cuda_check(cudaErrorInvalidValue,
                       "gemv_batch: jobs must share a format, take 1 to kCudaGemvMaxTokens tokens and have "
                       "rows of whole chunks");
}

}  // namespace

void gemv(const DeviceWeight& w, const float* x, int64_t n, float* y, cudaStream_t s) {
    if (w.rows == 0) return;
    for (int64_t t0 = 0; t0 < n; t0 += kCudaGemvMaxTokens) {  // one pass over the weights per group of tokens
        const int nt = static_cast<int>(n - t0 < kCudaGemvMaxTokens ? n - t0 : kCudaGemvMaxTokens);
        gemv_group(w, x + t0 * w.cols, nt, y + t0 * w.rows, s);
        cuda_check(cudaGetLastError(), "gemv launch");
    }
}

int sm_count() {
    static const int sms = [] {
        int device = 0, count = 1;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
        return count;
    }();
    return sms;
}

bool gemv_batch_fits(const DeviceWeight& w) {
    return chunks_fit(w);
}

void gemv_batch(const GemvJob* jobs, int count, cudaStream_t s) {
    if (count == 0) return;
    jobs_check(jobs, count);
    const int n = max_tokens(jobs, count);
    if (std::all_of(jobs, jobs + count, [&](const GemvJob& j) { return gemv_mma_fits(j.w, n); }))
        return gemv_mma(jobs, count, s);
    for (int first = 0; first < count; first += kGemvBatchMax) {
        GemvBatch batch;
        batch.count = count - first < kGemvBatchMax ? count - first : kGemvBatchMax;
        int64_t max_rows = 0, max_cols = 0;
        int max_n = 1;
        for (int i = 0; i < batch.count; ++i) {
            const GemvJob& j = jobs[first + i];
            batch.jobs[i] = j;
            max_rows = j.w.rows > max_rows ? j.w.rows : max_rows;
            max_cols = j.w.cols > max_cols ? j.w.cols : max_cols;
            max_n = j.n > max_n ? j.n : max_n;
        }
        format_dispatch(jobs[0].w.format, [&](auto format) {
            constexpr Format F = decltype(format)::value;
            tokens_dispatch(max_n, [&](auto tokens) {
                constexpr int NT = decltype(tokens)::value;
                const GemvGrid g = grid_plan<F, NT>(max_rows, max_cols, batch.count);
                const dim3 grid(g.blocks, static_cast<unsigned>(batch.count));
                cuda_check(launch_dependent(gemv_batch_chunked<F, NT>, grid, dim3(kGemvThreads), 0, s, batch,
                                            g.parts, kConsts),
                           "gemv_batch launch");
            });
        });
        cuda_check(cudaGetLastError(), "gemv_batch launch");
    }
}

}  // namespace coli::cuda
