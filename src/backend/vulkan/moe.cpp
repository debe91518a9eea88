// moe_experts on Vulkan: per expert, in the order given (ascending id, as the CPU adds them): gather its
// tokens, gate and up matmuls, the experts' activation (SwiGLU or SiTU), down matmul, add back weighted.
// The experts' weights come from the device tier, and the routing (every expert's tokens and gains) is
// uploaded once per call; every upload is queued before the commands that read it.
#include <vector>

#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kThreads = 256;  // local size of the grid-stride shaders
// glu.comp is specialized by the GluKind itself (activations.glsl's kGluSilu, kGluSitu).
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

}  // namespace

void VulkanBackend::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                                Tensor& y) {
    fault_check(OpKind::moe_experts);
    const int64_t d_model = x.cols();
    check_shape(y, x.rows(), d_model, "moe_experts y");
    check(r.n_tokens == x.rows(), "moe_experts: routing for {} tokens, x has {}", r.n_tokens, x.rows());
    check_owner(x, "moe_experts x");
    check_owner(y, "moe_experts y");
    if (!tier_)
        tier_ =
            std::make_unique<vk::ExpertTier>(stream_, budget_ > dense_bytes_ ? budget_ - dense_bytes_ : 0);
    tier_->call_begin();
    std::vector<int32_t> tokens;    // the tokens routed to each expert, expert after expert
    std::vector<float> gains;       // their routing weights
    std::vector<size_t> offset{0};  // expert i's rows: [offset[i], offset[i + 1])
    for (const ExpertWeights& e : experts) {
        check(e.gate.cols() == d_model && e.up.cols() == d_model && e.down.rows() == d_model &&
                  e.down.cols() == e.gate.rows() && e.up.rows() == e.gate.rows(),
              "moe_experts: expert {} has shapes that do not fit d_model {}", e.id, d_model);
        for (int64_t t = 0; t < r.n_tokens; ++t)
            for (int j = 0; j < r.k; ++j)
                if (r.experts[t * r.k + j] == e.id) {
                    tokens.push_back(static_cast<int32_t>(t));
                    gains.push_back(r.weights[t * r.k + j]);
                }
        offset.push_back(tokens.size());
    }
    if (tokens.empty()) return;
    const vk::BufferPtr rows = upload(tokens.data(), tokens.size() * sizeof(int32_t));
    const vk::BufferPtr row_gains = upload(gains.data(), gains.size() * sizeof(float));
    for (size_t i = 0; i < experts.size(); ++i) {
        const auto m = static_cast<int64_t>(offset[i + 1] - offset[i]);
        if (m == 0) continue;
        const int64_t d_ff = experts[i].gate.rows();
        const std::shared_ptr<vk::DeviceExpert> dev = tier_->acquire(experts[i]);
        const vk::BufferPtr xs = scratch(m * d_model), gate = scratch(m * d_ff), up = scratch(m * d_ff),
                            out = scratch(m * d_model);
        const RowsPush rp{uint32_t(m), uint32_t(d_model), uint32_t(offset[i])};
        run("gather_rows", {}, {buffer_of(x), rows, xs}, rp, groups_for(m * d_model, kThreads));
        matmul_device(dev->gate, xs, m, gate);  // [m, d_ff]
        stream_.concurrent_next();
        matmul_device(dev->up, xs, m, up);  // [m, d_ff]
        const GluActivation& act = experts[i].act;
        run("glu", {static_cast<uint32_t>(act.kind)}, {gate, up},
            GluPush{uint32_t(m * d_ff), act.beta, act.linear_beta}, groups_for(m * d_ff, kThreads));
        matmul_device(dev->down, gate, m, out);  // [m, d_model]
        run("scatter_add", {}, {out, rows, row_gains, buffer_of(y)}, rp, groups_for(m * d_model, kThreads));
    }
}

}  // namespace coli
