// moe_experts on Vulkan. The experts' weights come from the device tier; every upload is queued before the
// commands that read it.
//   decode (every expert has at most kVulkanGemvMaxTokens tokens; one d_ff, format and activation): one
//     upload of the routing, one batched GEMV for every expert's gate and up that writes the activation
//     (SwiGLU, SiTU or clamped SwiGLU), one batched GEMV for the downs and one combine that adds each
//     token's expert outputs in the CPU's order: three dispatches per layer, however many experts.
//   otherwise: per expert, in the order given (ascending id, as the CPU adds them): gather its tokens, gate
//     and up matmuls, the activation, down matmul, add back weighted.
#include <bit>
#include <limits>
#include <vector>

#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kThreads = 256;  // local size of the grid-stride shaders
// glu.comp and gemv.comp are specialized by the GluKind itself (activations.glsl's kGluSilu, kGluSitu,
// kGluSiluClamp).
static_assert(static_cast<uint32_t>(GluKind::silu) == 0 && static_cast<uint32_t>(GluKind::situ) == 1 &&
                  static_cast<uint32_t>(GluKind::silu_clamp) == 2,
              "activations.glsl numbers the GLU kinds as activations.h does");

struct RowsPush {
    uint32_t m, d, first;
};
struct GluPush {
    uint32_t count;     // elements
    float beta;         // SiTU: the gate's tanh bound; clamped SwiGLU: the limit
    float linear_beta;  // SiTU: the up projection's tanh bound
};
struct CombinePush {
    uint32_t n, k, d;
    uint32_t slot_first;  // moe_combine.comp's table: where the slots start
    uint32_t gain_first;  // and the gains
};

bool gemv_takes(const Weight& w) {
    return vk::gemv_fits(vk::DeviceWeight{w.format(), w.rows(), w.cols()});
}

// The batched GEMVs take kVulkanGemvMaxTokens rows of an expert; the combine reads its slots from a buffer.
constexpr MoeBatchLimits kBatchLimits{kVulkanGemvMaxTokens, std::numeric_limits<int>::max(), gemv_takes};

}  // namespace

void VulkanBackend::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                                Tensor& y) {
    const MoePlan p = moe_begin(experts, r, x, y);
    vk::ExpertTier& tier = tier_for_call<vk::ExpertTier>();
    if (p.used.empty()) return;
    const std::vector<vk::DeviceExpertPtr> dev = tier.acquire_all(experts, p.used);
    // The batched GEMV binds an expert's gate and up at once: two weight slots.
    if (ctx_->weight_slots >= 2 && moe_batchable(p, experts, r, kBatchLimits))
        moe_batched(dev, p, experts, r, x, y);
    else
        moe_per_expert(dev, p, experts, x, y);
    stream_.flush();  // the device runs the experts while the host records what follows
}

void VulkanBackend::moe_batched(std::span<const vk::DeviceExpertPtr> dev, const MoePlan& p,
                                std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                                Tensor& y) {
    const int64_t d_model = x.cols(), d_ff = experts[p.used.front()].gate.rows();
    const auto total = static_cast<uint32_t>(p.total());
    const auto slots = static_cast<uint32_t>(r.n_tokens * r.k);

    // One table: the routed rows' tokens, then the combine's slots (moe_slots: -1 for none), then their
    // gains (as f32 bits).
    const MoeSlots combine = moe_slots(p, r);
    std::vector<int32_t> table(p.rows);
    table.insert(table.end(), combine.rows.begin(), combine.rows.end());
    for (float g : combine.gains) table.push_back(std::bit_cast<int32_t>(g));
    const vk::BufferPtr routing = upload(table.data(), table.size() * sizeof(int32_t));

    vk::GemvJobs gate_up{{}, 2, {0}, buffer_of(x), routing, scratch(total * d_ff), experts[p.used[0]].act};
    vk::GemvJobs down{{}, 1, {0}, gate_up.y, nullptr, scratch(total * d_model), {}};
    for (size_t u = 0; u < p.used.size(); ++u) {
        gate_up.weights.insert(gate_up.weights.end(), {&dev[u]->gate, &dev[u]->up});
        down.weights.push_back(&dev[u]->down);
        gate_up.first.push_back(static_cast<uint32_t>(p.offset[p.used[u] + 1]));
    }
    down.first = gate_up.first;
    gemv(gate_up);  // [total, d_ff]: the activation
    gemv(down);     // [total, d_model]
    run("moe_combine", {}, {down.y, routing, buffer_of(y)},
        CombinePush{uint32_t(r.n_tokens), uint32_t(r.k), uint32_t(d_model), total, total + slots},
        groups_for(r.n_tokens * d_model, kThreads));
}

void VulkanBackend::moe_per_expert(std::span<const vk::DeviceExpertPtr> dev, const MoePlan& p,
                                   std::span<const ExpertWeights> experts, const Tensor& x, Tensor& y) {
    const int64_t d_model = x.cols();
    const vk::BufferPtr rows = upload(p.rows.data(), p.rows.size() * sizeof(int32_t));
    const vk::BufferPtr row_gains = upload(p.gains.data(), p.gains.size() * sizeof(float));
    for (size_t u = 0; u < p.used.size(); ++u) {
        const size_t i = p.used[u];
        const int64_t m = p.rows_of(i);
        const int64_t d_ff = experts[i].gate.rows();
        const vk::BufferPtr xs = scratch(m * d_model), gate = scratch(m * d_ff), up = scratch(m * d_ff),
                            out = scratch(m * d_model);
        const RowsPush rp{uint32_t(m), uint32_t(d_model), uint32_t(p.offset[i])};
        run("gather_rows", {}, {buffer_of(x), rows, xs}, rp, groups_for(m * d_model, kThreads));
        matmul_device(dev[u]->gate, xs, m, gate);  // [m, d_ff]
        matmul_device(dev[u]->up, xs, m, up);      // [m, d_ff]
        const GluActivation& act = experts[i].act;
        run("glu", {static_cast<uint32_t>(act.kind)}, {gate, up},
            GluPush{uint32_t(m * d_ff), act.beta, act.linear_beta}, groups_for(m * d_ff, kThreads));
        matmul_device(dev[u]->down, gate, m, out);  // [m, d_model]
        run("scatter_add", {}, {out, rows, row_gains, buffer_of(y)}, rp, groups_for(m * d_model, kThreads));
    }
}

}  // namespace coli
