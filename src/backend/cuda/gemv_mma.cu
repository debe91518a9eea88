// Decode GEMV on the tensor cores for int4-g64, mxfp4 and fp8-e4m3-block: y[t] = W x[t] for a few tokens,
// reading W once.
//
// On the FMA pipes these formats are bound by instruction issue, not memory: every weight costs a decode and
// an FMA with x in f32. Here mma.sync m16n8k16 (f16 inputs, f32 accumulation) does the multiply-adds of 16
// rows x 16 weights per instruction, and a weight costs only its decode to an exact f16 (pair_codec.cuh).
//
// One warp computes RT tiles of 16 rows; lane = 4 g + q holds rows g and g + 8 of each.
//   A (weights): a superblock (SB) is 4 chunks of 16 bytes of each row; lane q of a quad loads chunk q of
//     its two rows and uses the decoded f16 pairs as its A-fragment slots as they come. A dot product does
//     not care about the order of k inside an mma, as long as B uses the same order, and this order depends
//     only on q and the slot, never on the row.
//   B (x): x = hi + lo, both f16, after scaling each SB's x by the power of two that puts its largest |x| in
//     [2^14, 2^15): exact to ~2^-22 relative to that SB's largest |x|, no overflow, no subnormal loss. The
//     inverse scale joins the weights' scale of the SB, in f32. x is laid out in the A order (XLayout: each
//     thread loads whole chunks of x at once and writes their entries), so that a lane gets its B fragment
//     from shared memory with one 8-byte load, shared by the warp's RT tiles. Each block lays it out itself
//     (x_table_build), or, in 4-bit launches of more than one wave over wide rows, x_table_kernel lays it
//     out once per launch in global memory and each block copies it (mma_run: when each pays).
//   Columns n of the mma: n = 2 (token_local G + group) + part (hi, lo). The G scale groups of an SB (int4:
//     2 of 64, mxfp4: 4 blocks of 32; fp8: 1) go to separate columns, so one mma spans the SB and each
//     group's partial sum comes out separately, to be scaled in f32; free columns carry more tokens. Lanes
//     whose column is not in use read zeros from a zero region.
//   C is zeroed every SB and added to f32 sums with round-to-nearest: the tensor core's truncating
//     accumulation never runs over more than one SB.
// Loads: each warp keeps stages<NT, RT>() - 1 SBs of codes in flight with cp.async (global -> its own ring in
// shared memory, past L1; no registers held while in flight) and their scales in a ring of registers. The
// kernel is a dependent launch (dependent_launch.cuh): its blocks take the SMs that the launch before it
// leaves in its tail and issue their first stages before waiting for that launch's output (x, or its layout),
// then lay x out or copy its layout (docs/benchmarks.md: what that gains). A block's warps split rows into
// groups of 16 RT and each group's SBs into `parts` interleaved ranges; partial sums meet in shared memory
// and are added in part order (deterministic). One-tile warps of up to 4 tokens (small launches: a single
// matrix) get a ring twice as deep and fewer parts, so that the grid is one wave whose warps issue most of
// their loads at once.
//
// int8 stays on the FMA kernel (gemv.cu): its decode is light, and there this kernel measured slower.
#include <cuda_fp16.h>

#include <algorithm>
#include <memory>

#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"
#include "backend/cuda/pair_codec.cuh"

