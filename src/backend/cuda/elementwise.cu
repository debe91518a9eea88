// Row-wise and element-wise kernels: embedding, rms_norm, add, clamp, rope, and the gather / SwiGLU /
// weighted scatter-add steps of the routed experts. All in f32, in the CPU backend's operation order.
#include "backend/cuda/decode.cuh"
#include "backend/cuda/dependent_launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"
#include "core/error.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;                     // threads per block
constexpr int64_t kMaxGridBlocks = 65535LL * 32;  // grid-stride kernels cap their grid here

unsigned grid_for(int64_t count) {
    const int64_t blocks = (count + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks));
}

#define COLI_GRID_STRIDE(i, count)                                                             \
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (count); \
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void embedding_kernel(DeviceWeight table, const int32_t* __restrict__ ids, int64_t n,
                                 float* __restrict__ out) {
    COLI_GRID_STRIDE(i, n * table.cols) {
        const int64_t t = i / table.cols, c = i % table.cols;
        out[i] = decode_at(table, ids[t], c);
    }
}

// Sum over the block (blockDim.x a multiple of the warp), broadcast to every thread.
__device__ float block_sum(float v, float* shared) {
    v = warp_sum(v);
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < static_cast<int>(blockDim.x / kWarp); ++i) total += shared[i];
    __syncthreads();
    return total;
}

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps,
                                int64_t d, float* __restrict__ out) {
    __shared__ float partial[kThreads / kWarp];
    const float* xr = x + blockIdx.x * d;
    float* o = out + blockIdx.x * d;
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_sq = fmaf(xr[i], xr[i], sum_sq);
    sum_sq = block_sum(sum_sq, partial);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(d) + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = w[i] * (xr[i] * inv);
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float eps, int64_t d,
                                  float* __restrict__ out) {
    __shared__ float partial[kThreads / kWarp];
    const float* xr = x + blockIdx.x * d;
    float* o = out + blockIdx.x * d;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum += xr[i];
    const float mean = block_sum(sum, partial) / static_cast<float>(d);
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_sq = fmaf(xr[i] - mean, xr[i] - mean, sum_sq);
    const float inv = 1.0f / sqrtf(block_sum(sum_sq, partial) / static_cast<float>(d) + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                           int64_t count) {
    COLI_GRID_STRIDE(i, count) out[i] = a[i] + b[i];
}

__global__ void clamp_kernel(float* x, int64_t count, float lo, float hi) {
    COLI_GRID_STRIDE(i, count) x[i] = fminf(fmaxf(x[i], lo), hi);
}

// One thread per rotated pair (row, head, i).
__global__ void rope_kernel(float* x, int64_t n, int64_t cols, const float* __restrict__ inv_freq, RopeArgs a,
                            int64_t pos0) {
    const int half = a.rotary_dim / 2;
    const int64_t heads = cols / a.head_dim;
    COLI_GRID_STRIDE(idx, n * heads * half) {
        const int i = static_cast<int>(idx % half);
        const int64_t h = (idx / half) % heads, r = idx / (half * heads);
        const float angle = static_cast<float>((pos0 + r) * a.position_stride) * inv_freq[i];
        const float c = cosf(angle) * a.attention_scaling;
        const float s = (a.inverse ? -sinf(angle) : sinf(angle)) * a.attention_scaling;
        float* v = x + r * cols + h * a.head_dim + a.rotary_offset;
        float* pa = a.neox ? &v[i] : &v[2 * i];
        float* pb = a.neox ? &v[i + half] : &v[2 * i + 1];
        const float x1 = *pa, x2 = *pb;
        *pa = x1 * c - x2 * s;
        *pb = x2 * c + x1 * s;
    }
}

__global__ void gather_kernel(const float* __restrict__ x, int64_t d, const int32_t* __restrict__ rows,
                              int64_t m, float* __restrict__ out) {
    COLI_GRID_STRIDE(i, m * d) out[i] = x[rows[i / d] * d + i % d];
}

// out may alias gate (in place). A dependent launch: between the routed experts' gate/up and down GEMVs (also
// dependent launches) it lets the down GEMV's blocks start and issue their weight loads while it runs.
__global__ void glu_kernel(const float* gate, const float* __restrict__ up, int64_t count, GluArgs act,
                           float* out) {
    grid_dependents_launch();
    grid_dependency_wait();  // gate and up are the kernel before's output
    COLI_GRID_STRIDE(i, count) out[i] = coli::glu(act.kind, act.beta, act.linear_beta, gate[i], up[i]);
}

__global__ void mul_sigmoid_kernel(const float* __restrict__ a, const float* __restrict__ b, int64_t count,
                                   float* __restrict__ out) {
    COLI_GRID_STRIDE(i, count) out[i] = a[i] * coli::sigmoid(b[i]);
}

// The entries of one res_mix call, passed by value (kernel parameter space).
struct ResMixEntries {
    const float* rows[kCudaResMixMaxEntries];  // [n, d] each
};

// One block per token: each entry's normalized score, their softmax, the mix (entries in order, as the CPU).
__global__ void res_mix_kernel(ResMixEntries e, int m, const float* __restrict__ w, float eps, int64_t d,
                               float* __restrict__ out) {
    __shared__ float partial[kThreads / kWarp];
    __shared__ float p[kCudaResMixMaxEntries];
    const int64_t t = blockIdx.x;
    for (int j = 0; j < m; ++j) {
        const float* v = e.rows[j] + t * d;
        float sum_sq = 0.0f, dot = 0.0f;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            sum_sq = fmaf(v[i], v[i], sum_sq);
            dot = fmaf(v[i], w[i], dot);
        }
        sum_sq = block_sum(sum_sq, partial);
        dot = block_sum(dot, partial);
        if (threadIdx.x == 0) p[j] = dot / sqrtf(sum_sq / static_cast<float>(d) + eps);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float top = p[0], total = 0.0f;
        for (int j = 1; j < m; ++j) top = fmaxf(top, p[j]);
        for (int j = 0; j < m; ++j) total += p[j] = expf(p[j] - top);
        for (int j = 0; j < m; ++j) p[j] /= total;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        float o = 0.0f;
        for (int j = 0; j < m; ++j) o = fmaf(p[j], e.rows[j][t * d + i], o);
        out[t * d + i] = o;
    }
}

