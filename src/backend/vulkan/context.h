// The device state every part of the Vulkan backend shares: the instance, the device and its queue,
// memory types, limits, and the one pipeline layout every shader uses. Held by shared_ptr so that buffers
// outliving the backend still free correctly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/vulkan/device.h"
#include "backend/vulkan/limits.h"
#include "backend/vulkan/loader.h"

namespace coli::vk {

class BufferPool;

// Storage buffers each shader may bind (bindings 0 .. kMaxBindings - 1 of set 0).
inline constexpr uint32_t kMaxBindings = 8;
// Workgroups per dispatch dimension every device offers.
inline constexpr uint32_t kMaxGroups = kVulkanMaxGroups;
// Push-constant bytes every device offers (the Vulkan minimum of maxPushConstantsSize).
inline constexpr uint32_t kPushBytes = 128;
// Bindings kSlotBinding and kSlotBinding + 1 are arrays of weight buffers (codes, scales) that a batched
// GEMV indexes by job; at most kMaxWeightSlots each, fewer where the device's descriptor limits say so.
inline constexpr uint32_t kSlotBinding = kMaxBindings;
inline constexpr uint32_t kMaxWeightSlots = 32;

struct Context {
    Api api;                                            // entry points, with this instance's functions
    VkInstance instance = VK_NULL_HANDLE;               // owned
    VkPhysicalDevice physical = VK_NULL_HANDLE;         // the chosen device
    VkDevice device = VK_NULL_HANDLE;                   // owned
    VkQueue queue = VK_NULL_HANDLE;                     // the compute queue every command goes to
    uint32_t queue_family = 0;                          // its family
    DeviceInfo info;                                    // name, type, version, heap size
    VkPhysicalDeviceProperties props{};                 // limits
    VkPhysicalDeviceMemoryProperties memory{};          // memory types and heaps
    uint32_t subgroup_size = 0;                         // lanes per subgroup
    bool subgroup_arithmetic = false;                   // subgroupAdd in compute shaders
    bool int_dot = false;                               // packed 4x8-bit integer dot products (int4 GEMV)
    uint32_t weight_slots = 1;                          // weights per slot array (1: no batched GEMV)
    bool pipeline_stats = false;                        // pipelines report their compiled code's statistics
    bool profile = false;                               // device time per shader (profile.h)
    uint32_t timestamp_bits = 0;                        // valid bits of the queue's timestamps (0: none)
    uint32_t local_type = 0;                            // device-local memory type (tensors, weights)
    uint32_t staging_type = 0;                          // host-visible, coherent type for transfers
    int32_t unified_type = -1;                          // device-local type the host writes directly, or -1
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;  // kMaxBindings storage buffers, the slot arrays
    VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;  // set_layout + kPushBytes of push constants
    std::unique_ptr<BufferPool> pools[2];               // released buffers kept for reuse, by Sizing

    // Opens device `index` of device_list(). Throws coli::Error with Vulkan's reason.
    explicit Context(int index);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // The host writes weights straight into device memory (unified memory: integrated GPUs, CPUs, Apple).
    bool unified() const { return unified_type >= 0; }
    // Milliseconds from timestamp `from` to timestamp `to` of this device's queue (its valid bits wrap).
    double timestamp_span_ms(uint64_t from, uint64_t to) const;
};

}  // namespace coli::vk