namespace coli::cuda {
namespace {

constexpr int kMmaThreads = 256;                // threads per block
constexpr int kMmaWarps = kMmaThreads / kWarp;  // warps per block
constexpr int kMmaMinBlocks = 2;                // resident blocks per SM the registers are budgeted for
constexpr int kSelfLayoutMinBlocks = 3;         // ... for the blocks mma_min_blocks names
constexpr int64_t kSelfLayoutMaxCols = 4096;    // rows up to this wide: blocks lay x out themselves (mma_run)
constexpr int kTileRows = 16;                   // rows of an m16n8k16 tile
constexpr int kHalfRows = 8;                    // a lane's rows: g and g + 8
constexpr int kMmaCols = 8;                     // n of the mma
constexpr int kQuad = 4;                        // lanes that share a row: one chunk of an SB each
constexpr int kChunkBytes = 16;                 // one load of codes
constexpr int kWordsPerChunk = kChunkBytes / 4;          // 32-bit words in a chunk
constexpr int kSlotsPerMma = 4;                          // weights of one row a lane holds per mma
constexpr int kXParts = 2;                               // x = hi + lo
constexpr int kEntryBytes = kXParts * kSlotsPerMma * 2;  // one lane position's B of one mma: 4 hi, 4 lo f16
constexpr int kPartBytes = kSlotsPerMma * 2;             // the hi (or lo) half of an entry
constexpr int kXTop = 14;                // x is scaled so that its largest |x| lies in [2^kXTop, 2^(kXTop+1))
constexpr int kBankHalf = 64;            // table offset from the zero region: their reads use disjoint banks
constexpr int kTwoTileMaxTokens = 2;     // more tokens' sums leave no registers for a second tile per warp
constexpr int kMaxJobs = 64;             // jobs per launch: they travel as kernel parameters, by value
constexpr size_t kSmemMax = 112 * 1024;  // dynamic shared memory per block: two blocks fit an SM's 227 KB
constexpr int kF32ExpBias = 127;
constexpr int kF32ExpMax = 0xff;

constexpr int kDeepRingMaxTokens = 4;  // more tokens' sums leave no registers for a deep ring

// Whether warps of RT tiles for NT tokens get the deep ring.
template <int NT, int RT>
__host__ __device__ constexpr bool deep_ring() {
    return RT == 1 && NT <= kDeepRingMaxTokens;
}

// Ring stages of a warp, stages - 1 in flight: HBM wants >32 KB per SM. One-tile warps get twice the stages
// in the same bytes (and the same registers for the scale ring) where registers allow.
template <int NT, int RT>
__host__ __device__ constexpr int stages() {
    return deep_ring<NT, RT>() ? 8 : 4;
}

// The geometry of one format's superblock.
template <Format F>
struct Sb {
    using Codec = PairCodec<F>;
    static constexpr int kChunkElems = kWordsPerChunk * Codec::kWordElems;  // 32 (4-bit) or 16 (fp8)
    static constexpr int kCols = kQuad * kChunkElems;                       // 128 or 64
    static constexpr int kMmas = kChunkElems / kSlotsPerMma;                // per row tile: 8 or 4
    // Scale groups of an SB, each in its own mma columns.
    static constexpr int kGroups = F == Format::int4_g64 ? kCols / kInt4Group
                                   : F == Format::mxfp4  ? kCols / kMxBlock
                                                         : 1;
    static constexpr int kTokensPerMma = kMmaCols / (kXParts * kGroups);
    static constexpr int kTableBytes = kCols * kXParts * 2;  // B of one SB for one token
};

// Column (within its chunk) of the weight in slot e (0..3) of mma i of a lane: slots 0, 1 are the halves of
// pair 2i (fragment registers a0 / a1), slots 2, 3 those of pair 2i + 1 (a2 / a3).
template <Format F>
__host__ __device__ constexpr int slot_col(int i, int e) {
    using C = PairCodec<F>;
    const int pair = 2 * i + e / 2;
    return pair / C::kPairsPerWord * C::kWordElems + C::pair_col(pair % C::kPairsPerWord, e % 2);
}

struct MmaBatch {
    GemvJob jobs[kMaxJobs];           // the first `count` are used
    const uint8_t* tables[kMaxJobs];  // each job's laid-out x (x_table_kernel)
    int count = 0;
};

// Bytes of one warp's code ring: [stage][tile][row half][lane] 16-byte chunks.
template <int NT, int RT>
__host__ __device__ constexpr int ring_bytes() {
    return stages<NT, RT>() * RT * 2 * kWarp * kChunkBytes;
}

// The x of NT tokens laid out for a row of `cols`: the B tables (one per token) and the inverse x scales
// ([token][SB] floats), from `table`; built once per launch in global memory (x_table_kernel) and copied as
// one block of `bytes` (whole 16-byte chunks) into each block's shared memory.
template <Format F, int NT>
struct XLayout {
    int64_t sbs;          // SBs of a row
    int64_t table_bytes;  // per token
    int64_t inv_scale;    // from the start of the tables
    int64_t bytes;
    __host__ __device__ explicit XLayout(int64_t cols) {
        const int64_t chunks = cols / Sb<F>::kChunkElems;
        sbs = (chunks + kQuad - 1) / kQuad;
        table_bytes = sbs * Sb<F>::kTableBytes;
        inv_scale = NT * table_bytes;
        const int64_t end = inv_scale + NT * sbs * static_cast<int64_t>(sizeof(float));
        bytes = (end + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
    }
};

// Shared memory of one block, in bytes from the dynamic base: the warps' code rings, the zero region, the x
// (XLayout) and the partial sums of every warp.
template <Format F, int NT, int RT>
struct SmemLayout {
    XLayout<F, NT> x;
    int64_t ring = 0, zero, table, inv_scale, sums, total;
    __host__ __device__ explicit SmemLayout(int64_t cols) : x(cols) {
        zero = ring + static_cast<int64_t>(kMmaWarps) * ring_bytes<NT, RT>();
        table = zero + Sb<F>::kTableBytes + kBankHalf;
        inv_scale = table + x.inv_scale;
        sums = table + x.bytes;
        total = sums + static_cast<int64_t>(kMmaWarps) * NT * kTileRows * RT * sizeof(float);
    }
};

__device__ __forceinline__ uint32_t word_of(const uint4& c, int i) {
    return i == 0 ? c.x : i == 1 ? c.y : i == 2 ? c.z : c.w;
}

// The largest v of the lane's quad (the lanes that hold one SB's chunks).
__device__ __forceinline__ float quad_max(float v) {
    for (int o = kQuad / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}

// d = A B + c for one m16n8k16 tile (f16 A, B; f32 accumulation).
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                        const float (&c)[4]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}

// The power of two k with 2^k max_abs in [2^kXTop, 2^(kXTop+1)); 0 for zero, subnormal or non-finite maxima.
__device__ __forceinline__ int x_scale_exp(float max_abs) {
    const int e = static_cast<int>(__float_as_uint(max_abs) >> 23);
    if (e == 0 || e >= kF32ExpMax) return 0;
    return min(kXTop - (e - kF32ExpBias), kF32ExpBias);
}

// Lays out chunk ch of token t's x (the thread's; all 4 lanes of its quad run it, for the shuffles, chunks
// past the row read as zeros and past the table are not written): the chunk's x in registers (one round of
// loads), the SB's power of two from the quad, then the chunk's kMmas 16-byte entries of `table` (4 hi f16,
// then 4 lo f16, of the columns slot_col(i, 0..3) of chunk q of the SB, scaled), and the SB's inverse scale
// (quad lane 0).
template <Format F, int NT>
__device__ __forceinline__ void x_chunk_layout(const float* xt, int64_t ch, int64_t chunks,
                                               const XLayout<F, NT>& l, int t, uint8_t* tables) {
    using S = Sb<F>;
    constexpr int kVecs = S::kChunkElems / 4;  // float4s of x per chunk
    const float4* x4 = reinterpret_cast<const float4*>(xt);
    float v[S::kChunkElems];
    float max_abs = 0.0f;
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
        const float4 f = ch < chunks ? x4[ch * kVecs + j] : make_float4(0, 0, 0, 0);
        v[4 * j] = f.x;
        v[4 * j + 1] = f.y;
        v[4 * j + 2] = f.z;
        v[4 * j + 3] = f.w;
        max_abs = fmaxf(max_abs, fmaxf(fmaxf(fabsf(f.x), fabsf(f.y)), fmaxf(fabsf(f.z), fabsf(f.w))));
    }
    const int k = x_scale_exp(quad_max(max_abs));
    if (ch >= l.sbs * kQuad) return;
    const float scale = scalbnf(1.0f, k);
    const int64_t sb = ch / kQuad;
    const int q = static_cast<int>(ch % kQuad);
    if (q == 0) reinterpret_cast<float*>(tables + l.inv_scale)[t * l.sbs + sb] = scalbnf(1.0f, -k);
    uint4* table = reinterpret_cast<uint4*>(tables + t * l.table_bytes);
#pragma unroll
    for (int i = 0; i < S::kMmas; ++i) {
        uint32_t hl[kSlotsPerMma];  // hi pair 0, hi pair 1, lo pair 0, lo pair 1
#pragma unroll
        for (int e = 0; e < kSlotsPerMma; e += 2) {
            const float a = v[slot_col<F>(i, e)] * scale, b = v[slot_col<F>(i, e + 1)] * scale;
            const __half2 h = __floats2half2_rn(a, b);
            const float2 hf = __half22float2(h);
            const __half2 lo = __floats2half2_rn(a - hf.x, b - hf.y);
            hl[e / 2] = *reinterpret_cast<const uint32_t*>(&h);
            hl[2 + e / 2] = *reinterpret_cast<const uint32_t*>(&lo);
        }
        table[(sb * S::kMmas + i) * kQuad + q] = make_uint4(hl[0], hl[1], hl[2], hl[3]);
    }
}

// Zeroes the block's zero region.
template <Format F, int NT, int RT>
__device__ __forceinline__ void zero_region_clear(const SmemLayout<F, NT, RT>& l, uint8_t* smem) {
    uint4* zero = reinterpret_cast<uint4*>(smem + l.zero);
    for (int i = threadIdx.x; i < Sb<F>::kTableBytes / kChunkBytes; i += kMmaThreads)
        zero[i] = make_uint4(0, 0, 0, 0);
}

// Lays the x of n <= NT tokens out in the block's shared memory (XLayout), each thread whole chunks, and
// zeroes the zero region. Every thread calls it; it synchronizes the block before returning.
template <Format F, int NT, int RT>
__device__ void x_table_build(const float* x, int n, int64_t cols, const SmemLayout<F, NT, RT>& l,
                              uint8_t* smem) {
    zero_region_clear(l, smem);
    const int64_t chunks = cols / Sb<F>::kChunkElems, table_chunks = l.x.sbs * kQuad;
    for (int t = 0; t < n; ++t)
        for (int64_t first = 0; first < table_chunks; first += kMmaThreads)  // block threads: quads
            x_chunk_layout<F, NT>(x + t * cols, first + threadIdx.x, chunks, l.x, t, smem + l.table);
    __syncthreads();
}

// Copies a laid-out x (x_table_kernel's output: whole 16-byte chunks) into the block's shared memory and
// zeroes the zero region. Every thread calls it; it synchronizes the block before returning.
template <Format F, int NT, int RT>
__device__ void x_table_copy(const uint8_t* table, const SmemLayout<F, NT, RT>& l, uint8_t* smem) {
    zero_region_clear(l, smem);
    constexpr int kRound = 8;  // loads in flight per thread
    const uint4* src = reinterpret_cast<const uint4*>(table);
    uint4* dst = reinterpret_cast<uint4*>(smem + l.table);
    const int n16 = static_cast<int>(l.x.bytes / kChunkBytes);
    for (int first = 0; first < n16; first += kRound * kMmaThreads) {
        uint4 v[kRound];
#pragma unroll
        for (int r = 0; r < kRound; ++r) {
            const int i = first + r * kMmaThreads + threadIdx.x;
            if (i < n16) v[r] = src[i];
        }
#pragma unroll
        for (int r = 0; r < kRound; ++r) {
            const int i = first + r * kMmaThreads + threadIdx.x;
            if (i < n16) dst[i] = v[r];
        }
    }
    __syncthreads();
}

constexpr int kXThreads = 128;  // threads per block of x_table_kernel
constexpr int kXMinBlocks = 8;  // its registers: one block fits beside two GEMV blocks on an SM

// One x of a launch to lay out (x_table_kernel): n <= NT tokens of a row of `cols`, into `out` (XLayout).
struct XSource {
    const float* x;
    uint8_t* out;
    int64_t cols;
    int n;
};
struct XBatch {
    XSource src[kMaxJobs];  // the first `count` are used
    int count = 0;
};

// Lays each source's x out in global memory (XLayout), for the GEMV launched after it: one thread per chunk.
// A dependent launch: that GEMV's blocks start their weight loads while this grid runs.
template <Format F, int NT>
__global__ void __launch_bounds__(kXThreads, kXMinBlocks) x_table_kernel(XBatch batch) {
    grid_dependents_launch();
    const XSource& src = batch.src[blockIdx.y];
    const XLayout<F, NT> l(src.cols);
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kXThreads;
    if (first >= l.sbs * kQuad) return;  // the whole block: a shorter source
    grid_dependency_wait();              // x is the kernel before's output
    for (int t = 0; t < src.n; ++t)
        x_chunk_layout<F, NT>(src.x + t * src.cols, first + threadIdx.x, src.cols / Sb<F>::kChunkElems, l, t,
                              src.out);
}

// Where row `row`'s scales start.
template <Format F>
__device__ __forceinline__ const void* scale_row_of(const DeviceWeight& w, int64_t row) {
    if constexpr (F == Format::int4_g64) {
        return static_cast<const float*>(w.scales) + row * (w.cols / kInt4Group);
    } else if constexpr (F == Format::mxfp4) {
        return static_cast<const uint8_t*>(w.scales) + row * (w.cols / kMxBlock);
    } else {
        static_assert(F == Format::fp8_e4m3_block);
        return static_cast<const float*>(w.scales) +
               (row / kFp8Block) * ((w.cols + kFp8Block - 1) / kFp8Block);
    }
}

// The raw scale of SB sb, group q % kGroups of a row (a lane's C columns hold that group), from its
// scale_row_of; `groups` is the row's scale count. Past the row (a partial last SB) the last group's: its
// mma columns hold zeros there.
template <Format F>
__device__ __forceinline__ uint32_t scale_bits(const void* row, int sb, int q, int groups) {
    using S = Sb<F>;
    if constexpr (F == Format::int4_g64) {
        return __ldg(static_cast<const uint32_t*>(row) + min(sb * S::kGroups + q % S::kGroups, groups - 1));
    } else if constexpr (F == Format::mxfp4) {
        return __ldg(static_cast<const uint8_t*>(row) + min(sb * S::kGroups + q, groups - 1));
    } else {
        static_assert(F == Format::fp8_e4m3_block);
        return __ldg(static_cast<const uint32_t*>(row) + sb * S::kCols / kFp8Block);  // one block's scale
    }
}

template <Format F>
__device__ __forceinline__ float scale_value(uint32_t bits) {
    if constexpr (F == Format::mxfp4) return e8m0_value(bits);
    return __uint_as_float(bits);
}

// 16 bytes global -> shared, asynchronously, cached in L2 only (the codes are read once).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Resident blocks per SM that a kernel's registers are budgeted for. A one-token two-tile 4-bit block that
// lays x out itself (a MoE layer's down projection: 2048 columns) takes ~25 registers more than one that
// copies the layout (105 against 80 for mxfp4), which would cost an SM one of the three blocks its shared
// memory holds; capped, ptxas fits it in 79 without spilling.
template <Format F, int NT, int RT, bool XPRE>
__host__ __device__ constexpr int mma_min_blocks() {
    return !XPRE && NT == 1 && RT == 2 && F != Format::fp8_e4m3_block ? kSelfLayoutMinBlocks : kMmaMinBlocks;
}

// XPRE: x comes laid out by x_table_kernel (batch.tables), else each block lays it out itself.
template <Format F, int NT, int RT, bool XPRE>
__global__ void __launch_bounds__(kMmaThreads, (mma_min_blocks<F, NT, RT, XPRE>()))
    gemv_mma_kernel(MmaBatch batch, int parts, PairConsts k) {
    using S = Sb<F>;
    using C = PairCodec<F>;
    constexpr int TG = (NT + S::kTokensPerMma - 1) / S::kTokensPerMma;  // mmas per A fragment
    constexpr int kRowsPerWarp = kTileRows * RT;
    constexpr int kStages = stages<NT, RT>();
    extern __shared__ __align__(16) uint8_t smem[];

    grid_dependents_launch();  // the next kernel's blocks may take the SMs this grid leaves
    const GemvJob& job = batch.jobs[blockIdx.y];
    const DeviceWeight& w = job.w;
    const int row_groups = kMmaWarps / parts;  // row groups of a block
    const int64_t block_r0 = static_cast<int64_t>(blockIdx.x) * row_groups * kRowsPerWarp;
    if (block_r0 >= w.rows) return;  // the whole block: a shorter job of the batch
    const SmemLayout<F, NT, RT> l(w.cols);
    const int chunks = static_cast<int>(w.cols / S::kChunkElems), sbs = (chunks + kQuad - 1) / kQuad;
    const int groups = F == Format::int4_g64 ? static_cast<int>(w.cols / kInt4Group) : chunks;

    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / kQuad, q = lane % kQuad;
    const int part = warp % parts, row_group = warp / parts;
    const int64_t r0 = block_r0 + static_cast<int64_t>(row_group) * kRowsPerWarp;
    const bool active = r0 < w.rows;

    const uint4* rows[RT][2];
    const void* scale_rows[RT][2];
#pragma unroll
    for (int t = 0; t < RT; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t row = min(r0 + t * kTileRows + h * kHalfRows + g, w.rows - 1);
            rows[t][h] = static_cast<const uint4*>(w.data) + row * chunks;
            scale_rows[t][h] = scale_row_of<F>(w, row);
        }
    // The lane's ring slots: stage j, tile t, row half h at ring + ((j RT + t) 2 + h) kWarp 16.
    const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(smem + l.ring)) +
                          (warp * ring_bytes<NT, RT>() + lane * kChunkBytes);
    uint8_t* const ring_ptr = smem + l.ring + warp * ring_bytes<NT, RT>() + lane * kChunkBytes;
    auto slot = [](int j, int t, int h) { return ((j * RT + t) * 2 + h) * kWarp * kChunkBytes; };
    uint32_t scales[kStages][RT][2];  // raw scales of the lane's group, per stage
    // Issues SB sb's loads into stage j and commits them as one group (an empty one past the end, so that
    // every stage is one group).
    auto issue = [&](int sb, int j) {
        if (active && sb < sbs) {
            const int chunk = min(sb * kQuad + q, chunks - 1);  // past the row: zeros of x meet it
#pragma unroll
            for (int t = 0; t < RT; ++t)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    cp_async_16(ring + slot(j, t, h), rows[t][h] + chunk);
                    scales[j][t][h] = scale_bits<F>(scale_rows[t][h], sb, q, groups);
                }
        }
        cp_async_commit();
    };
#pragma unroll
    for (int j = 0; j < kStages - 1; ++j) issue(part + j * parts, j);

