// The CUDA backend: every op of backend.h on one device, for every weight format of format.h.
//
// Placement, budget, faults: DeviceBackend (backend/device/device_backend.h). Activations (Tensor storage)
// are device memory; only tensor_read / tensor_write and the router's result cross to the host.
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
#include "backend/device/device_backend.h"
#include "backend/moe_plan.h"
#include "core/error.h"

namespace coli {

namespace cuda {
// A tensor's device memory.
inline float* dev(Tensor& t) {
    return static_cast<float*>(t.storage());
}
inline const float* dev(const Tensor& t) {
    return static_cast<const float*>(t.storage());
}
}  // namespace cuda

// Device memory kept free for activations, KV caches, scratch and cuBLAS when --vram-gb is not given.
inline constexpr uint64_t kCudaVramReserve = 4ull << 30;

// A dense weight's device copy, held in Weight::device.
struct CudaResidentWeight {
    cuda::DeviceWeight view;       // what the kernels read
    std::shared_ptr<void> memory;  // codes and scales
};

class CudaBackend final : public DeviceBackend {
public:
    CudaBackend(std::shared_ptr<cuda::Context> ctx, uint64_t vram_bytes);

    double copy_gbps_measure() override;

    Tensor tensor_new(int64_t rows, int64_t cols) override;
    Tensor tensor_new_unfilled(int64_t rows, int64_t cols) override;
    void tensor_write(Tensor& t, std::span<const float> src) override;
    void tensor_read(const Tensor& t, std::span<float> dst) override;

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
    void layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) override;
    void dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache, const DsaShape& s,
                    int64_t pos0, Tensor& out) override;
    void short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) override;
    void kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
             const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state,
             Tensor& out) override;
    void mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) override;
    void res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) override;
    // DeepSeek-V4's compressed attention (compressed_ops.cpp) and hyper-connections (hyper_ops.cpp).
    void copy_rows(Tensor& dst, const Tensor& src, int64_t row0) override;
    void compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                     const Tensor& state_gate, const CompressShape& s, int64_t pos0, Tensor& out) override;
    void compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring, const Tensor& entries,
                              const Tensor* selection, const Weight& sinks, const CompressedAttentionShape& s,
                              int64_t pos0, Tensor& out) override;
    void index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                    int64_t pos0, Tensor& out) override;
    void hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                    Tensor& out) override;
    void hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out) override;
    void hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                   Tensor& out) override;
    void repeat_cols(const Tensor& x, int times, Tensor& out) override;

    // y = x w^T on device memory, choosing GEMV or GEMM by n (gemm.cpp).       x: [n, w.cols]; y: [n, w.rows]
    void matmul_device(const cuda::DeviceWeight& w, const float* x, int64_t n, float* y);
    // The grouped (block-diagonal) matmul of backend.h: matmul_device per group on a view of its rows.
    //                                                         x: [n, groups * w.cols]; y: [n, w.rows]
    void matmul_grouped(const cuda::DeviceWeight& w, int64_t groups, const float* x, int64_t n, float* y);
    const std::shared_ptr<cuda::Context>& context() const { return ctx_; }

private:
    std::string device_description() const override;
    bool device_supports(const OpDesc& d) const override;
    uint64_t weight_device_bytes(const WeightView& w) const override;
    std::shared_ptr<void> weight_to_device(const WeightView& w) override;
    std::unique_ptr<ExpertTier> tier_create(uint64_t capacity) override;

    // A dense weight's device copy; throws when it stayed on the host.
    const cuda::DeviceWeight& resident(const Weight& w, const char* op) const {
        return DeviceBackend::resident<CudaResidentWeight>(w, op).view;
    }
    const float* inv_freq(const RopeParams& p);  // cached per (theta, rotary_dim, yarn)
    // moe_experts for decode (few tokens per expert: batched launches) and for prefill (per expert).
    // dev[u]: the device copy of experts[p.used[u]].
    void moe_batched(std::span<const cuda::DeviceExpertPtr> dev, const MoePlan& p,
                     std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x, Tensor& y);
    void moe_per_expert(std::span<const cuda::DeviceExpertPtr> dev, const MoePlan& p,
                        std::span<const ExpertWeights> experts, const Tensor& x, Tensor& y);

    std::shared_ptr<cuda::Context> ctx_;
    // Rope tables on the device, by (theta, rotary_dim, yarn factor, original context, beta_fast, beta_slow).
    std::map<std::tuple<float, int, float, float, float, float>, std::shared_ptr<void>> inv_freq_;
};

}  // namespace coli
