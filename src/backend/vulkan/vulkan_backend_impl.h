// The Vulkan backend: every op of backend.h on one Vulkan 1.2 device, for every weight format of format.h.
//
// Placement: dense weights are copied to device memory by weight_upload within the budget (--vram-gb); a
// weight beyond it stays on the host and its ops are declined (the dispatcher runs them on the CPU,
// counted). Routed experts arrive as host views and go through the device expert tier. Activations
// (Tensor storage) are device buffers; only tensor_read / tensor_write and the routers' inputs cross to
// the host. Commands queue on one stream and run when the host needs a result.
// Faults: COLI_VULKAN_FAIL_OP=op[,op...] makes those ops throw, to exercise the counted CPU fallback.
#pragma once

#include <array>
#include <initializer_list>
#include <memory>
#include <string_view>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/expert_tier.h"
#include "backend/vulkan/gemv.h"
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/stream.h"
#include "backend/vulkan/weights.h"

namespace coli {

namespace vk {
struct MoePlan;   // moe.cpp
struct MixShape;  // attention.cpp
}  // namespace vk

// Device memory kept free for activations, KV caches and scratch when --vram-gb is not given.
inline constexpr uint64_t kVulkanVramReserve = 2ull << 30;
// On small devices (integrated GPUs, lavapipe) the reserve is at most this fraction of the heap: 1 / 4.
inline constexpr uint64_t kVulkanReserveShare = 4;

class VulkanBackend final : public Backend {
public:
    VulkanBackend(std::shared_ptr<vk::Context> ctx, uint64_t vram_bytes, ThreadPool& pool);

    std::string_view name() const override { return "vulkan"; }
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

    // y = x w^T on device buffers, GEMV or GEMM by n (matmul.cpp).            x: [n, w.cols]; y: [n, w.rows]
    void matmul_device(const vk::DeviceWeight& w, const vk::BufferPtr& x, int64_t n, const vk::BufferPtr& y);
    // Decode GEMV jobs in few dispatches (gemv.cpp).
    void gemv(const vk::GemvJobs& jobs);
    // Runs shader `name` (specialized by spec) on buffers with push constants `push`.
    template <typename Push>
    void run(std::string_view name, std::initializer_list<uint32_t> spec,
             std::initializer_list<vk::BufferPtr> buffers, const Push& push, uint32_t gx, uint32_t gy = 1) {
        run_slots(name, spec, buffers, {}, push, gx, gy, 1);
    }
    // run, with weights bound to the slot arrays, over gx * gy * gz groups.
    template <typename Push>
    void run_slots(std::string_view name, std::initializer_list<uint32_t> spec,
                   std::initializer_list<vk::BufferPtr> buffers, const vk::WeightSlots& slots,
                   const Push& push, uint32_t gx, uint32_t gy, uint32_t gz) {
        stream_.dispatch(pipelines_.get(name, spec), buffers, &push, sizeof(Push), gx, gy, gz, slots);
    }
    // dst[dst_offset, + bytes) = src[src_offset, + bytes) on the compute units (copy_words.comp); offsets
    // and size in whole 16-byte words.
    void words_copy(const vk::BufferPtr& src, uint64_t src_offset, const vk::BufferPtr& dst,
                    uint64_t dst_offset, uint64_t bytes);
    // The stream every command of this backend goes to (benchmarks time it).
    vk::Stream& stream() { return stream_; }
    // A device buffer of `count` floats (scratch for one op).
    vk::BufferPtr scratch(int64_t count);
    // A device buffer holding host values (ids, gains, tables), uploaded in stream order.
    vk::BufferPtr upload(const void* src, uint64_t bytes);

private:
    // Writes host bytes to the start of b in stream order: small tables from push constants (write_words),
    // the rest through the stream's upload.
    void buffer_write(const vk::BufferPtr& b, const void* src, uint64_t bytes);
    void fault_check(OpKind op) const;  // throws coli::Error when COLI_VULKAN_FAIL_OP names op
    void check_owner(const Tensor& t, const char* what) const;
    static const vk::DeviceWeight& resident(const Weight& w, const char* op);  // throws when on host only
    // moe_experts' two paths (moe.cpp).
    void moe_batched(const vk::MoePlan& p, std::span<const ExpertWeights> experts, const Routing& r,
                     const Tensor& x, Tensor& y);
    void moe_per_expert(const vk::MoePlan& p, std::span<const ExpertWeights> experts, const Tensor& x,
                        Tensor& y);
    // scores [rows, keys] -> probabilities per row, in place (-inf entries get 0).
    void softmax_rows(const vk::BufferPtr& scores, int64_t rows, int64_t keys);
    // GQA attention of `queries` queries from i0 in splits of each row's keys, joined per row.
    void attention_split(const Tensor& q, const KvCache& cache, const AttentionShape& s, int64_t i0,
                         int64_t queries, int64_t pos0, Tensor& out);
    // out = p v for a chunk of queries (attn_mix.comp), split over the keys when long.
    void attn_mix(const vk::BufferPtr& p, const vk::BufferPtr& v, const vk::BufferPtr& sel,
                  const vk::BufferPtr& out, const vk::MixShape& m);

    std::shared_ptr<vk::Context> ctx_;
    vk::Pipelines pipelines_;
    vk::Stream stream_;
    CpuBackend host_;                       // the routers run on the host, by the CPU's code
    vk::BufferPtr placeholder_;             // bound where a shader does not use a binding
    uint64_t budget_ = 0;                   // bytes for dense weights + expert tier
    uint64_t dense_bytes_ = 0;              // dense weights resident
    uint64_t dense_on_host_ = 0;            // dense weights left on the host (over budget or too large)
    std::unique_ptr<vk::ExpertTier> tier_;  // made at the first moe_experts, with what dense left
    std::array<bool, static_cast<size_t>(OpKind::count_)> fail_{};  // ops with an injected fault
};

// The device buffer behind a tensor of the Vulkan backend.
vk::BufferPtr buffer_of(const Tensor& t);
// Workgroups of `threads` for a grid-stride loop over count elements.
uint32_t groups_for(int64_t count, uint32_t threads);

}  // namespace coli