    grid_dependency_wait();  // x, or its layout, is the kernel before's output
    if constexpr (XPRE)
        x_table_copy<F, NT, RT>(batch.tables[blockIdx.y], l, smem);
    else
        x_table_build<F, NT, RT>(job.x, job.n, w.cols, l, smem);

    // B: each token group's entry of this lane, or the zero region.
    const uint8_t* b_base[TG];
    int b_step[TG];
    // The inverse x scales of the token of the lane's C columns (q / kGroups of each token group; token 0's
    // for tokens past n, whose sums are zeros and dropped).
    const float* x_inv[TG];
#pragma unroll
    for (int tg = 0; tg < TG; ++tg) {
        const int pair_col = g / kXParts, part_hl = g % kXParts;
        const int group = pair_col % S::kGroups, token = tg * S::kTokensPerMma + pair_col / S::kGroups;
        const bool valid = group == q * S::kGroups / kQuad && token < job.n;
        const int64_t lane_off = q * kEntryBytes + part_hl * kPartBytes;
        b_base[tg] = smem + (valid ? l.table + token * l.x.table_bytes : l.zero) + lane_off;
        b_step[tg] = valid ? S::kTableBytes : 0;
        const int c_token = tg * S::kTokensPerMma + q / S::kGroups;
        x_inv[tg] =
            reinterpret_cast<const float*>(smem + l.inv_scale) + (c_token < job.n ? c_token : 0) * l.x.sbs;
    }

