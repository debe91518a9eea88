// The CUDA backend: every op of backend.h on one device, for every weight format of format.h.
//
// Placement: dense weights are copied to VRAM by weight_upload within the budget (--vram-gb); a weight
// beyond it stays on the host and its ops are declined (the dispatcher runs them on the CPU, counted).
// Routed experts arrive as host views and go through the VRAM expert tier. Activations (Tensor storage)
// are device memory; only tensor_read / tensor_write and the router's result cross to the host.
// Faults: COLI_CUDA_FAIL_OP=op[,op...] makes those ops throw, to exercise the counted CPU fallback.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/context.h"
#include "backend/cuda/expert_tier.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace coli {

struct ExpertPlan;  // moe.cpp

namespace cuda {
// A tensor's device memory.
inline float* dev(Tensor& t) {
    return static_cast<float*>(t.storage());
}
inline const float* dev(const Tensor& t) {
    return static_cast<const float*>(t.storage());
}
// Throws unless t is held by backend b (a tensor of another backend is not device memory).
inline void check_owner(const Tensor& t, const Backend* b, const char* what) {
    check(t.backend() == b, "cuda {}: the tensor is held by another backend", what);
}
}  // namespace cuda

// Device memory kept free for activations, KV caches, scratch and cuBLAS when --vram-gb is not given.
inline constexpr uint64_t kCudaVramReserve = 4ull << 30;

// A dense weight's device copy, held in Weight::device.
struct CudaResidentWeight {
    cuda::DeviceWeight view;       // what the kernels read
    std::shared_ptr<void> memory;  // codes and scales
};

class CudaBackend final : public Backend {
public:
    CudaBackend(std::shared_ptr<cuda::Context> ctx, uint64_t vram_bytes);

    std::string_view name() const override { return "cuda"; }
    std::string description() const override;
    bool supports(const OpDesc& d) const override;
    std::string stats() const override;
    double copy_gbps_measure() override;

    Tensor tensor_new(int64_t rows, int64_t cols) override;
    Tensor tensor_new_unfilled(int64_t rows, int64_t cols) override;
    void tensor_write(Tensor& t, std::span<const float> src) override;
    void tensor_read(const Tensor& t, std::span<float> dst) override;
    Weight weight_upload(const Weight& w) override;

    void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) override;
    void rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) override;
    void matmul(const Weight& w, const Tensor& x, Tensor& y) override;
    void add(const Tensor& a, const Tensor& b, Tensor& out) override;
    void clamp(Tensor& x, float lo, float hi) override;
    void rope(Tensor& x, const RopeParams& p, int64_t pos0) override;
    void attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache, const AttentionShape& s,
                   int64_t pos0, Tensor& out) override;
    Routing route_softmax_topk(const Tensor& logits, int k, bool renormalize) override;
    void moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                     Tensor& y) override;
    void slice_cols(const Tensor& x, int64_t c0, Tensor& out) override;
    void mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                       KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection,
                       Tensor& out) override;
    Routing route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p) override;
    void layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) override;
    void dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache, const DsaShape& s,
                    int64_t pos0, Tensor& out) override;
    void short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) override;
    void kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
             const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state,
             Tensor& out) override;
    void mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) override;
    void res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) override;

    // y = x w^T on device memory, choosing GEMV or GEMM by n (matmul.cpp).     x: [n, w.cols]; y: [n, w.rows]
    void matmul_device(const cuda::DeviceWeight& w, const float* x, int64_t n, float* y);
    const std::shared_ptr<cuda::Context>& context() const { return ctx_; }

private:
    void fault_check(OpKind op) const;  // throws coli::Error when COLI_CUDA_FAIL_OP names op
    static const cuda::DeviceWeight& resident(const Weight& w, const char* op);  // throws when on host only
    const float* inv_freq(const RopeParams& p);  // cached per (theta, rotary_dim, yarn)
    // moe_experts for decode (few tokens per expert: batched launches) and for prefill (per expert).
    void moe_batched(const ExpertPlan& p, std::span<const ExpertWeights> experts, const Routing& r,
                     const Tensor& x, Tensor& y);
    void moe_per_expert(const ExpertPlan& p, std::span<const ExpertWeights> experts, const Tensor& x,
                        Tensor& y);

    std::shared_ptr<cuda::Context> ctx_;
    uint64_t budget_ = 0;                     // bytes for dense weights + expert tier
    uint64_t dense_bytes_ = 0;                // dense weights resident
    uint64_t dense_on_host_ = 0;              // dense weights left on the host (over budget)
    std::unique_ptr<cuda::ExpertTier> tier_;  // made at the first moe_experts, with what dense left
    std::array<bool, static_cast<size_t>(OpKind::count_)> fail_{};  // ops with an injected fault
    // Rope tables on the device, by (theta, rotary_dim, yarn factor, original context, beta_fast, beta_slow).
    std::map<std::tuple<float, int, float, float, float, float>, std::shared_ptr<void>> inv_freq_;
};

}  // namespace coli
