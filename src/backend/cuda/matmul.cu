// Decode GEMV for every weight format, plus the helpers of the GEMM path (dequantization, bf16 splitting).
//
// GEMV: one warp per weight row; each lane loads 16 bytes of codes at a time (streamed past L1), decodes
// them once and multiplies them with up to NT tokens, so the weights are read once per call. Scales that
// cover a whole 16-byte chunk (int4 group, mxfp4 block, fp8 block) multiply the chunk's partial sum; the
// int8 row scale multiplies the row's sum. Shapes whose rows are not whole chunks take the scalar kernel.
#include <cuda_bf16.h>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"

namespace coli::cuda {
namespace {

constexpr int kGemvThreads = 256;                    // 8 warps, one row each
constexpr int kRowsPerBlock = kGemvThreads / kWarp;  // rows per GEMV block
constexpr int kElementwiseThreads = 256;             // threads of the simple element-wise kernels
constexpr int64_t kMaxGridBlocks = 65535LL * 32;     // grid-stride kernels cap their grid here

// Elements in one 16-byte chunk of codes.
template <Format F>
__host__ __device__ constexpr int chunk_elems() {
    if constexpr (F == Format::f32) return 4;
    if constexpr (F == Format::bf16 || F == Format::f16) return 8;
    if constexpr (F == Format::int8_row || F == Format::fp8_e4m3_block) return 16;
    return 32;  // int4_g64, mxfp4
}

// Bytes of codes per row.
template <Format F>
__device__ __forceinline__ int64_t row_bytes(int64_t cols) {
    if constexpr (F == Format::f32) return cols * 4;
    if constexpr (F == Format::bf16 || F == Format::f16) return cols * 2;
    if constexpr (F == Format::int8_row || F == Format::fp8_e4m3_block) return cols;
    return cols / 2;
}

// Decodes one chunk into v[] (unscaled for the scaled formats) and returns the chunk's scale.
template <Format F>
__device__ __forceinline__ float chunk_decode(const uint4& q, const DeviceWeight& w, int64_t r, int64_t chunk,
                                              float* v) {
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    if constexpr (F == Format::f32) {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = __uint_as_float(words[i]);
        return 1.0f;
    } else if constexpr (F == Format::bf16) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] = __uint_as_float(words[i] << 16);
            v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
        }
        return 1.0f;
    } else if constexpr (F == Format::f16) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] = f16_value(words[i] & 0xffffu);
            v[2 * i + 1] = f16_value(words[i] >> 16);
        }
        return 1.0f;
    } else if constexpr (F == Format::int8_row) {
#pragma unroll
        for (int i = 0; i < 16; ++i)
            v[i] = static_cast<float>(static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xffu));
        return 1.0f;  // the row scale multiplies the row's sum
    } else if constexpr (F == Format::fp8_e4m3_block) {
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = fp8_value((words[i / 4] >> (8 * (i % 4))) & 0xffu);
        const int64_t scale_cols = (w.cols + kFp8Block - 1) / kFp8Block;
        return scale_at(w.scales, (r / kFp8Block) * scale_cols + (chunk * 16) / kFp8Block);
    } else if constexpr (F == Format::int4_g64) {
#pragma unroll
        for (int i = 0; i < 32; ++i)
            v[i] = static_cast<float>(static_cast<int>((words[i / 8] >> (4 * (i % 8))) & 0xfu) - kInt4Zero);
        return scale_at(w.scales, r * (w.cols / kInt4Group) + (chunk * 32) / kInt4Group);
    } else {  // mxfp4
#pragma unroll
        for (int i = 0; i < 32; ++i) v[i] = e2m1_value((words[i / 8] >> (4 * (i % 8))) & 0xfu);
        const uint8_t e = static_cast<const uint8_t*>(w.scales)[r * (w.cols / kMxBlock) + chunk];
        return e8m0_value(e);
    }
}

template <Format F, int NT>
__device__ __forceinline__ void chunk_accumulate(const uint4& q, const DeviceWeight& w, int64_t r,
                                                 int64_t chunk, const float* __restrict__ x, int n,
                                                 float* acc) {
    constexpr int E = chunk_elems<F>();
    float v[E];
    const float scale = chunk_decode<F>(q, w, r, chunk, v);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        if (t >= n) break;
        const float4* xp = reinterpret_cast<const float4*>(x + t * w.cols + chunk * E);
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < E / 4; ++i) {
            const float4 xv = __ldg(xp + i);
            part = fmaf(v[4 * i], xv.x, part);
            part = fmaf(v[4 * i + 1], xv.y, part);
            part = fmaf(v[4 * i + 2], xv.z, part);
            part = fmaf(v[4 * i + 3], xv.w, part);
        }
        acc[t] = fmaf(part, scale, acc[t]);
    }
}

