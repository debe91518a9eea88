#include "backend/vulkan/pipeline_stats.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace coli::vk {

namespace {

constexpr const char* kStatsEnv = "COLI_VULKAN_PIPELINE_STATS";

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

// Writes the text representations of executable `index` to dir, one file each.
void representations_write(const Context& ctx, const VkPipelineExecutableInfoKHR& info,
                           const std::filesystem::path& dir, const std::string& stem) {
    const Api& api = ctx.api;
    if (api.vkGetPipelineExecutableInternalRepresentationsKHR == nullptr) return;
    uint32_t count = 0;
    api.vkGetPipelineExecutableInternalRepresentationsKHR(ctx.device, &info, &count, nullptr);
    std::vector<VkPipelineExecutableInternalRepresentationKHR> reps(
        count, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR});
    api.vkGetPipelineExecutableInternalRepresentationsKHR(ctx.device, &info, &count, reps.data());
    std::vector<std::vector<char>> text(count);
    for (uint32_t i = 0; i < count; ++i) {
        text[i].resize(reps[i].dataSize);
        reps[i].pData = text[i].data();
    }
    api.vkGetPipelineExecutableInternalRepresentationsKHR(ctx.device, &info, &count, reps.data());
    for (uint32_t i = 0; i < count; ++i) {
        if (!reps[i].isText) continue;
        std::ofstream(dir / fmt::format("{}_{}.txt", stem, i)) << reps[i].name << "\n" << text[i].data();
    }
}

}  // namespace

void pipeline_stats_print(const Context& ctx, VkPipeline p, std::string_view name,
                          std::span<const uint32_t> spec) {
    const Api& api = ctx.api;
    if (api.vkGetPipelineExecutablePropertiesKHR == nullptr) return;
    const char* env = std::getenv(kStatsEnv);
    const std::filesystem::path dir = env != nullptr ? env : "";
    const bool dump = !dir.empty() && std::filesystem::is_directory(dir);
    VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pi.pipeline = p;
    uint32_t executables = 0;
    api.vkGetPipelineExecutablePropertiesKHR(ctx.device, &pi, &executables, nullptr);
    std::vector<VkPipelineExecutablePropertiesKHR> props(
        executables, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
    api.vkGetPipelineExecutablePropertiesKHR(ctx.device, &pi, &executables, props.data());
    for (uint32_t e = 0; e < executables; ++e) {
        VkPipelineExecutableInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
        info.pipeline = p;
        info.executableIndex = e;
        uint32_t count = 0;
        api.vkGetPipelineExecutableStatisticsKHR(ctx.device, &info, &count, nullptr);
        std::vector<VkPipelineExecutableStatisticKHR> stats(
            count, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
        api.vkGetPipelineExecutableStatisticsKHR(ctx.device, &info, &count, stats.data());
        std::vector<std::string> items;
        for (const auto& s : stats) items.push_back(fmt::format("{} {}", s.name, statistic_value(s)));
        fmt::print(stderr, "vulkan pipeline {} {{{}}} ({}, subgroup {}): {}\n", name, fmt::join(spec, ","),
                   props[e].name, props[e].subgroupSize, fmt::join(items, ", "));
        if (dump)
            representations_write(ctx, info, dir, fmt::format("{}_{}_{}", name, fmt::join(spec, "_"), e));
    }
}

}  // namespace coli::vk