    float acc[TG][RT][2];  // [token group][tile][row half]: the lane's group's sums
#pragma unroll
    for (int tg = 0; tg < TG; ++tg)
#pragma unroll
        for (int t = 0; t < RT; ++t) acc[tg][t][0] = acc[tg][t][1] = 0.0f;

    auto compute = [&](int sb, const uint4(&codes)[RT][2], const uint32_t(&raw_scales)[RT][2]) {
        float c[TG][RT][4];
        const uint8_t* b_sb[TG];
#pragma unroll
        for (int tg = 0; tg < TG; ++tg) {
            b_sb[tg] = b_base[tg] + sb * b_step[tg];
#pragma unroll
            for (int t = 0; t < RT; ++t) c[tg][t][0] = c[tg][t][1] = c[tg][t][2] = c[tg][t][3] = 0.0f;
        }
#pragma unroll
        for (int wd = 0; wd < kWordsPerChunk; ++wd) {
            uint32_t p[RT][2][C::kPairsPerWord];
#pragma unroll
            for (int t = 0; t < RT; ++t)
#pragma unroll
                for (int h = 0; h < 2; ++h) C::word_pairs(word_of(codes[t][h], wd), k, p[t][h]);
#pragma unroll
            for (int m = 0; m < C::kPairsPerWord / 2; ++m) {
                const int i = wd * C::kPairsPerWord / 2 + m;
#pragma unroll
                for (int tg = 0; tg < TG; ++tg) {
                    const uint2 b = *reinterpret_cast<const uint2*>(b_sb[tg] + i * kQuad * kEntryBytes);
#pragma unroll
                    for (int t = 0; t < RT; ++t) {
                        const uint32_t a[4] = {p[t][0][2 * m], p[t][1][2 * m], p[t][0][2 * m + 1],
                                               p[t][1][2 * m + 1]};
                        mma_f16(c[tg][t], a, b.x, b.y, c[tg][t]);
                    }
                }
            }
        }
        float x_scale[TG];
#pragma unroll
        for (int tg = 0; tg < TG; ++tg) x_scale[tg] = x_inv[tg][sb];
#pragma unroll
        for (int t = 0; t < RT; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float scale = scale_value<F>(raw_scales[t][h]);
#pragma unroll
                for (int tg = 0; tg < TG; ++tg)
                    acc[tg][t][h] =
                        fmaf(scale * x_scale[tg], c[tg][t][2 * h] + c[tg][t][2 * h + 1], acc[tg][t][h]);
            }
    };

