// The Vulkan backend: every op of backend.h on one Vulkan 1.2 device, for every weight format of format.h.
//
// Placement, budget, faults: DeviceBackend (backend/device/device_backend.h). Activations (Tensor storage)
// are device buffers; only tensor_read / tensor_write and the routers' inputs cross to the host. Commands
// queue on one stream and run when the host needs a result.
#pragma once

#include <array>
#include <initializer_list>
#include <memory>
#include <string_view>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device/device_backend.h"
#include "backend/moe_plan.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/expert_tier.h"
#include "backend/vulkan/gemv.h"
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/stream.h"
#include "backend/vulkan/weights.h"

namespace coli {

namespace vk {
struct MixShape;  // attention.cpp
}  // namespace vk

// Device memory kept free for activations, KV caches and scratch when --vram-gb is not given.
inline constexpr uint64_t kVulkanVramReserve = 2ull << 30;
// On small devices (integrated GPUs, lavapipe) the reserve is at most this fraction of the heap: 1 / 4.
inline constexpr uint64_t kVulkanReserveShare = 4;

class VulkanBackend final : public DeviceBackend {
public:
    VulkanBackend(std::shared_ptr<vk::Context> ctx, uint64_t vram_bytes, ThreadPool& pool);

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
    void copy_rows(Tensor& dst, const Tensor& src, int64_t row0) override;
    void compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring, const Tensor& entries,
                              const Tensor* selection, const Weight& sinks, const CompressedAttentionShape& s,
                              int64_t pos0, Tensor& out) override;
    void compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                     const Tensor& state_gate, const CompressShape& s, int64_t pos0, Tensor& out) override;
    void index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                    int64_t pos0, Tensor& out) override;
    void hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                    Tensor& out) override;
    void hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out) override;
    void hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                   Tensor& out) override;
    void repeat_cols(const Tensor& x, int times, Tensor& out) override;

    // y = x w^T on device buffers, GEMV or GEMM by n (matmul.cpp); block-diagonal with groups > 1 (Backend::
    // matmul).                                       x: [n, groups w.cols]; y: [n, w.rows]
    void matmul_device(const vk::DeviceWeight& w, const vk::BufferPtr& x, int64_t n, const vk::BufferPtr& y,
                       int64_t groups = 1);
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
    std::string device_description() const override;
    uint64_t weight_device_bytes(const WeightView& w) const override;
    std::shared_ptr<void> weight_to_device(const WeightView& w) override;
    bool weight_placeable(const Weight& w) const override;  // within the largest storage buffer
    std::unique_ptr<ExpertTier> tier_create(uint64_t capacity) override;

    // A dense weight's device copy; throws when it stayed on the host.
    const vk::DeviceWeight& resident(const Weight& w, const char* op) const {
        return DeviceBackend::resident<vk::DeviceWeight>(w, op);
    }
    // moe_experts' two paths (moe.cpp); dev[u]: the device copy of experts[p.used[u]].
    void moe_batched(std::span<const vk::DeviceExpertPtr> dev, const MoePlan& p,
                     std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x, Tensor& y);
    void moe_per_expert(std::span<const vk::DeviceExpertPtr> dev, const MoePlan& p,
                        std::span<const ExpertWeights> experts, const Tensor& x, Tensor& y);
    // scores [rows, keys] -> probabilities per row, in place (-inf entries get 0); with sinks ([heads]), row
    // r's denominator also takes exp(sinks[r mod heads]).
    void softmax_rows(const vk::BufferPtr& scores, int64_t rows, int64_t keys,
                      const vk::BufferPtr& sinks = nullptr, int64_t heads = 1);
    // GQA attention of `queries` queries from i0 in splits of each row's keys, joined per row.
    void attention_split(const Tensor& q, const KvCache& cache, const AttentionShape& s, int64_t i0,
                         int64_t queries, int64_t pos0, Tensor& out);
    // The DSA indexer's scores and top-k (dsa_scores.comp, dsa_topk.comp): query i sees keys
    // [0, (pos0 + i + 1) / ratio); sequential: dot products summed as one running sum (index_topk's CPU
    // order), else in dsa_select's lanes.           keys: [>= (pos0 + n) / ratio, head_dim]; out: [n, top_k]
    void index_select(const Tensor& q, const Tensor& weights, const vk::BufferPtr& keys, const DsaShape& s,
                      int64_t pos0, int64_t ratio, bool sequential, Tensor& out);
    // out = p v for a chunk of queries (attn_mix.comp), split over the keys when long.
    void attn_mix(const vk::BufferPtr& p, const vk::BufferPtr& v, const vk::BufferPtr& sel,
                  const vk::BufferPtr& out, const vk::MixShape& m);

    std::shared_ptr<vk::Context> ctx_;
    vk::Pipelines pipelines_;
    vk::Stream stream_;
    CpuBackend host_;            // the routers run on the host, by the CPU's code
    vk::BufferPtr placeholder_;  // bound where a shader does not use a binding
};

// copy_cols.comp's push constants: out[r][j] = x[r][c0 + j % period] (slice_cols, repeat_cols).
struct CopyColsPush {
    uint32_t rows, src_cols, c0, width, period;
};

// The device buffer behind a tensor of the Vulkan backend.
vk::BufferPtr buffer_of(const Tensor& t);
// Workgroups of `threads` for a grid-stride loop over count elements.
uint32_t groups_for(int64_t count, uint32_t threads);

}  // namespace coli
