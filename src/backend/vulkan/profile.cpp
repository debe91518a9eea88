#include "backend/vulkan/profile.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace coli::vk {

namespace {
constexpr double kUsPerMs = 1e3;
constexpr uint32_t kQueriesPerDispatch = 2;  // start and end
}  // namespace

DispatchProfile::DispatchProfile(std::shared_ptr<Context> ctx, uint32_t queries_per_batch, int batches)
    : ctx_(std::move(ctx)), per_batch_(queries_per_batch), shaders_(batches) {
    check(ctx_->timestamp_bits > 0, "vulkan: COLI_VULKAN_PROFILE needs timestamps, which the queue lacks");
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = per_batch_ * static_cast<uint32_t>(batches);
    vk_check(ctx_->api.vkCreateQueryPool(ctx_->device, &qci, nullptr, &pool_), "vkCreateQueryPool (profile)");
}

DispatchProfile::~DispatchProfile() {
    ctx_->api.vkDestroyQueryPool(ctx_->device, pool_, nullptr);
}

void DispatchProfile::batch_begin(VkCommandBuffer cmd, int b) {
    shaders_[b].clear();
    ctx_->api.vkCmdResetQueryPool(cmd, pool_, per_batch_ * b, per_batch_);
}

void DispatchProfile::dispatch_start(VkCommandBuffer cmd, int b, const char* shader) {
    const auto q = per_batch_ * b + kQueriesPerDispatch * static_cast<uint32_t>(shaders_[b].size());
    check(q + kQueriesPerDispatch <= per_batch_ * (b + 1),
          "vulkan profile: a batch took more dispatches than {}", per_batch_ / kQueriesPerDispatch);
    shaders_[b].push_back(shader);
    ctx_->api.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, q);
}

void DispatchProfile::dispatch_end(VkCommandBuffer cmd, int b) {
    const auto q = per_batch_ * b + kQueriesPerDispatch * static_cast<uint32_t>(shaders_[b].size()) - 1;
    ctx_->api.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, q);
}

void DispatchProfile::batch_done(int b) {
    const std::vector<const char*>& shaders = shaders_[b];
    if (shaders.empty()) return;
    std::vector<uint64_t> ticks(kQueriesPerDispatch * shaders.size());
    vk_check(ctx_->api.vkGetQueryPoolResults(ctx_->device, pool_, per_batch_ * b,
                                             static_cast<uint32_t>(ticks.size()),
                                             ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
             "vkGetQueryPoolResults (profile)");
    for (size_t i = 0; i < shaders.size(); ++i) {
        Line& line = lines_[shaders[i]];
        ++line.calls;
        line.ms += ctx_->timestamp_span_ms(ticks[2 * i], ticks[2 * i + 1]);
    }
    shaders_[b].clear();
}

std::string DispatchProfile::report() const {
    std::vector<std::pair<std::string, Line>> sorted(lines_.begin(), lines_.end());
    std::ranges::sort(sorted, [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0;
    for (const auto& [name, line] : sorted) total += line.ms;
    std::string s = fmt::format(
        "vulkan profile (COLI_VULKAN_PROFILE): device time of each dispatch alone, after a barrier; "
        "{:.3f} ms in all\n{:<28} {:>8} {:>11} {:>9} {:>7}\n",
        total, "shader", "calls", "total ms", "us/call", "share");
    for (const auto& [name, line] : sorted)
        s += fmt::format("{:<28} {:>8} {:>11.3f} {:>9.2f} {:>6.1f}%\n", name, line.calls, line.ms,
                         line.ms * kUsPerMs / static_cast<double>(line.calls),
                         total > 0 ? 100 * line.ms / total : 0);
    return s;
}

}  // namespace coli::vk
