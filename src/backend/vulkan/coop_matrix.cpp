#include "backend/vulkan/coop_matrix.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "backend/vulkan/device.h"
#include "formats/format.h"

namespace coli::vk {

namespace {

constexpr const char* kCoopEnv = "COLI_VULKAN_COOPMAT";           // "0": the FMA GEMV everywhere
constexpr uint32_t kLanes = 32;                                   // gemv_coop.comp's subgroup
constexpr uint32_t kTileRows = 16, kStepCols = 16, kOutCols = 8;  // its product: M, K, N
// Elements per lane of A, B and C in the layout gemv_coop.comp writes (NVIDIA's mma.m16n8k16 fragments).
constexpr uint32_t kALength = kTileRows * kStepCols / kLanes, kBLength = kStepCols * kOutCols / kLanes,
                   kCLength = kTileRows * kOutCols / kLanes;
constexpr VkSubgroupFeatureFlags kSubgroupOps =
    VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;

bool product_offered(const Api& api, VkPhysicalDevice d) {
    uint32_t count = 0;
    if (api.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(d, &count, nullptr) != VK_SUCCESS) return false;
    std::vector<VkCooperativeMatrixPropertiesKHR> props(
        count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
    if (api.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(d, &count, props.data()) != VK_SUCCESS)
        return false;
    for (const VkCooperativeMatrixPropertiesKHR& p : props)
        if (p.MSize == kTileRows && p.NSize == kOutCols && p.KSize == kStepCols &&
            p.AType == VK_COMPONENT_TYPE_FLOAT16_KHR && p.BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
            p.CType == VK_COMPONENT_TYPE_FLOAT32_KHR && p.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
            p.scope == VK_SCOPE_SUBGROUP_KHR)
            return true;
    return false;
}

}  // namespace

CoopMatrix coop_matrix_probe(const Api& api, VkPhysicalDevice d,
                             const VkPhysicalDeviceSubgroupProperties& sub,
                             const VkPhysicalDeviceProperties&) {
    CoopMatrix c;
    auto no = [&](std::string why) {
        c.detail = "4-bit GEMV on FMAs: " + why;
        return c;
    };
    const char* env = std::getenv(kCoopEnv);
    if (env != nullptr && std::string_view(env) == "0") return no(std::string(kCoopEnv) + "=0 is set");
    if (!device_has_extension(api, d, kCoopMatrixExtension) ||
        api.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR == nullptr)
        return no(std::string("no ") + kCoopMatrixExtension);
    if (sub.subgroupSize != kLanes || !(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        (sub.supportedOperations & kSubgroupOps) != kSubgroupOps)
        return no("subgroups are not 32 lanes with shuffles and arithmetic");
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &c.coop;
    c.coop.pNext = &c.float16;
    c.float16.pNext = &c.memory_model;
    api.vkGetPhysicalDeviceFeatures2(d, &f2);
    if (!c.coop.cooperativeMatrix || !c.float16.shaderFloat16 || !c.memory_model.vulkanMemoryModel)
        return no("no cooperative matrices, f16 arithmetic or Vulkan memory model");
    if (!product_offered(api, d)) return no("no 16x8x16 f16 product with f32 sums");
    c.coop = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    c.coop.cooperativeMatrix = VK_TRUE;
    c.float16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    c.float16.shaderFloat16 = VK_TRUE;
    c.memory_model = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
    c.memory_model.vulkanMemoryModel = VK_TRUE;
    c.usable = true;
    c.detail = "4-bit GEMV on cooperative matrices";
    return c;
}

std::string coop_layout_mismatch(std::span<const uint32_t> words) {
    if (words.size() != kCoopProbeWords) return "the layout probe wrote no answer";
    const uint32_t* a = words.data();
    const uint32_t* b = a + kTileRows * kStepCols / 2;
    const uint32_t* c = b + kStepCols * kOutCols / 2;
    const uint32_t* d = c + kTileRows * kOutCols;
    const uint32_t* lengths = d + kTileRows * kOutCols;
    if (lengths[0] != kALength || lengths[1] != kBLength || lengths[2] != kCLength)
        return fmt::format("matrices of {} / {} / {} elements per lane (the GEMV's layout has {} / {} / {})",
                           lengths[0], lengths[1], lengths[2], kALength, kBLength, kCLength);
    // Each element holds its own place; an f16 pair holds places 2i and 2i + 1.
    auto halves_ok = [](const uint32_t* m, uint32_t count) {
        for (uint32_t i = 0; i < count; ++i)
            if (f16_to_f32(static_cast<uint16_t>(m[i / 2] >> (16 * (i % 2)))) != static_cast<float>(i))
                return false;
        return true;
    };
    if (!halves_ok(a, kTileRows * kStepCols)) return "A operands are laid out otherwise than the GEMV's";
    if (!halves_ok(b, kStepCols * kOutCols)) return "B operands are laid out otherwise than the GEMV's";
    auto float_at = [](const uint32_t* m, uint32_t i) {
        float v = 0;
        std::memcpy(&v, &m[i], sizeof v);
        return v;
    };
    for (uint32_t i = 0; i < kTileRows * kOutCols; ++i)
        if (float_at(c, i) != static_cast<float>(i)) return "sums are laid out otherwise than the GEMV's";
    // The product of the places, exact in f32 (below 2^24).
    for (uint32_t r = 0; r < kTileRows; ++r)
        for (uint32_t n = 0; n < kOutCols; ++n) {
            double want = r * kOutCols + n;
            for (uint32_t k = 0; k < kStepCols; ++k)
                want += static_cast<double>(r * kStepCols + k) * (k * kOutCols + n);
            if (float_at(d, r * kOutCols + n) != static_cast<float>(want))
                return fmt::format("the probe's product is wrong at ({}, {}): {} for {}", r, n,
                                   float_at(d, r * kOutCols + n), want);
        }
    return {};
}

void coop_matrix_chain(CoopMatrix& c, VkDeviceCreateInfo& dci) {
    c.coop.pNext = &c.float16;
    c.float16.pNext = &c.memory_model;
    c.memory_model.pNext = const_cast<void*>(dci.pNext);
    dci.pNext = &c.coop;
}

}  // namespace coli::vk
