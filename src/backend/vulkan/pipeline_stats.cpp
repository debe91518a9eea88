#include "backend/vulkan/pipeline_stats.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

namespace coli::vk {

namespace {

std::string statistic_value(const VkPipelineExecutableStatisticKHR& s) {
    switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
            return s.value.b32 ? "yes" : "no";
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
            return fmt::format("{}", s.value.i64);
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
            return fmt::format("{}", s.value.u64);
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
            return fmt::format("{:g}", s.value.f64);
        default:
            return "?";
    }
}

// Every T that `get(count, data)` reports, Vulkan's two-call way: the count, then the items (each made with
// its structure type).
template <typename T, typename Get>
std::vector<T> query_all(VkStructureType type, Get&& get) {
    uint32_t count = 0;
    get(&count, static_cast<T*>(nullptr));
    std::vector<T> items(count, T{type});
    get(&count, items.data());
    items.resize(count);
    return items;
}

}  // namespace

void pipeline_stats_print(const Context& ctx, VkPipeline p, std::string_view name,
                          std::span<const uint32_t> spec) {
    const Api& api = ctx.api;
    if (api.vkGetPipelineExecutablePropertiesKHR == nullptr) return;
    VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pi.pipeline = p;
    const auto props = query_all<VkPipelineExecutablePropertiesKHR>(
        VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR, [&](uint32_t* count, auto* data) {
            api.vkGetPipelineExecutablePropertiesKHR(ctx.device, &pi, count, data);
        });
    for (uint32_t e = 0; e < props.size(); ++e) {
        VkPipelineExecutableInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
        info.pipeline = p;
        info.executableIndex = e;
        const auto stats = query_all<VkPipelineExecutableStatisticKHR>(
            VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR, [&](uint32_t* count, auto* data) {
                api.vkGetPipelineExecutableStatisticsKHR(ctx.device, &info, count, data);
            });
        std::vector<std::string> items;
        for (const auto& s : stats) items.push_back(fmt::format("{} {}", s.name, statistic_value(s)));
        fmt::print(stderr, "vulkan pipeline {} {{{}}} ({}, subgroup {}): {}\n", name, fmt::join(spec, ","),
                   props[e].name, props[e].subgroupSize, fmt::join(items, ", "));
    }
}

}  // namespace coli::vk