    // SB sb lies in stage j; once its group has landed it is read out, and the stage read the step before
    // (whose reads have completed: its values were used) is refilled with the SB kStages - 1 steps ahead.
    if (active)
        for (int base = part; base < sbs; base += kStages * parts)
#pragma unroll
            for (int j = 0; j < kStages; ++j) {
                const int sb = base + j * parts;
                if (sb >= sbs) break;
                cp_async_wait<kStages - 2>();
                uint4 codes[RT][2];
                uint32_t raw_scales[RT][2];
#pragma unroll
                for (int t = 0; t < RT; ++t)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        codes[t][h] = *reinterpret_cast<const uint4*>(ring_ptr + slot(j, t, h));
                        raw_scales[t][h] = scales[j][t][h];
                    }
                issue(sb + (kStages - 1) * parts, (j + kStages - 1) % kStages);
                compute(sb, codes, raw_scales);
            }

    // The quad's lanes hold one token's groups: add them; lane q % kGroups == 0 keeps the token's sums.
    float* sums = reinterpret_cast<float*>(smem + l.sums);
#pragma unroll
    for (int tg = 0; tg < TG; ++tg)
#pragma unroll
        for (int t = 0; t < RT; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float v = acc[tg][t][h];
                if (S::kGroups >= 2) v += __shfl_xor_sync(kFullMask, v, 1);
                if (S::kGroups >= 4) v += __shfl_xor_sync(kFullMask, v, 2);
                const int token = tg * S::kTokensPerMma + q / S::kGroups;
                if (active && q % S::kGroups == 0 && token < NT)
                    sums[((part * row_groups + row_group) * NT + token) * kRowsPerWarp + t * kTileRows +
                         h * kHalfRows + g] = v;
            }
    __syncthreads();

    for (int o = threadIdx.x; o < row_groups * NT * kRowsPerWarp; o += kMmaThreads) {
        const int rl = o % kRowsPerWarp, token = o / kRowsPerWarp % NT, rg = o / (kRowsPerWarp * NT);
        const int64_t row = block_r0 + static_cast<int64_t>(rg) * kRowsPerWarp + rl;
        if (row >= w.rows || token >= job.n) continue;
        float sum = sums[(rg * NT + token) * kRowsPerWarp + rl];
        for (int p = 1; p < parts; ++p) sum += sums[((p * row_groups + rg) * NT + token) * kRowsPerWarp + rl];
        job.y[token * w.rows + row] = sum * C::kPreScale;
    }
}