// Each row of y receives at most one row of src per launch (a token routes to an expert once).
__global__ void scatter_add_kernel(const float* __restrict__ src, int64_t d, const int32_t* __restrict__ rows,
                                   const float* __restrict__ gains, int64_t m, float* __restrict__ y) {
    COLI_GRID_STRIDE(i, m * d) {
        const int64_t j = i / d;
        y[rows[j] * d + i % d] += src[i] * gains[j];
    }
}

// Adds each token's expert outputs in slot order, the order in which the CPU adds them. A dependent launch:
// its blocks start as the down GEMV's blocks leave.
__global__ void moe_combine_kernel(const float* __restrict__ src, int64_t d, CombineSlots s, int64_t n, int k,
                                   float* __restrict__ y) {
    grid_dependency_wait();  // src is the kernel before's output
    COLI_GRID_STRIDE(i, n * d) {
        const int64_t t = i / d, c = i % d;
        float sum = y[i];
        for (int j = 0; j < k; ++j) {
            const int32_t slot = s.slots[t * k + j];
            if (slot >= 0) sum += src[slot * d + c] * s.gains[t * k + j];
        }
        y[i] = sum;
    }
}

}  // namespace

void embedding(const DeviceWeight& table, const int32_t* ids, int64_t n, float* out, cudaStream_t s) {
    if (n * table.cols == 0) return;
    embedding_kernel<<<grid_for(n * table.cols), kThreads, 0, s>>>(table, ids, n, out);
    cuda_check(cudaGetLastError(), "embedding launch");
}

