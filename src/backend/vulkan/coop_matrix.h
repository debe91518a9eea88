// Whether a Vulkan device runs the cooperative-matrix GEMV (shaders/gemv_coop.comp and gemv_xtable.comp):
// VK_KHR_cooperative_matrix with 16x8x16 products of f16 into f32 in a subgroup, f16 arithmetic, the Vulkan
// memory model, subgroups of 32 with shuffles and arithmetic, and the shader's shared memory. The shader is
// written for GL_NV_cooperative_matrix and its SPIR-V rewritten to the KHR extension (spirv_coop.h). It
// writes matrices element by element in NVIDIA's layout, which the backend checks at start (coop_probe.comp).
// Devices without it (lavapipe, most non-NVIDIA drivers) run the FMA GEMV, and the backend's description
// says which one runs and why.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "backend/vulkan/loader.h"

namespace coli::vk {

// The probe's answer, and the feature structures to chain into VkDeviceCreateInfo when it is usable.
struct CoopMatrix {
    bool usable = false;  // the cooperative-matrix GEMV runs on this device
    std::string detail;   // what it uses, or why it does not run
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};  // cooperativeMatrix on
    VkPhysicalDeviceShaderFloat16Int8Features float16{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};  // shaderFloat16 on
    VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};  // vulkanMemoryModel on
};

// The device extension the GEMV needs.
inline constexpr const char* kCoopMatrixExtension = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;

// Probes device d (subgroup properties `sub`, limits in `props`). COLI_VULKAN_COOPMAT=0 turns it off.
CoopMatrix coop_matrix_probe(const Api& api, VkPhysicalDevice d,
                             const VkPhysicalDeviceSubgroupProperties& sub,
                             const VkPhysicalDeviceProperties& props);

// Words coop_probe.comp writes: A (16x16 f16), B (16x8 f16), C and D = A B + C (16x8 f32) row-major, then
// the lengths per lane of A, B and C.
inline constexpr size_t kCoopProbeWords = 16 * 16 / 2 + 16 * 8 / 2 + 2 * 16 * 8 + 3;

// Empty when coop_probe.comp's output shows the element layout gemv_coop.comp is written for; else what
// differs.
std::string coop_layout_mismatch(std::span<const uint32_t> words);

// Puts c's feature structures at the head of dci's pNext chain (c must outlive vkCreateDevice).
void coop_matrix_chain(CoopMatrix& c, VkDeviceCreateInfo& dci);

}  // namespace coli::vk
