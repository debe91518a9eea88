// Whether a Vulkan device runs the cooperative-matrix GEMV (shaders/gemv_coop.comp and gemv_xtable.comp):
// VK_NV_cooperative_matrix with 16x8x16 products of f16 into f32 in a subgroup, f16 arithmetic, subgroups
// of 32 with shuffles and arithmetic, and the shader's shared memory. Devices without it (lavapipe, most
// non-NVIDIA drivers) run the FMA GEMV, and the backend's description says which one runs and why.
#pragma once

#include <string>

#include "backend/vulkan/loader.h"

namespace coli::vk {

// The probe's answer, and the feature structures to chain into VkDeviceCreateInfo when it is usable.
struct CoopMatrix {
    bool usable = false;  // the cooperative-matrix GEMV runs on this device
    std::string detail;   // what it uses, or why it does not run
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};  // cooperativeMatrix on
    VkPhysicalDeviceShaderFloat16Int8Features float16{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};  // shaderFloat16 on
};

// The device extension the GEMV needs.
inline constexpr const char* kCoopMatrixExtension = "VK_NV_cooperative_matrix";

// Probes device d (subgroup properties `sub`, limits in `props`). COLI_VULKAN_NO_COOPMAT set turns it off.
CoopMatrix coop_matrix_probe(const Api& api, VkPhysicalDevice d,
                             const VkPhysicalDeviceSubgroupProperties& sub,
                             const VkPhysicalDeviceProperties& props);

}  // namespace coli::vk