// Calls f with the smallest token-group size NT >= n as a compile-time constant.
template <typename Fn>
void mma_tokens_dispatch(int n, Fn&& fn) {
    if (n == 1) return fn(std::integral_constant<int, 1>{});
    if (n == 2) return fn(std::integral_constant<int, 2>{});
    if (n <= 4) return fn(std::integral_constant<int, 4>{});
    return fn(std::integral_constant<int, static_cast<int>(kCudaGemvMaxTokens)>{});
}

template <typename Fn>
bool mma_format_dispatch(Format f, Fn&& fn) {
    switch (f) {
        case Format::int4_g64:
            return fn(std::integral_constant<Format, Format::int4_g64>{}), true;
        case Format::mxfp4:
            return fn(std::integral_constant<Format, Format::mxfp4>{}), true;
        case Format::fp8_e4m3_block:
            return fn(std::integral_constant<Format, Format::fp8_e4m3_block>{}), true;
        default:
            return false;
    }
}

template <Format F, int NT, int RT, bool XPRE>
void mma_launch(const MmaBatch& b, dim3 grid, int parts, int64_t max_cols, cudaStream_t s) {
    // The largest shared-memory carveout: two blocks per SM need ~190 KB of it.
    static const bool raised = [] {
        cuda_check(
            cudaFuncSetAttribute(gemv_mma_kernel<F, NT, RT, XPRE>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemMax)),
            "gemv_mma shared memory limit");
        cuda_check(cudaFuncSetAttribute(gemv_mma_kernel<F, NT, RT, XPRE>,
                                        cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared),
                   "gemv_mma shared memory carveout");
        return true;
    }();
    (void)raised;
    const size_t smem = static_cast<size_t>(SmemLayout<F, NT, RT>(max_cols).total);
    cuda_check(launch_dependent(gemv_mma_kernel<F, NT, RT, XPRE>, grid, dim3(kMmaThreads), smem, s, b, parts,
                                kPairConsts),
               "gemv_mma launch");
}

