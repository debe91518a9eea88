// What the driver says about a pipeline's compiled code (VK_KHR_pipeline_executable_properties), for
// finding why a shader runs below its bound: registers, spills, shared memory, instruction counts, as
// the driver names them. Enabled by COLI_VULKAN_PIPELINE_STATS (context.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "backend/vulkan/context.h"

namespace coli::vk {

// Prints one line per executable of pipeline p (shader `name`, specialization constants `spec`) to stderr.
void pipeline_stats_print(const Context& ctx, VkPipeline p, std::string_view name,
                          std::span<const uint32_t> spec);

}  // namespace coli::vk
