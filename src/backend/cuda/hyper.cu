// DeepSeek-V4's hyper-connections (backend.h hc_weights, hc_collapse, hc_expand), in the CPU's operation
// order: products and sums as separate roundings (__fmul_rn, __fadd_rn: the CPU's loops have no fused
// multiply-add) and IEEE divisions, so that collapse and expand equal the CPU's bit for bit and hc_weights
// differs only by expf's last bits.
//   hc_weights   one thread per token: a token's weights are a few dozen floats, normalized in place in out.
//   hc_collapse  one thread per output element, the streams summed in stream order.
//   hc_expand    one thread per output element, post y then the comb-weighted streams in stream order.
#include "backend/activations.h"
#include "backend/cuda/kernels.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;                     // threads per block
constexpr int64_t kMaxGridBlocks = 65535LL * 32;  // grid-stride kernels cap their grid here
constexpr float kPostGain = 2.0f;                 // post's sigmoid spans (0, 2)

unsigned grid_for(int64_t count) {
    const int64_t blocks = (count + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks));
}

__device__ __forceinline__ int64_t grid_first() {
    return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
    return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// m scale + b, two roundings as on the CPU.
__device__ __forceinline__ float affine(float m, float scale, float b) {
    return __fadd_rn(__fmul_rn(m, scale), b);
}

// comb's columns (k) of one token, each divided by its sum over the rows j + eps.
__device__ void columns_normalize(float* comb, int S, float eps) {
    for (int k = 0; k < S; ++k) {
        float sum = 0.0f;
        for (int j = 0; j < S; ++j) sum = __fadd_rn(sum, comb[j * S + k]);
        for (int j = 0; j < S; ++j) comb[j * S + k] = comb[j * S + k] / __fadd_rn(sum, eps);
    }
}

// comb's rows (j) of one token, each divided by its sum over k + eps.
__device__ void rows_normalize(float* comb, int S, float eps) {
    for (int j = 0; j < S; ++j) {
        float sum = 0.0f;
        for (int k = 0; k < S; ++k) sum = __fadd_rn(sum, comb[j * S + k]);
        for (int k = 0; k < S; ++k) comb[j * S + k] = comb[j * S + k] / __fadd_rn(sum, eps);
    }
}

__global__ void hc_weights_kernel(const float* __restrict__ mix, const float* __restrict__ base,
                                  const float* __restrict__ scale, int64_t n, HcArgs a,
                                  float* __restrict__ out) {
    const int S = a.streams;
    for (int64_t t = grid_first(); t < n; t += grid_stride()) {
        const float* m = mix + t * a.cols;
        float* o = out + t * a.cols;
        for (int j = 0; j < S; ++j) o[j] = __fadd_rn(coli::sigmoid(affine(m[j], scale[0], base[j])), a.eps);
        if (a.cols == S) continue;  // a head's weights: pre only
        for (int j = S; j < 2 * S; ++j) o[j] = kPostGain * coli::sigmoid(affine(m[j], scale[1], base[j]));
        float* comb = o + 2 * S;       // [S, S], [j][k]
        for (int j = 0; j < S; ++j) {  // softmax over k of row j, + eps
            float* r = comb + j * S;
            const int c0 = 2 * S + j * S;
            float top = -INFINITY;
            for (int k = 0; k < S; ++k) {
                r[k] = affine(m[c0 + k], scale[2], base[c0 + k]);
                top = fmaxf(top, r[k]);
            }
            float total = 0.0f;
            for (int k = 0; k < S; ++k) {
                r[k] = expf(r[k] - top);
                total = __fadd_rn(total, r[k]);
            }
            for (int k = 0; k < S; ++k) r[k] = __fadd_rn(r[k] / total, a.eps);
        }
        columns_normalize(comb, S, a.eps);
        for (int it = 1; it < a.sinkhorn_iters; ++it) {
            rows_normalize(comb, S, a.eps);
            columns_normalize(comb, S, a.eps);
        }
    }
}

__global__ void hc_collapse_kernel(const float* __restrict__ x, const float* __restrict__ weights, int64_t n,
                                   int64_t d, int streams, int64_t w_cols, float* __restrict__ out) {
    for (int64_t i = grid_first(); i < n * d; i += grid_stride()) {
        const int64_t t = i / d, c = i % d;
        const float* pre = weights + t * w_cols;
        float sum = 0.0f;
        for (int j = 0; j < streams; ++j)
            sum = __fadd_rn(sum, __fmul_rn(pre[j], x[(t * streams + j) * d + c]));
        out[i] = sum;
    }
}

__global__ void hc_expand_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                 const float* __restrict__ weights, int64_t n, int64_t d, int streams,
                                 float* __restrict__ out) {
    const int S = streams;
    const int64_t width = S * d;
    for (int64_t i = grid_first(); i < n * width; i += grid_stride()) {
        const int64_t t = i / width, c = i % d;
        const int k = static_cast<int>(i % width / d);
        const float* post = weights + t * (2 + S) * S + S;
        const float* comb = post + S;  // [S, S], [j][k]
        float sum = __fmul_rn(post[k], y[t * d + c]);
        for (int j = 0; j < S; ++j)
            sum = __fadd_rn(sum, __fmul_rn(comb[j * S + k], x[t * width + j * d + c]));
        out[i] = sum;
    }
}

}  // namespace

void hc_weights(const float* mix, const float* base, const float* scale, int64_t n, const HcArgs& a,
                float* out, cudaStream_t s) {
    if (n == 0) return;
    hc_weights_kernel<<<grid_for(n), kThreads, 0, s>>>(mix, base, scale, n, a, out);
    cuda_check(cudaGetLastError(), "hc_weights launch");
}

void hc_collapse(const float* x, const float* weights, int64_t n, int64_t d, int streams, int64_t w_cols,
                 float* out, cudaStream_t s) {
    if (n * d == 0) return;
    hc_collapse_kernel<<<grid_for(n * d), kThreads, 0, s>>>(x, weights, n, d, streams, w_cols, out);
    cuda_check(cudaGetLastError(), "hc_collapse launch");
}

void hc_expand(const float* x, const float* y, const float* weights, int64_t n, int64_t d, int streams,
               float* out, cudaStream_t s) {
    if (n * d == 0) return;
    hc_expand_kernel<<<grid_for(n * streams * d), kThreads, 0, s>>>(x, y, weights, n, d, streams, out);
    cuda_check(cudaGetLastError(), "hc_expand launch");
}

}  // namespace coli::cuda
