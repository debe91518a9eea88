// Finding Vulkan devices: the instance (with portability enumeration, so that MoltenVK's devices are
// listed on macOS), every physical device with what the backend needs of it, and the choice of one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/vulkan/loader.h"

namespace coli::vk {

// The Vulkan version the shaders and the backend need.
inline constexpr uint32_t kVulkanVersion = VK_API_VERSION_1_2;

// One physical device as enumerated.
struct DeviceInfo {
    int index = 0;     // position in enumeration order: --vk-device
    std::string name;  // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
    VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;  // discrete, integrated, cpu, ...
    uint32_t api_version = 0;                                   // the device's Vulkan version
    uint64_t local_bytes = 0;                                   // largest device-local heap
    std::string unusable;                                       // why the backend cannot use it, or empty
};

// Every device, or why none could be listed (no loader, no driver).
struct DeviceList {
    std::vector<DeviceInfo> devices;  // enumeration order
    std::string error;                // set when the list could not be made
};

// Enumerates once per process (instance creation can take a while on some drivers).
const DeviceList& device_list();
// The device to use: `requested` (>= 0, --vk-device) when usable, else the first usable of the best type
// (discrete, integrated, virtual, cpu). -1 with *why set when there is none.
int device_pick(const DeviceList& list, int requested, std::string* why);
// "NVIDIA H200 (discrete GPU, Vulkan 1.3.277, 140.6 GB)"
std::string device_summary(const DeviceInfo& d);

// Creates an instance for Vulkan 1.2 with portability enumeration when the loader offers it.
VkInstance instance_create(const Api& api);
// Whether a device extension is offered.
bool device_has_extension(const Api& api, VkPhysicalDevice d, const char* name);

}  // namespace coli::vk
