#include "backend/vulkan/coop_matrix.h"

#include <cstdlib>
#include <vector>

#include "backend/vulkan/device.h"

namespace coli::vk {

namespace {

constexpr const char* kNoCoopEnv = "COLI_VULKAN_NO_COOPMAT";      // set: the FMA GEMV everywhere
constexpr uint32_t kLanes = 32;                                   // gemv_coop.comp's subgroup
constexpr uint32_t kTileRows = 16, kStepCols = 16, kOutCols = 8;  // its product: M, K, N
constexpr uint32_t kSharedBytes = 47616;                          // its shared memory
constexpr VkSubgroupFeatureFlags kSubgroupOps =
    VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;

bool product_offered(const Api& api, VkPhysicalDevice d) {
    uint32_t count = 0;
    if (api.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(d, &count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkCooperativeMatrixPropertiesNV> props(count,
                                                       {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
    if (api.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(d, &count, props.data()) != VK_SUCCESS)
        return false;
    for (const VkCooperativeMatrixPropertiesNV& p : props)
        if (p.MSize == kTileRows && p.NSize == kOutCols && p.KSize == kStepCols &&
            p.AType == VK_COMPONENT_TYPE_FLOAT16_NV && p.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
            p.CType == VK_COMPONENT_TYPE_FLOAT32_NV && p.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
            p.scope == VK_SCOPE_SUBGROUP_NV)
            return true;
    return false;
}

}  // namespace

CoopMatrix coop_matrix_probe(const Api& api, VkPhysicalDevice d,
                             const VkPhysicalDeviceSubgroupProperties& sub,
                             const VkPhysicalDeviceProperties& props) {
    CoopMatrix c;
    auto no = [&](std::string why) {
        c.detail = "FMA GEMV: " + why;
        return c;
    };
    if (std::getenv(kNoCoopEnv) != nullptr) return no(std::string(kNoCoopEnv) + " is set");
    if (!device_has_extension(api, d, kCoopMatrixExtension) ||
        api.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV == nullptr)
        return no(std::string("no ") + kCoopMatrixExtension);
    if (sub.subgroupSize != kLanes || !(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        (sub.supportedOperations & kSubgroupOps) != kSubgroupOps)
        return no("subgroups are not 32 lanes with shuffles and arithmetic");
    if (props.limits.maxComputeSharedMemorySize < kSharedBytes) return no("too little shared memory");
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &c.coop;
    c.coop.pNext = &c.float16;
    api.vkGetPhysicalDeviceFeatures2(d, &f2);
    c.coop.pNext = nullptr;
    if (!c.coop.cooperativeMatrix || !c.float16.shaderFloat16)
        return no("no cooperative matrices or f16 arithmetic");
    if (!product_offered(api, d)) return no("no 16x8x16 f16 product with f32 sums");
    c.coop = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    c.coop.cooperativeMatrix = VK_TRUE;
    c.float16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    c.float16.shaderFloat16 = VK_TRUE;
    c.usable = true;
    c.detail = "int4 and mxfp4 GEMV on cooperative matrices";
    return c;
}

}  // namespace coli::vk
