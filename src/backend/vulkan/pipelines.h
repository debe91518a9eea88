// Compute pipelines from the SPIR-V compiled into the binary, made on first use and kept, one per shader
// and set of specialization constants (weight format, tokens per pass, ...).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/vulkan/context.h"

namespace coli::vk {

// The SPIR-V words of a shader of this build (shaders_spv.cpp, generated). Throws for an unknown name.
std::span<const uint32_t> shader_spirv(std::string_view name);

// A compute pipeline and the bindings its shader may write (spirv_access.h).
struct Pipeline {
    VkPipeline pipeline = VK_NULL_HANDLE;  // the pipeline
    uint32_t written = 0;                  // bit b: binding b may be written
    const char* name = "";                 // its shader's name (kept by Pipelines)
};

class Pipelines {
public:
    explicit Pipelines(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
    ~Pipelines();
    Pipelines(const Pipelines&) = delete;
    Pipelines& operator=(const Pipelines&) = delete;

    // The pipeline of shader `name` with specialization constants 0, 1, ... set to spec.
    Pipeline get(std::string_view name, std::span<const uint32_t> spec);
    Pipeline get(std::string_view name, std::initializer_list<uint32_t> spec = {}) {
        return get(name, std::span<const uint32_t>(spec.begin(), spec.size()));
    }

private:
    std::shared_ptr<Context> ctx_;
    std::map<std::string, std::pair<VkShaderModule, uint32_t>, std::less<>>
        modules_;                                                              // by name: module, writes
    std::map<std::pair<std::string, std::vector<uint32_t>>, Pipeline> cache_;  // by (name, spec)
};

}  // namespace coli::vk
