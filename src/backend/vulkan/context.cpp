#include "backend/vulkan/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backend/vulkan/buffer.h"
#include "core/error.h"

namespace coli::vk {

namespace {

constexpr const char* kPortabilitySubset = "VK_KHR_portability_subset";  // MoltenVK: must be enabled
// Set: the shaders' paths for devices without subgroup arithmetic are used (tests run them on lavapipe).
constexpr const char* kNoSubgroupsEnv = "COLI_VULKAN_NO_SUBGROUPS";
// Set: every pipeline reports the driver's statistics of its compiled code (pipeline_stats.h).
constexpr const char* kPipelineStatsEnv = "COLI_VULKAN_PIPELINE_STATS";
constexpr const char* kExecutableProperties = "VK_KHR_pipeline_executable_properties";
constexpr const char* kIntDot = "VK_KHR_shader_integer_dot_product";
// "0": the int4 GEMV never uses integer dot products; "1": it does wherever the device has them, also where
// the driver emulates them (tests run that path on lavapipe). Unset: where the device accelerates them.
constexpr const char* kIntDotEnv = "COLI_VULKAN_INT_DOT";
// Set: each dispatch is timed alone and the device time per shader is printed at exit (profile.h).
constexpr const char* kProfileEnv = "COLI_VULKAN_PROFILE";

// Whether the int4 GEMV takes the integer dot-product path on `physical` (kIntDotEnv); a path forced on a
// device without it is said on stderr.
bool int_dot_wanted(const Api& api, VkPhysicalDevice physical, const std::string& name) {
    const char* env = std::getenv(kIntDotEnv);
    if (env != nullptr && std::string_view(env) == "0") return false;
    const bool forced = env != nullptr && std::string_view(env) == "1";
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR f{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    if (device_has_extension(api, physical, kIntDot)) {
        VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        f2.pNext = &f;
        api.vkGetPhysicalDeviceFeatures2(physical, &f2);
    }
    if (!f.shaderIntegerDotProduct) {
        if (forced)
            fmt::print(stderr, "vulkan: {}=1 is set, but {} has no {}: the int4 GEMV runs on f32 FMAs\n",
                       kIntDotEnv, name, kIntDot);
        return false;
    }
    if (forced) return true;
    VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR p{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &p;
    api.vkGetPhysicalDeviceProperties2(physical, &p2);
    return p.integerDotProduct4x8BitPackedUnsignedAccelerated &&
           p.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
}

// The first memory type with all of `want`, in heap `heap` when heap >= 0.
int32_t memory_type_find(const VkPhysicalDeviceMemoryProperties& m, VkMemoryPropertyFlags want,
                         int64_t heap = -1) {
    for (uint32_t i = 0; i < m.memoryTypeCount; ++i)
        if ((m.memoryTypes[i].propertyFlags & want) == want &&
            (heap < 0 || m.memoryTypes[i].heapIndex == static_cast<uint32_t>(heap)))
            return static_cast<int32_t>(i);
    return -1;
}

}  // namespace

Context::Context(int index) {
    const DeviceList& list = device_list();
    check(list.error.empty() && index >= 0 && index < static_cast<int>(list.devices.size()),
          "vulkan: device {} is not available: {}", index, list.error);
    info = list.devices[index];
    api = *api_load(nullptr);
    instance = instance_create(api);
    api_load_instance(api, instance);
    uint32_t count = 0;
    api.vkEnumeratePhysicalDevices(instance, &count, nullptr);
    std::vector<VkPhysicalDevice> devices(count);
    api.vkEnumeratePhysicalDevices(instance, &count, devices.data());
    check(index < static_cast<int>(count), "vulkan: device {} disappeared", index);
    physical = devices[index];
    api.vkGetPhysicalDeviceProperties(physical, &props);
    api.vkGetPhysicalDeviceMemoryProperties(physical, &memory);

    VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sub;
    api.vkGetPhysicalDeviceProperties2(physical, &p2);
    subgroup_size = sub.subgroupSize;
    // The weight slot arrays are indexed by job, which needs dynamic indexing of storage buffer arrays, and
    // count against the per-stage storage buffer limit with the plain bindings.
    VkPhysicalDeviceFeatures supported{};
    api.vkGetPhysicalDeviceFeatures(physical, &supported);
    const uint32_t buffer_limit = std::min(props.limits.maxPerStageDescriptorStorageBuffers,
                                           props.limits.maxDescriptorSetStorageBuffers);
    if (supported.shaderStorageBufferArrayDynamicIndexing && buffer_limit > kMaxBindings + 2)
        weight_slots = std::min(kMaxWeightSlots, (buffer_limit - kMaxBindings) / 2);
    profile = std::getenv(kProfileEnv) != nullptr;
    subgroup_arithmetic = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                          std::getenv(kNoSubgroupsEnv) == nullptr;

    uint32_t families = 0;
    api.vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> q(families);
    api.vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, q.data());
    queue_family = families;
    for (uint32_t f = 0; f < families && queue_family == families; ++f)
        if (q[f].queueFlags & VK_QUEUE_COMPUTE_BIT) queue_family = f;
    check(queue_family < families, "vulkan: {} has no compute queue", info.name);
    timestamp_bits = q[queue_family].timestampValidBits;

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = queue_family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    VkPhysicalDeviceFeatures enabled{};
    enabled.shaderStorageBufferArrayDynamicIndexing = weight_slots > 1 ? VK_TRUE : VK_FALSE;
    dci.pEnabledFeatures = &enabled;
    std::vector<const char*> ext;
    if (device_has_extension(api, physical, kPortabilitySubset)) ext.push_back(kPortabilitySubset);
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    int_dot = int_dot_wanted(api, physical, info.name);
    if (int_dot) {
        ext.push_back(kIntDot);
        dot.shaderIntegerDotProduct = VK_TRUE;
        dci.pNext = &dot;
    }
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    if (std::getenv(kPipelineStatsEnv) != nullptr) {
        pipeline_stats = device_has_extension(api, physical, kExecutableProperties);
        if (pipeline_stats) {
            ext.push_back(kExecutableProperties);
            executable.pipelineExecutableInfo = VK_TRUE;
            executable.pNext = const_cast<void*>(dci.pNext);
            dci.pNext = &executable;
        } else {
            fmt::print(stderr, "vulkan: {} is set, but {} has no {}: no pipeline statistics\n",
                       kPipelineStatsEnv, info.name, kExecutableProperties);
        }
    }
    dci.enabledExtensionCount = static_cast<uint32_t>(ext.size());
    dci.ppEnabledExtensionNames = ext.data();
    vk_check(api.vkCreateDevice(physical, &dci, nullptr, &device), "vkCreateDevice");
    api_load_device(api, device);
    api.vkGetDeviceQueue(device, queue_family, 0, &queue);

    // Memory: device-local for everything the shaders touch; host-visible coherent for staging (cached
    // when offered: tensor reads copy out of it). Where a device-local type is host-visible and the device
    // is not discrete (shared memory), weights are written in place without a staging copy.
    const int32_t local = memory_type_find(memory, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    check(local >= 0, "vulkan: {} has no device-local memory type", info.name);
    local_type = static_cast<uint32_t>(local);
    constexpr VkMemoryPropertyFlags kHost =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int32_t staging = memory_type_find(memory, kHost | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (staging < 0) staging = memory_type_find(memory, kHost);
    check(staging >= 0, "vulkan: {} has no host-visible coherent memory type", info.name);
    staging_type = static_cast<uint32_t>(staging);
    if (info.type != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)
        unified_type = memory_type_find(memory, kHost | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                        memory.memoryTypes[local_type].heapIndex);

    VkDescriptorSetLayoutBinding bindings[kMaxBindings + 2];
    for (uint32_t b = 0; b < kMaxBindings + 2; ++b)
        bindings[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, b < kSlotBinding ? 1 : weight_slots,
                       VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo lci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    lci.bindingCount = kMaxBindings + 2;
    lci.pBindings = bindings;
    vk_check(api.vkCreateDescriptorSetLayout(device, &lci, nullptr, &set_layout), "descriptor set layout");
    const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
    VkPipelineLayoutCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pci.setLayoutCount = 1;
    pci.pSetLayouts = &set_layout;
    pci.pushConstantRangeCount = 1;
    pci.pPushConstantRanges = &push;
    vk_check(api.vkCreatePipelineLayout(device, &pci, nullptr, &pipeline_layout), "pipeline layout");
    for (Sizing sizing : {Sizing::scratch, Sizing::exact})
        pools[static_cast<int>(sizing)] = std::make_unique<BufferPool>(*this, sizing);
}

double Context::timestamp_span_ms(uint64_t from, uint64_t to) const {
    constexpr double kNsPerMs = 1e6;
    constexpr uint32_t kTickBits = 64;
    const uint64_t mask = timestamp_bits >= kTickBits ? ~uint64_t{0} : (uint64_t{1} << timestamp_bits) - 1;
    return static_cast<double>((to - from) & mask) * props.limits.timestampPeriod / kNsPerMs;
}

Context::~Context() {
    if (device != VK_NULL_HANDLE) {
        api.vkDeviceWaitIdle(device);
        for (auto& p : pools) p.reset();
        api.vkDestroyPipelineLayout(device, pipeline_layout, nullptr);
        api.vkDestroyDescriptorSetLayout(device, set_layout, nullptr);
        api.vkDestroyDevice(device, nullptr);
    }
    if (instance != VK_NULL_HANDLE) api.vkDestroyInstance(instance, nullptr);
}

}  // namespace coli::vk