// Rows per warp and the warps that split each row group's SBs: two tiles per warp where they fit and still
// give every resident warp slot a warp; parts until it does (while each part keeps two SBs). Warps with deep
// rings (deep_ring_fits: for one tile) take parts only while the grid stays one wave: a second wave's blocks
// would start their loads only as the first wave's leave.
template <Format F>
void mma_plan(int64_t rows, int64_t cols, int jobs, bool two_tiles_fit, bool deep_ring_fits, int& rt,
              int& parts) {
    const int64_t resident = static_cast<int64_t>(sm_count()) * kMmaMinBlocks * kMmaWarps;
    const int64_t sbs = (cols / Sb<F>::kChunkElems + kQuad - 1) / kQuad;
    const int64_t pairs = (rows + 2 * kTileRows - 1) / (2 * kTileRows) * jobs;
    rt = two_tiles_fit && pairs * kMmaWarps >= resident ? 2 : 1;
    const int64_t warps = (rows + kTileRows * rt - 1) / (kTileRows * rt) * jobs;
    const int64_t limit =
        rt == 1 && deep_ring_fits ? resident / 2 + 1 : resident;  // warps * parts stays below
    parts = 1;
    while (parts < kMmaWarps && warps * parts < limit && sbs >= 2LL * parts * 2) parts *= 2;
}

// Stream-ordered scratch memory: freed on its stream when the holder goes, so that the kernels queued
// before (which use it) run first, also when a launch fails and throws.
struct StreamFree {
    cudaStream_t stream;  // the stream the memory was allocated on and is used on
    void operator()(void* p) const { cudaFreeAsync(p, stream); }
};
using StreamScratch = std::unique_ptr<void, StreamFree>;

// Lays out each distinct x of the batch (an expert's gate and up share one) in scratch memory with
// x_table_kernel, launched here, and points the jobs at their layouts. Returns the scratch, which must be
// held until the GEMV is queued.
template <Format F, int NT>
StreamScratch x_tables_launch(MmaBatch& batch, cudaStream_t s) {
    XBatch xb;
    int source_of[kMaxJobs];
    int64_t offset[kMaxJobs];
    int64_t bytes = 0, max_chunks = 1;
    for (int i = 0; i < batch.count; ++i) {
        const GemvJob& j = batch.jobs[i];
        int src = 0;
        while (src < xb.count &&
               !(xb.src[src].x == j.x && xb.src[src].n == j.n && xb.src[src].cols == j.w.cols))
            ++src;
        if (src == xb.count) {
            xb.src[xb.count++] = {j.x, nullptr, j.w.cols, j.n};
            const XLayout<F, NT> xl(j.w.cols);
            offset[src] = bytes;
            bytes += xl.bytes;
            max_chunks = std::max(max_chunks, xl.sbs * kQuad);
        }
        source_of[i] = src;
    }
    void* memory = nullptr;
    cuda_check(cudaMallocAsync(&memory, static_cast<size_t>(bytes), s), "gemv_mma x scratch");
    StreamScratch scratch(memory, StreamFree{s});
    for (int i = 0; i < xb.count; ++i) xb.src[i].out = static_cast<uint8_t*>(memory) + offset[i];
    for (int i = 0; i < batch.count; ++i) batch.tables[i] = xb.src[source_of[i]].out;
    const dim3 grid(static_cast<unsigned>((max_chunks + kXThreads - 1) / kXThreads),
                    static_cast<unsigned>(xb.count));
    cuda_check(launch_dependent(x_table_kernel<F, NT>, grid, dim3(kXThreads), 0, s, xb),
               "gemv_mma x layout launch");
    return scratch;
}

