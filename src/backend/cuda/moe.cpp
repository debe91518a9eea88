// moe_experts on CUDA: per expert (ascending id, as the CPU adds them) gather its tokens, gate and up
// matmuls, SwiGLU, down matmul, and add back weighted. Expert weights come from the VRAM tier; the next
// expert's upload is issued before the current expert's kernels are queued, so copies overlap compute.
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/error.h"

namespace coli {

using cuda::cuda_check;

void CudaBackend::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                              Tensor& y) {
    fault_check(OpKind::moe_experts);
    const int64_t d_model = x.cols();
    check(y.rows() == x.rows() && y.cols() == d_model, "moe_experts y: shape [{}, {}], expected [{}, {}]",
          y.rows(), y.cols(), x.rows(), d_model);
    check(r.n_tokens == x.rows(), "moe_experts: routing for {} tokens, x has {}", r.n_tokens, x.rows());
    check(x.backend() == this && y.backend() == this, "moe_experts: tensors held by another backend");
    if (!tier_)
        tier_ = std::make_unique<cuda::ExpertTier>(ctx_, budget_ > dense_bytes_ ? budget_ - dense_bytes_ : 0);
    tier_->call_begin();

    // Tokens of each expert, in token order, with their gains; all experts' lists in one upload.
    std::vector<int32_t> rows;
    std::vector<float> gains;
    std::vector<int64_t> offset(experts.size() + 1, 0);
    int64_t max_m = 0, max_ff = 0;
    for (size_t i = 0; i < experts.size(); ++i) {
        const ExpertWeights& e = experts[i];
        check(e.gate.cols() == d_model && e.up.cols() == d_model && e.down.rows() == d_model &&
                  e.down.cols() == e.gate.rows() && e.up.rows() == e.gate.rows(),
              "moe_experts: expert {} has shapes that do not fit d_model {}", e.id, d_model);
        for (int64_t t = 0; t < r.n_tokens; ++t)
            for (int j = 0; j < r.k; ++j)
                if (r.experts[t * r.k + j] == e.id) {
                    rows.push_back(static_cast<int32_t>(t));
                    gains.push_back(r.weights[t * r.k + j]);
                }
        offset[i + 1] = static_cast<int64_t>(rows.size());
        max_m = std::max(max_m, offset[i + 1] - offset[i]);
        max_ff = std::max(max_ff, e.gate.rows());
    }
    if (rows.empty()) return;
    cudaStream_t s = ctx_->compute;
    cuda::Scratch<int32_t> d_rows(ctx_, rows.size());
    cuda::Scratch<float> d_gains(ctx_, gains.size());
    cuda_check(
        cudaMemcpyAsync(d_rows.get(), rows.data(), rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice, s),
        "expert token lists");
    cuda_check(
        cudaMemcpyAsync(d_gains.get(), gains.data(), gains.size() * sizeof(float), cudaMemcpyHostToDevice, s),
        "expert gains");
    cuda::Scratch<float> xs(ctx_, max_m * d_model), gate(ctx_, max_m * max_ff), up(ctx_, max_m * max_ff),
        out(ctx_, max_m * d_model);

    std::vector<size_t> used;  // experts with tokens
    for (size_t i = 0; i < experts.size(); ++i)
        if (offset[i + 1] > offset[i]) used.push_back(i);
    std::shared_ptr<cuda::DeviceExpert> next = tier_->acquire(experts[used[0]]);
    for (size_t u = 0; u < used.size(); ++u) {
        const size_t i = used[u];
        const std::shared_ptr<cuda::DeviceExpert> dev = next;  // kept alive until its kernels are queued
        if (u + 1 < used.size())
            next = tier_->acquire(experts[used[u + 1]]);  // upload overlaps the kernels below
        const int64_t m = offset[i + 1] - offset[i], d_ff = dev->gate.rows;
        cuda_check(cudaStreamWaitEvent(s, dev->ready, 0), "wait for expert upload");
        cuda::gather_rows(static_cast<const float*>(x.storage()), d_model, d_rows.get() + offset[i], m,
                          xs.get(), s);
        matmul_device(dev->gate, xs.get(), m, gate.get());  // [m, d_ff]
        matmul_device(dev->up, xs.get(), m, up.get());      // [m, d_ff]
        cuda::swiglu(gate.get(), up.get(), m * d_ff, gate.get(), s);
        matmul_device(dev->down, gate.get(), m, out.get());  // [m, d_model]
        cuda::scatter_add(out.get(), d_model, d_rows.get() + offset[i], d_gains.get() + offset[i], m,
                          static_cast<float*>(y.storage()), s);
    }
}

}  // namespace coli
