// DeepSeek-V4's KV compressor (backend.h compress_kv): one thread per (closing window, channel) pools the
// window's slots with a softmax of their logits, in the CPU's order (the slots' largest logit, then the
// exponentials' sums in slot order, each product and sum rounded apart as the CPU's loop does).
#include "backend/cuda/kernels.h"

namespace coli::cuda {
namespace {

constexpr int kThreads = 256;                     // threads per block
constexpr int64_t kMaxGridBlocks = 65535LL * 32;  // the grid-stride kernel caps its grid here

// Where position j's raw rows are: this call's input from pos0 on, else the state's row j mod slots.
struct Rows {
    const float* kv;          // [n, width]
    const float* gate;        // [n, width]
    const float* state_kv;    // [slots, width]
    const float* state_gate;  // [slots, width]
    int64_t pos0, width, slots;

    __device__ __forceinline__ int64_t offset(int64_t j) const {
        return (j >= pos0 ? j - pos0 : j % slots) * width;
    }
    __device__ __forceinline__ float gate_at(int64_t j, int64_t c) const {
        return (j >= pos0 ? gate : state_gate)[offset(j) + c];
    }
    __device__ __forceinline__ float kv_at(int64_t j, int64_t c) const {
        return (j >= pos0 ? kv : state_kv)[offset(j) + c];
    }
};

__global__ void compress_kv_kernel(Rows rows, const float* __restrict__ ape, CompressArgs a, int64_t w0,
                                   int64_t windows, float* __restrict__ out) {
    const int64_t hd = a.head_dim, ratio = a.ratio, width = rows.width;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < windows * hd;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t w = w0 + i / hd, d = i % hd;
        const bool before = a.series == 2 && w >= 1;  // window w - 1 takes part (from the first hd channels)
        const int64_t c0 = a.series == 2 ? hd : 0;    // window w's channels
        // Slot r of window v, channel c: its logit gate + ape[r] and its value.
        const auto logit = [&](int64_t v, int64_t r, int64_t c) {
            return __fadd_rn(rows.gate_at(v * ratio + r, c), ape[r * width + c]);
        };
        float top = -INFINITY;
        if (before)
            for (int64_t r = 0; r < ratio; ++r) top = fmaxf(top, logit(w - 1, r, d));
        for (int64_t r = 0; r < ratio; ++r) top = fmaxf(top, logit(w, r, c0 + d));
        float total = 0.0f, mixed = 0.0f;
        const auto take = [&](int64_t v, int64_t r, int64_t c) {
            const float e = expf(logit(v, r, c) - top);
            total = __fadd_rn(total, e);
            mixed = __fadd_rn(mixed, __fmul_rn(e, rows.kv_at(v * ratio + r, c)));
        };
        if (before)
            for (int64_t r = 0; r < ratio; ++r) take(w - 1, r, d);
        for (int64_t r = 0; r < ratio; ++r) take(w, r, c0 + d);
        out[i] = mixed / total;
    }
}

}  // namespace

void compress_kv(const float* kv, const float* gate, const float* ape, const float* state_kv,
                 const float* state_gate, int64_t pos0, const CompressArgs& a, int64_t windows, float* out,
                 cudaStream_t s) {
    const int64_t count = windows * a.head_dim;
    if (count == 0) return;
    const Rows rows{
        kv, gate, state_kv, state_gate, pos0, int64_t{a.series} * a.head_dim, int64_t{a.series} * a.ratio};
    const int64_t blocks = (count + kThreads - 1) / kThreads;
    compress_kv_kernel<<<static_cast<unsigned>(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks), kThreads,
                         0, s>>>(rows, ape, a, pos0 / a.ratio, windows, out);
    cuda_check(cudaGetLastError(), "compress_kv launch");
}

}  // namespace coli::cuda