// Plans and launches one batch. x is laid out once per launch (x_table_kernel) for the 4-bit formats in
// launches of more than one wave over rows wider than kSelfLayoutMaxCols (a MoE layer's gate and up): it
// spares every block the layout, which is a larger share of a 4-bit block's work than of an fp8 one's (half
// the weight bytes per x), at the cost of one more dependent step before the first mma. One-wave launches
// (single matrices), fp8, and a MoE layer's down projections (2048 columns, a small layout) measured slower
// with it (docs/benchmarks.md).
template <Format F, int NT>
void mma_run(MmaBatch& batch, int64_t max_rows, int64_t max_cols, cudaStream_t s) {
    const bool two_tiles_fit =
        NT <= kTwoTileMaxTokens && SmemLayout<F, NT, 2>(max_cols).total <= static_cast<int64_t>(kSmemMax);
    int rt = 1, parts = 1;
    mma_plan<F>(max_rows, max_cols, batch.count, two_tiles_fit, deep_ring<NT, 1>(), rt, parts);
    const int64_t rows_per_block = static_cast<int64_t>(kMmaWarps / parts) * kTileRows * rt;
    const dim3 grid(static_cast<unsigned>((max_rows + rows_per_block - 1) / rows_per_block),
                    static_cast<unsigned>(batch.count));
    constexpr bool kXPreFormat = F != Format::fp8_e4m3_block;
    const bool xpre =
        kXPreFormat && max_cols > kSelfLayoutMaxCols &&
        static_cast<int64_t>(grid.x) * grid.y > static_cast<int64_t>(sm_count()) * kMmaMinBlocks;
    StreamScratch scratch(nullptr, StreamFree{s});  // held until the GEMV is queued
    if constexpr (kXPreFormat)
        if (xpre) scratch = x_tables_launch<F, NT>(batch, s);
    auto launch = [&](auto xpre_c) {
        constexpr bool XPRE = decltype(xpre_c)::value;
        if constexpr (NT <= kTwoTileMaxTokens)
            if (rt == 2) return mma_launch<F, NT, 2, XPRE>(batch, grid, parts, max_cols, s);
        mma_launch<F, NT, 1, XPRE>(batch, grid, parts, max_cols, s);
    };
    if constexpr (kXPreFormat)
        if (xpre) launch(std::true_type{});
    if (!xpre) launch(std::false_type{});
}

}  // namespace

bool gemv_mma_fits(const DeviceWeight& w, int n) {
    bool fits = false;
    mma_format_dispatch(w.format, [&](auto format) {
        constexpr Format F = decltype(format)::value;
        mma_tokens_dispatch(n, [&](auto tokens) {
            constexpr int NT = decltype(tokens)::value;
            fits = w.cols % Sb<F>::kChunkElems == 0 && w.cols > 0 &&
                   SmemLayout<F, NT, 1>(w.cols).total <= static_cast<int64_t>(kSmemMax);
        });
    });
    return fits;
}

void gemv_mma(const GemvJob* jobs, int count, cudaStream_t s) {
    for (int first = 0; first < count; first += kMaxJobs) {
        MmaBatch batch;
        batch.count = std::min(count - first, kMaxJobs);
        int64_t max_rows = 0, max_cols = 0;
        int max_n = 1;
        for (int i = 0; i < batch.count; ++i) {
            const GemvJob& j = jobs[first + i];
            batch.jobs[i] = j;
            max_rows = std::max(max_rows, j.w.rows);
            max_cols = std::max(max_cols, j.w.cols);
            max_n = std::max(max_n, j.n);
        }
        mma_format_dispatch(jobs[0].w.format, [&](auto format) {
            constexpr Format F = decltype(format)::value;
            mma_tokens_dispatch(max_n, [&](auto tokens) {
                constexpr int NT = decltype(tokens)::value;
                mma_run<F, NT>(batch, max_rows, max_cols, s);
            });
        });
        cuda_check(cudaGetLastError(), "gemv_mma launch");
    }
}

}  // namespace coli::cuda