void rms_norm(const float* x, const float* w, float eps, int64_t n, int64_t d, float* out, cudaStream_t s) {
    if (n == 0) return;
    rms_norm_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(x, w, eps, d, out);
    cuda_check(cudaGetLastError(), "rms_norm launch");
}

void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t n, int64_t d, float* out,
                cudaStream_t s) {
    if (n == 0) return;
    layer_norm_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(x, w, b, eps, d, out);
    cuda_check(cudaGetLastError(), "layer_norm launch");
}

void add(const float* a, const float* b, float* out, int64_t count, cudaStream_t s) {
    if (count == 0) return;
    add_kernel<<<grid_for(count), kThreads, 0, s>>>(a, b, out, count);
    cuda_check(cudaGetLastError(), "add launch");
}

void clamp(float* x, int64_t count, float lo, float hi, cudaStream_t s) {
    if (count == 0) return;
    clamp_kernel<<<grid_for(count), kThreads, 0, s>>>(x, count, lo, hi);
    cuda_check(cudaGetLastError(), "clamp launch");
}

void rope(float* x, int64_t n, int64_t cols, const float* inv_freq, const RopeArgs& a, int64_t pos0,
          cudaStream_t s) {
    const int64_t pairs = n * (cols / a.head_dim) * (a.rotary_dim / 2);
    if (pairs == 0) return;
    rope_kernel<<<grid_for(pairs), kThreads, 0, s>>>(x, n, cols, inv_freq, a, pos0);
    cuda_check(cudaGetLastError(), "rope launch");
}

void gather_rows(const float* x, int64_t d, const int32_t* rows, int64_t m, float* out, cudaStream_t s) {
    if (m * d == 0) return;
    gather_kernel<<<grid_for(m * d), kThreads, 0, s>>>(x, d, rows, m, out);
    cuda_check(cudaGetLastError(), "gather launch");
}

void glu(const float* gate, const float* up, int64_t count, const GluArgs& act, float* out, cudaStream_t s) {
    if (count == 0) return;
    cuda_check(
        launch_dependent(glu_kernel, dim3(grid_for(count)), dim3(kThreads), 0, s, gate, up, count, act, out),
        "glu launch");
}

void mul_sigmoid(const float* a, const float* b, int64_t count, float* out, cudaStream_t s) {
    if (count == 0) return;
    mul_sigmoid_kernel<<<grid_for(count), kThreads, 0, s>>>(a, b, count, out);
    cuda_check(cudaGetLastError(), "mul_sigmoid launch");
}

void res_mix(const float* const* entries, int m, const float* w, float eps, int64_t n, int64_t d, float* out,
             cudaStream_t s) {
    check(m > 0 && m <= kCudaResMixMaxEntries, "cuda res_mix: {} entries (at most {})", m,
          kCudaResMixMaxEntries);
    if (n * d == 0) return;
    ResMixEntries e{};
    for (int j = 0; j < m; ++j) e.rows[j] = entries[j];
    res_mix_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(e, m, w, eps, d, out);
    cuda_check(cudaGetLastError(), "res_mix launch");
}

void scatter_add(const float* src, int64_t d, const int32_t* rows, const float* gains, int64_t m, float* y,
                 cudaStream_t s) {
    if (m * d == 0) return;
    scatter_add_kernel<<<grid_for(m * d), kThreads, 0, s>>>(src, d, rows, gains, m, y);
    cuda_check(cudaGetLastError(), "scatter_add launch");
}

void moe_combine(const float* src, int64_t d, const CombineSlots& slots, int64_t n, int k, float* y,
                 cudaStream_t s) {
    check(n * k <= kCudaCombineMaxSlots, "cuda moe_combine: {} slots (at most {})", n * k,
          kCudaCombineMaxSlots);
    if (n * d == 0) return;
    cuda_check(launch_dependent(moe_combine_kernel, dim3(grid_for(n * d)), dim3(kThreads), 0, s, src, d,
                                slots, n, k, y),
               "moe_combine launch");
}

}  // namespace coli::cuda
