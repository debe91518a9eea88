// Attention residuals (Kimi K3, docs/models.md 7.1) on Vulkan, entry by entry so that any number of entries
// works with the shaders' fixed bindings and without stacking the entries in a copy: each entry's score per
// token (res_mix_score.comp), the softmax of each token's scores (res_mix_softmax.comp), then, entry by entry
// in order, its weighted rows summed into out (res_mix_sum.comp).
#include <algorithm>

#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr uint32_t kThreads = 256;  // local size of the shaders

}  // namespace

void VulkanBackend::res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) {
    fault_check(OpKind::res_mix);
    res_mix_args_check(entries, w, out);
    for (const Tensor& e : entries) check_owner(e, "res_mix entry");
    check_owner(out, "res_mix out");
    const int64_t n = out.rows(), d = out.cols();
    const auto m = static_cast<int64_t>(entries.size());
    if (n == 0 || d == 0) return;
    const vk::BufferPtr& gain = resident(w, "res_mix").data;
    const vk::BufferPtr scores = scratch(m * n);  // [m, n]: the scores, then their softmax
    // One workgroup per token, in a 2-D grid when there are more tokens than one dimension holds.
    const auto gx = static_cast<uint32_t>(std::min<int64_t>(n, vk::kMaxGroups));
    const auto gy = static_cast<uint32_t>((n + gx - 1) / gx);
    for (int64_t e = 0; e < m; ++e) {
        const struct {
            uint32_t n, d, entry;
            float eps;
        } sp{static_cast<uint32_t>(n), static_cast<uint32_t>(d), static_cast<uint32_t>(e), eps};
        if (e > 0) stream_.concurrent_next();  // each entry's scores go to their own row
        run("res_mix_score", {}, {buffer_of(entries[e]), gain, scores}, sp, gx, gy);
    }
    const struct { uint32_t n, entries; } pp{static_cast<uint32_t>(n), static_cast<uint32_t>(m)};
    run("res_mix_softmax", {}, {scores}, pp, groups_for(n, kThreads));
    for (int64_t e = 0; e < m; ++e) {
        const struct {
            uint32_t n, d, entry;
        } mp{static_cast<uint32_t>(n), static_cast<uint32_t>(d), static_cast<uint32_t>(e)};
        run("res_mix_sum", {}, {buffer_of(entries[e]), scores, buffer_of(out)}, mp,
            groups_for(n * d, kThreads));
    }
}

}  // namespace coli
