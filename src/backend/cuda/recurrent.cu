// Recurrent-state ops (backend.h short_conv and kda), token by token (a kda prefill goes by chunks,
// kda_chunk.cu):
//   short_conv  one thread per channel walks the tokens with its K-wide window in registers, then writes
//               the channel's last K - 1 inputs back as the state (no other thread reads them).
//   kda         one block per head, one thread per value column j: the thread keeps column j of the head's
//               state S [dk, dv] in registers for the whole call, so the delta rule needs no reduction
//               across threads; only the l2 norms of q and k are block sums.
#include "backend/cuda/decode.cuh"
#include "backend/cuda/kda_launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/limits.h"
#include "backend/cuda/reduce.cuh"
#include "core/error.h"

namespace coli::cuda {
namespace {

constexpr int kConvThreads = 256;

__global__ void short_conv_kernel(const float* __restrict__ x, const float* __restrict__ w, int k, int64_t n,
                                  int64_t c, float* __restrict__ state, float* __restrict__ out) {
    const int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (ch >= c) return;
    float window[kCudaConvMaxKernel];  // inputs t - k + 1 .. t of this channel, oldest first
    float taps[kCudaConvMaxKernel];
    for (int j = 0; j < k - 1; ++j) window[j + 1] = state[j * c + ch];
    for (int j = 0; j < k; ++j) taps[j] = w[ch * k + j];
    for (int64_t t = 0; t < n; ++t) {
        for (int j = 0; j < k - 1; ++j) window[j] = window[j + 1];
        window[k - 1] = x[t * c + ch];
        float sum = 0.0f;
        for (int j = 0; j < k; ++j) sum += taps[j] * window[j];
        out[t * c + ch] = coli::silu(sum);
    }
    for (int j = 0; j < k - 1; ++j) state[j * c + ch] = window[j + 1];
}

template <int D>
__global__ void __launch_bounds__(kKdaThreads<D>)
    kda_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
               const float* __restrict__ g, const float* __restrict__ beta, const float* __restrict__ a_log,
               const float* __restrict__ dt_bias, int64_t n, KdaArgs a, float* __restrict__ state,
               float* __restrict__ out) {
    constexpr int kThreads = kKdaThreads<D>;
    __shared__ float qs[D], ks[D], alpha[D];
    __shared__ float partial[kThreads / kWarp];
    const int h = blockIdx.x, j = threadIdx.x;
    const bool column = j < D;  // threads past D only join the block sums
    const int64_t width = static_cast<int64_t>(a.n_heads) * D, c = static_cast<int64_t>(h) * D + j;
    float* st = state + static_cast<int64_t>(h) * D * D;  // S [D, D] of head h
    float col[D];                                         // S[:, j]
#pragma unroll
    for (int i = 0; i < D; ++i) col[i] = column ? st[i * D + j] : 0.0f;
    const float q_scale = rsqrtf(static_cast<float>(D)), head_a_log = a_log[h];
    for (int64_t t = 0; t < n; ++t) {
        const float qj = column ? q[t * width + c] : 0.0f, kj = column ? k[t * width + c] : 0.0f;
        const float q_sq = block_reduce<kThreads>(qj * qj, partial, false);
        const float k_sq = block_reduce<kThreads>(kj * kj, partial, false);
        if (column) {
            qs[j] = qj * (q_scale / sqrtf(q_sq + kKdaL2NormEps));
            ks[j] = kj * (1.0f / sqrtf(k_sq + kKdaL2NormEps));
            alpha[j] =
                expf(coli::kda_log_decay(g[t * width + c] + dt_bias[c], head_a_log, a.gate_lower_bound));
        }
        __syncthreads();
        const float b = coli::sigmoid(beta[t * a.n_heads + h]);
        float u = 0.0f;
#pragma unroll
        for (int i = 0; i < D; ++i) {
            col[i] *= alpha[i];
            u += ks[i] * col[i];
        }
        const float delta = column ? b * (v[t * width + c] - u) : 0.0f;
        float o = 0.0f;
#pragma unroll
        for (int i = 0; i < D; ++i) {
            col[i] += ks[i] * delta;
            o += qs[i] * col[i];
        }
        if (column) out[t * width + c] = o;
        __syncthreads();  // the next token overwrites qs, ks, alpha
    }
    if (!column) return;
#pragma unroll
    for (int i = 0; i < D; ++i) st[i * D + j] = col[i];
}

}  // namespace

void short_conv(const float* x, const float* w, int k, int64_t n, int64_t c, float* state, float* out,
                cudaStream_t s) {
    check(k >= 2 && k <= kCudaConvMaxKernel, "cuda short_conv: kernel {} (2..{})", k, kCudaConvMaxKernel);
    if (c == 0) return;
    short_conv_kernel<<<static_cast<unsigned>((c + kConvThreads - 1) / kConvThreads), kConvThreads, 0, s>>>(
        x, w, k, n, c, state, out);
    cuda_check(cudaGetLastError(), "short_conv launch");
}

void kda(const float* q, const float* k, const float* v, const float* g, const float* beta,
         const float* a_log, const float* dt_bias, int64_t n, const KdaArgs& a, float* state, float* out,
         cudaStream_t s) {
    if (n > 1) return kda_chunked(q, k, v, g, beta, a_log, dt_bias, n, a, state, out, s);
    kda_launch_for(a.head_dim, "cuda kda", [&](auto d) {
        constexpr int D = decltype(d)::value;
        kda_kernel<D><<<static_cast<unsigned>(a.n_heads), kKdaThreads<D>, 0, s>>>(q, k, v, g, beta, a_log,
                                                                                  dt_bias, n, a, state, out);
    });
    cuda_check(cudaGetLastError(), "kda launch");
}

}  // namespace coli::cuda
