#include "backend/vulkan/pipelines.h"

#include "backend/vulkan/pipeline_stats.h"
#include "backend/vulkan/spirv_access.h"
#include "core/error.h"

namespace coli::vk {

Pipelines::~Pipelines() {
    const Api& api = ctx_->api;
    for (auto& [key, p] : cache_) api.vkDestroyPipeline(ctx_->device, p.pipeline, nullptr);
    for (auto& [name, m] : modules_) api.vkDestroyShaderModule(ctx_->device, m.first, nullptr);
}

Pipeline Pipelines::get(std::string_view name, std::span<const uint32_t> spec) {
    std::pair<std::string, std::vector<uint32_t>> key{std::string(name),
                                                      std::vector<uint32_t>(spec.begin(), spec.end())};
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    const Api& api = ctx_->api;
    auto mod = modules_.find(name);
    if (mod == modules_.end()) {
        const std::span<const uint32_t> code = shader_spirv(name);
        VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
        mci.codeSize = code.size_bytes();
        mci.pCode = code.data();
        VkShaderModule m = VK_NULL_HANDLE;
        vk_check(api.vkCreateShaderModule(ctx_->device, &mci, nullptr, &m), "vkCreateShaderModule");
        mod = modules_.emplace(std::string(name), std::pair{m, spirv_written_bindings(code)}).first;
    }
    std::vector<VkSpecializationMapEntry> entries;
    for (uint32_t i = 0; i < key.second.size(); ++i)
        entries.push_back({i, static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)});
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(),
                            key.second.size() * sizeof(uint32_t), key.second.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod->second.first;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &si;
    ci.layout = ctx_->pipeline_layout;
    if (ctx_->pipeline_stats) ci.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    VkPipeline p = VK_NULL_HANDLE;
    const VkResult r = api.vkCreateComputePipelines(ctx_->device, VK_NULL_HANDLE, 1, &ci, nullptr, &p);
    check(r == VK_SUCCESS, "vulkan: building the pipeline of shader '{}' failed: {}", name,
          vk_result_name(r));
    if (ctx_->pipeline_stats) pipeline_stats_print(*ctx_, p, name, key.second);
    const Pipeline pipeline{p, mod->second.second, mod->first.c_str()};
    cache_.emplace(std::move(key), pipeline);
    return pipeline;
}

}  // namespace coli::vk
