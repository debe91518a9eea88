// moe_experts on Vulkan. The experts' weights come from the device tier; every upload is queued before the
// commands that read it.
//   decode (every expert has at most kVulkanGemvMaxTokens tokens; one d_ff, format and activation): one
//     upload of the routing, one batched GEMV for every expert's gate and up that writes the activation
//     (SwiGLU or SiTU), one batched GEMV for the downs and one combine that adds each token's expert
//     outputs in the CPU's order: three dispatches per layer, however many experts.
//   otherwise: per expert, in the order given (ascending id, as the CPU adds them): gather its tokens, gate
//     and up matmuls, the activation, down matmul, add back weighted.
#include <bit>
#include <vector>

#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kThreads = 256;  // local size of the grid-stride shaders
// glu.comp and gemv.comp are specialized by the GluKind itself (activations.glsl's kGluSilu, kGluSitu).
static_assert(static_cast<uint32_t>(GluKind::silu) == 0 && static_cast<uint32_t>(GluKind::situ) == 1,
              "activations.glsl numbers the GLU kinds as activations.h does");

struct RowsPush {
    uint32_t m, d, first;
};
struct GluPush {
    uint32_t count;     // elements
    float beta;         // SiTU: the gate's tanh bound
    float linear_beta;  // SiTU: the up projection's tanh bound
};
struct CombinePush {
    uint32_t n, k, d;
    uint32_t slot_first;  // moe_combine.comp's table: where the slots start
    uint32_t gain_first;  // and the gains
};

bool same_act(const GluActivation& a, const GluActivation& b) {
    return a.kind == b.kind && a.beta == b.beta && a.linear_beta == b.linear_beta;
}

bool gemv_takes(const Weight& w, Format f) {
    return w.format() == f && vk::gemv_fits(vk::DeviceWeight{w.format(), w.rows(), w.cols()});
}

}  // namespace

namespace vk {

// Which rows go to which expert.
struct MoePlan {
    std::vector<int32_t> rows;   // token of each routed row, grouped by expert, in token order
    std::vector<float> gains;    // router weight of each routed row
    std::vector<size_t> offset;  // expert i's rows: [offset[i], offset[i + 1])
    std::vector<size_t> used;    // experts with rows, in span order
    bool batchable = true;       // the batched GEMVs take the call (see the top of this file)
};

}  // namespace vk

void VulkanBackend::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                                Tensor& y) {
    fault_check(OpKind::moe_experts);
    const int64_t d_model = x.cols();
    check_shape(y, x.rows(), d_model, "moe_experts y");
    check(r.n_tokens == x.rows(), "moe_experts: routing for {} tokens, x has {}", r.n_tokens, x.rows());
    check_owner(x, "moe_experts x");
    check_owner(y, "moe_experts y");
    if (!tier_) tier_ = vk::expert_tier_new(stream_, budget_ > dense_bytes_ ? budget_ - dense_bytes_ : 0);
    tier_->call_begin();
    vk::MoePlan p;
    p.offset.push_back(0);
    p.batchable = ctx_->weight_slots >= 2;
    for (size_t i = 0; i < experts.size(); ++i) {
        const ExpertWeights& e = experts[i];
        check(e.gate.cols() == d_model && e.up.cols() == d_model && e.down.rows() == d_model &&
                  e.down.cols() == e.gate.rows() && e.up.rows() == e.gate.rows(),
              "moe_experts: expert {} has shapes that do not fit d_model {}", e.id, d_model);
        for (int64_t t = 0; t < r.n_tokens; ++t)
            for (int j = 0; j < r.k; ++j)
                if (r.experts[t * r.k + j] == e.id) {
                    p.rows.push_back(static_cast<int32_t>(t));
                    p.gains.push_back(r.weights[t * r.k + j]);
                }
        p.offset.push_back(p.rows.size());
        if (p.offset[i + 1] == p.offset[i]) continue;
        p.used.push_back(i);
        const ExpertWeights& e0 = experts[p.used.front()];
        p.batchable = p.batchable && p.offset[i + 1] - p.offset[i] <= kVulkanGemvMaxTokens &&
                      e.gate.rows() == e0.gate.rows() && same_act(e.act, e0.act) &&
                      gemv_takes(e.gate, e0.gate.format()) && gemv_takes(e.up, e0.gate.format()) &&
                      gemv_takes(e.down, e0.down.format());
    }
    if (p.rows.empty()) return;
    if (p.batchable)
        moe_batched(p, experts, r, x, y);
    else
        moe_per_expert(p, experts, x, y);
    stream_.flush();  // the device runs the experts while the host records what follows
}

void VulkanBackend::moe_batched(const vk::MoePlan& p, std::span<const ExpertWeights> experts,
                                const Routing& r, const Tensor& x, Tensor& y) {
    const int64_t d_model = x.cols(), d_ff = experts[p.used.front()].gate.rows();
    const auto total = static_cast<uint32_t>(p.rows.size());
    const auto slots = static_cast<uint32_t>(r.n_tokens * r.k);
    std::vector<std::shared_ptr<vk::DeviceExpert>> dev;
    for (size_t i : p.used) dev.push_back(tier_->acquire(experts[i]));

    // One table: the routed rows' tokens, then each token's rows in the order the experts come (-1: none),
    // then their gains (as f32 bits).
    std::vector<int32_t> table(p.rows);
    table.resize(total + 2 * slots, -1);
    std::vector<int> filled(r.n_tokens, 0);
    for (size_t i : p.used)
        for (size_t j = p.offset[i]; j < p.offset[i + 1]; ++j) {
            const size_t s = p.rows[j] * r.k + filled[p.rows[j]]++;
            table[total + s] = static_cast<int32_t>(j);
            table[total + slots + s] = std::bit_cast<int32_t>(p.gains[j]);
        }
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

void VulkanBackend::moe_per_expert(const vk::MoePlan& p, std::span<const ExpertWeights> experts,
                                   const Tensor& x, Tensor& y) {
    const int64_t d_model = x.cols();
    const vk::BufferPtr rows = upload(p.rows.data(), p.rows.size() * sizeof(int32_t));
    const vk::BufferPtr row_gains = upload(p.gains.data(), p.gains.size() * sizeof(float));
    for (size_t i : p.used) {
        const auto m = static_cast<int64_t>(p.offset[i + 1] - p.offset[i]);
        const int64_t d_ff = experts[i].gate.rows();
        const std::shared_ptr<vk::DeviceExpert> dev = tier_->acquire(experts[i]);
        const vk::BufferPtr xs = scratch(m * d_model), gate = scratch(m * d_ff), up = scratch(m * d_ff),
                            out = scratch(m * d_model);
        const RowsPush rp{uint32_t(m), uint32_t(d_model), uint32_t(p.offset[i])};
        run("gather_rows", {}, {buffer_of(x), rows, xs}, rp, groups_for(m * d_model, kThreads));
        matmul_device(dev->gate, xs, m, gate);  // [m, d_ff]
        matmul_device(dev->up, xs, m, up);      // [m, d_ff]
        const GluActivation& act = experts[i].act;
        run("glu", {static_cast<uint32_t>(act.kind)}, {gate, up},
            GluPush{uint32_t(m * d_ff), act.beta, act.linear_beta}, groups_for(m * d_ff, kThreads));
        matmul_device(dev->down, gate, m, out);  // [m, d_model]
        run("scatter_add", {}, {out, rows, row_gains, buffer_of(y)}, rp, groups_for(m * d_model, kThreads));
    }
}

}  // namespace coli
