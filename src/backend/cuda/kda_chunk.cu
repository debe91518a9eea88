// The Kimi delta rule over a prefill, by chunks of kChunk tokens (backend.h kda; the CPU's
// cpu_kda_chunk.cpp derives the chunked form). One block per head, one thread per value column j, which
// keeps column j of the head's state in registers, as the token kernel in recurrent.cu; per chunk, with G_t
// the cumulative log decay of the chunk's tokens up to t (per channel) and E(s,t] = exp(G_t - G_s) <= 1:
//   M[t,s] = sum_i k_t[i] k_s[i] E(s,t][i] (s < t),   P[t,s] = sum_i q_t[i] k_s[i] E(s,t][i] (s <= t)
//   u_t = b_t (v_t - S0^T (k_t exp(G_t)) - sum_{s<t} M[t,s] u_s)      (forward substitution)
//   o_t = S0^T (q_t exp(G_t)) + sum_{s<=t} P[t,s] u_s
//   S = Diag(exp(G_last)) S0 + sum_s (k_s E(s,last]) u_s^T
// Column j of u and o is private to thread j: only M, P and the chunk's q, k and decays are shared. The
// chunk is shorter than the CPU's 64 tokens so that those fit in static shared memory (3 x 16 x 128 floats).
#include "backend/cuda/decode.cuh"
#include "backend/cuda/kda_launch.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/reduce.cuh"
#include "core/error.h"

namespace coli::cuda {

namespace {

constexpr int kChunk = 16;  // tokens per chunk

template <int D>
__global__ void __launch_bounds__(kKdaThreads<D>)
    kda_chunk_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                     const float* __restrict__ g, const float* __restrict__ beta,
                     const float* __restrict__ a_log, const float* __restrict__ dt_bias, int64_t n, KdaArgs a,
                     float* __restrict__ state, float* __restrict__ out) {
    // [t][i] of the chunk. qs: q, then q_t exp(G_t); ks: k, then k_t exp(G_t); gs: G_t, then k_t E(t,last].
    __shared__ float qs[kChunk * D], ks[kChunk * D], gs[kChunk * D];
    __shared__ float m[kChunk * kChunk], p[kChunk * kChunk];  // [t][s]: M zero for s >= t, P for s > t
    __shared__ float decay_last[D];                           // exp(G_last) per channel
    __shared__ float partial[kKdaThreads<D> / kWarp];
    const int h = blockIdx.x, j = threadIdx.x;
    const bool column = j < D;  // threads past D only join the block sums
    const int64_t width = static_cast<int64_t>(a.n_heads) * D, c = static_cast<int64_t>(h) * D + j;
    float* st = state + static_cast<int64_t>(h) * D * D;  // S [D, D] of head h
    float col[D];                                         // S[:, j]
#pragma unroll
    for (int i = 0; i < D; ++i) col[i] = column ? st[i * D + j] : 0.0f;
    const float q_scale = rsqrtf(static_cast<float>(D)), head_a_log = a_log[h];
    for (int64_t t0 = 0; t0 < n; t0 += kChunk) {
        const int len = static_cast<int>(n - t0 < kChunk ? n - t0 : kChunk);
        // Stage the chunk: normalized q and k, and G (thread j cumulates its channel).
        float cum = 0.0f;
        for (int t = 0; t < len; ++t) {
            const int64_t x = (t0 + t) * width + c;
            const float qj = column ? q[x] : 0.0f, kj = column ? k[x] : 0.0f;
            const float q_sq = block_reduce<kKdaThreads<D>>(qj * qj, partial, false);
            const float k_sq = block_reduce<kKdaThreads<D>>(kj * kj, partial, false);
            if (column) {
                qs[t * D + j] = qj * (q_scale / sqrtf(q_sq + kKdaL2NormEps));
                ks[t * D + j] = kj * (1.0f / sqrtf(k_sq + kKdaL2NormEps));
                cum += coli::kda_log_decay(g[x] + dt_bias[c], head_a_log, a.gate_lower_bound);
                gs[t * D + j] = cum;
            }
        }
        __syncthreads();
        // M and P, one entry per thread at a time.
        for (int e = j; e < kChunk * kChunk; e += kKdaThreads<D>) {
            const int t = e / kChunk, s = e % kChunk;
            float mts = 0.0f, pts = 0.0f;
            if (s <= t && t < len) {
                for (int i = 0; i < D; ++i) {
                    const float ke = ks[s * D + i] * expf(gs[t * D + i] - gs[s * D + i]);
                    mts += ks[t * D + i] * ke;
                    pts += qs[t * D + i] * ke;
                }
            }
            m[e] = s < t ? mts : 0.0f;
            p[e] = pts;
        }
        __syncthreads();
        // Channel j of the decayed factors, in place.
        if (column) {
            const float g_last = gs[(len - 1) * D + j];
            decay_last[j] = expf(g_last);
            for (int t = 0; t < len; ++t) {
                const int x = t * D + j;
                const float decay_in = expf(gs[x]);
                gs[x] = ks[x] * expf(g_last - gs[x]);
                qs[x] *= decay_in;
                ks[x] *= decay_in;
            }
        }
        __syncthreads();
        // Column j of u: what S0 contributes, then the forward substitution; then column j of o.
        float u[kChunk];
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
            u[t] = 0.0f;
            if (t >= len) continue;
            float ks0 = 0.0f;
#pragma unroll
            for (int i = 0; i < D; ++i) ks0 += ks[t * D + i] * col[i];
            float w = column ? v[(t0 + t) * width + c] - ks0 : 0.0f;
#pragma unroll
            for (int s = 0; s < t; ++s) w -= m[t * kChunk + s] * u[s];
            u[t] = coli::sigmoid(beta[(t0 + t) * a.n_heads + h]) * w;
        }
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
            if (t >= len) continue;
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < D; ++i) sum += qs[t * D + i] * col[i];
#pragma unroll
            for (int s = 0; s <= t; ++s) sum += p[t * kChunk + s] * u[s];
            if (column) out[(t0 + t) * width + c] = sum;
        }
#pragma unroll
        for (int i = 0; i < D; ++i) {
            float sum = decay_last[i] * col[i];
#pragma unroll
            for (int s = 0; s < kChunk; ++s) sum += s < len ? gs[s * D + i] * u[s] : 0.0f;
            col[i] = sum;
        }
        __syncthreads();  // the next chunk overwrites the shared arrays
    }
    if (!column) return;
#pragma unroll
    for (int i = 0; i < D; ++i) st[i * D + j] = col[i];
}

}  // namespace

void kda_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                 const float* a_log, const float* dt_bias, int64_t n, const KdaArgs& a, float* state,
                 float* out, cudaStream_t s) {
    kda_launch_for(a.head_dim, "cuda kda", [&](auto d) {
        constexpr int D = decltype(d)::value;
        kda_chunk_kernel<D><<<static_cast<unsigned>(a.n_heads), kKdaThreads<D>, 0, s>>>(
            q, k, v, g, beta, a_log, dt_bias, n, a, state, out);
    });
    cuda_check(cudaGetLastError(), "kda chunk launch");
}

}  // namespace coli::cuda