template <Format F, int NT>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_chunked(DeviceWeight w, const float* __restrict__ x, int n, float* __restrict__ y) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (r >= w.rows) return;
    constexpr int E = chunk_elems<F>();
    const int64_t chunks = w.cols / E;
    const uint4* row =
        reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + r * row_bytes<F>(w.cols));
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    int64_t c = lane;
    for (; c + kWarp < chunks; c += 2 * kWarp) {  // two loads in flight per lane
        const uint4 q0 = __ldcs(row + c);
        const uint4 q1 = __ldcs(row + c + kWarp);
        chunk_accumulate<F, NT>(q0, w, r, c, x, n, acc);
        chunk_accumulate<F, NT>(q1, w, r, c + kWarp, x, n, acc);
    }
    if (c < chunks) chunk_accumulate<F, NT>(__ldcs(row + c), w, r, c, x, n, acc);
    const float row_scale = F == Format::int8_row ? scale_at(w.scales, r) : 1.0f;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0 && t < n) y[t * w.rows + r] = F == Format::int8_row ? s * row_scale : s;
    }
}

// Any shape: one warp per row, one element per lane at a time.
template <int NT>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_scalar(DeviceWeight w, const float* __restrict__ x, int n, float* __restrict__ y) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
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

template <int NT>
void gemv_nt(const DeviceWeight& w, const float* x, int n, float* y, cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>((w.rows + kRowsPerBlock - 1) / kRowsPerBlock));
    auto chunked = [&](auto tag) {
        constexpr Format F = decltype(tag)::value;
        if (w.cols % chunk_elems<F>() != 0) return false;
        gemv_chunked<F, NT><<<grid, kGemvThreads, 0, s>>>(w, x, n, y);
        return true;
    };
    bool done = false;
    switch (w.format) {
        case Format::f32:
            done = chunked(std::integral_constant<Format, Format::f32>{});
            break;
        case Format::bf16:
            done = chunked(std::integral_constant<Format, Format::bf16>{});
            break;
        case Format::f16:
            done = chunked(std::integral_constant<Format, Format::f16>{});
            break;
        case Format::int8_row:
            done = chunked(std::integral_constant<Format, Format::int8_row>{});
            break;
        case Format::int4_g64:
            done = chunked(std::integral_constant<Format, Format::int4_g64>{});
            break;
        case Format::mxfp4:
            done = chunked(std::integral_constant<Format, Format::mxfp4>{});
            break;
        case Format::fp8_e4m3_block:
            done = chunked(std::integral_constant<Format, Format::fp8_e4m3_block>{});
            break;
    }
    if (!done) gemv_scalar<NT><<<grid, kGemvThreads, 0, s>>>(w, x, n, y);
}

__global__ void dequant_kernel(DeviceWeight w, int64_t r0, int64_t count, float* __restrict__ out) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = decode_at(w, r0 + i / w.cols, i % w.cols);
}

__global__ void split_bf16_kernel(const float* __restrict__ x, int64_t count, __nv_bfloat16* __restrict__ hi,
                                  __nv_bfloat16* __restrict__ lo) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
        hi[i] = h;
        lo[i] = __float2bfloat16_rn(x[i] - __bfloat162float(h));
    }
}

unsigned grid_for(int64_t count) {
    const int64_t blocks = (count + kElementwiseThreads - 1) / kElementwiseThreads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks));
}

}  // namespace

void gemv(const DeviceWeight& w, const float* x, int64_t n, float* y, cudaStream_t s) {
    if (w.rows == 0) return;
    for (int64_t t0 = 0; t0 < n; t0 += kCudaGemvMaxTokens) {  // one pass over the weights per group of tokens
        const int nt = static_cast<int>(n - t0 < kCudaGemvMaxTokens ? n - t0 : kCudaGemvMaxTokens);
        const float* xt = x + t0 * w.cols;
        float* yt = y + t0 * w.rows;
        if (nt == 1)
            gemv_nt<1>(w, xt, nt, yt, s);
        else if (nt == 2)
            gemv_nt<2>(w, xt, nt, yt, s);
        else if (nt <= 4)
            gemv_nt<4>(w, xt, nt, yt, s);
        else
            gemv_nt<static_cast<int>(kCudaGemvMaxTokens)>(w, xt, nt, yt, s);
        cuda_check(cudaGetLastError(), "gemv launch");
    }
}

void dequant_f32(const DeviceWeight& w, int64_t r0, int64_t r1, float* out, cudaStream_t s) {
    const int64_t count = (r1 - r0) * w.cols;
    if (count <= 0) return;
    dequant_kernel<<<grid_for(count), kElementwiseThreads, 0, s>>>(w, r0, count, out);
    cuda_check(cudaGetLastError(), "dequant launch");
}

void split_bf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t s) {
    if (count <= 0) return;
    split_bf16_kernel<<<grid_for(count), kElementwiseThreads, 0, s>>>(
        x, count, reinterpret_cast<__nv_bfloat16*>(hi), reinterpret_cast<__nv_bfloat16*>(lo));
    cuda_check(cudaGetLastError(), "split_bf16 launch");
}

}  // namespace coli::cuda
