#include "backend/vulkan/device.h"

#include <fmt/format.h>

#include <cstring>

#include "core/error.h"

namespace coli::vk {

namespace {

constexpr double kBytesPerGB = 1e9;
constexpr const char* kPortabilityEnumeration = "VK_KHR_portability_enumeration";

bool instance_has_extension(const Api& api, const char* name) {
    uint32_t count = 0;
    api.vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr);
    std::vector<VkExtensionProperties> ext(count);
    api.vkEnumerateInstanceExtensionProperties(nullptr, &count, ext.data());
    for (const auto& e : ext)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

const char* type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
            return "discrete GPU";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
            return "integrated GPU";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
            return "virtual GPU";
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
            return "CPU";
        default:
            return "other";
    }
}

// Lower is preferred by device_pick.
int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
            return 0;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
            return 1;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
            return 2;
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
            return 3;
        default:
            return 4;
    }
}

DeviceInfo device_describe(const Api& api, VkPhysicalDevice d, int index) {
    DeviceInfo info;
    info.index = index;
    VkPhysicalDeviceProperties p{};
    api.vkGetPhysicalDeviceProperties(d, &p);
    info.name = p.deviceName;
    info.type = p.deviceType;
    info.api_version = p.apiVersion;
    VkPhysicalDeviceMemoryProperties m{};
    api.vkGetPhysicalDeviceMemoryProperties(d, &m);
    for (uint32_t h = 0; h < m.memoryHeapCount; ++h)
        if (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info.local_bytes = std::max<uint64_t>(info.local_bytes, m.memoryHeaps[h].size);
    uint32_t families = 0;
    api.vkGetPhysicalDeviceQueueFamilyProperties(d, &families, nullptr);
    std::vector<VkQueueFamilyProperties> q(families);
    api.vkGetPhysicalDeviceQueueFamilyProperties(d, &families, q.data());
    bool compute = false;
    for (const auto& f : q) compute = compute || (f.queueFlags & VK_QUEUE_COMPUTE_BIT);
    if (p.apiVersion < kVulkanVersion)
        info.unusable = fmt::format("Vulkan {}.{} (1.2 is needed)", VK_API_VERSION_MAJOR(p.apiVersion),
                                    VK_API_VERSION_MINOR(p.apiVersion));
    else if (!compute)
        info.unusable = "no compute queue";
    return info;
}

DeviceList list_make() {
    DeviceList list;
    const Api* global = api_load(&list.error);
    if (global == nullptr) return list;
    Api api = *global;
    VkInstance instance = VK_NULL_HANDLE;
    try {
        instance = instance_create(api);
        api_load_instance(api, instance);
    } catch (const Error& e) {
        list.error = fmt::format(
            "{}; check the GPU driver's Vulkan ICD (vulkaninfo lists devices), or use "
            "--backend cpu",
            e.what());
        return list;
    }
    uint32_t count = 0;
    api.vkEnumeratePhysicalDevices(instance, &count, nullptr);
    std::vector<VkPhysicalDevice> devices(count);
    api.vkEnumeratePhysicalDevices(instance, &count, devices.data());
    for (uint32_t i = 0; i < count; ++i) list.devices.push_back(device_describe(api, devices[i], int(i)));
    api.vkDestroyInstance(instance, nullptr);
    if (list.devices.empty())
        list.error =
            "the Vulkan loader found no device: install the GPU's Vulkan driver (Mesa's lavapipe, "
            "mesa-vulkan-drivers, is a CPU device), check VK_ICD_FILENAMES, or use --backend cpu";
    return list;
}

}  // namespace

VkInstance instance_create(const Api& api) {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "colibri";
    app.pEngineName = "colibri";
    app.apiVersion = kVulkanVersion;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    const char* ext[] = {kPortabilityEnumeration};
    if (instance_has_extension(api, kPortabilityEnumeration)) {  // lists MoltenVK's non-conformant devices
        ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = ext;
    }
    VkInstance instance = VK_NULL_HANDLE;
    vk_check(api.vkCreateInstance(&ci, nullptr, &instance), "vkCreateInstance");
    return instance;
}

bool device_has_extension(const Api& api, VkPhysicalDevice d, const char* name) {
    uint32_t count = 0;
    api.vkEnumerateDeviceExtensionProperties(d, nullptr, &count, nullptr);
    std::vector<VkExtensionProperties> ext(count);
    api.vkEnumerateDeviceExtensionProperties(d, nullptr, &count, ext.data());
    for (const auto& e : ext)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

const DeviceList& device_list() {
    static const DeviceList list = list_make();
    return list;
}

int device_pick(const DeviceList& list, int requested, std::string* why) {
    if (!list.error.empty()) {
        *why = list.error;
        return -1;
    }
    std::string all;
    for (const DeviceInfo& d : list.devices)
        all += fmt::format("{}  {}: {}{}", all.empty() ? "" : ";", d.index, device_summary(d),
                           d.unusable.empty() ? "" : " - unusable: " + d.unusable);
    if (requested >= 0) {
        if (requested >= static_cast<int>(list.devices.size())) {
            *why = fmt::format("--vk-device {} does not exist; the devices are:{}", requested, all);
            return -1;
        }
        if (!list.devices[requested].unusable.empty()) {
            *why = fmt::format("--vk-device {} is unusable ({}); the devices are:{}", requested,
                               list.devices[requested].unusable, all);
            return -1;
        }
        return requested;
    }
    int best = -1;
    for (const DeviceInfo& d : list.devices)
        if (d.unusable.empty() && (best < 0 || type_rank(d.type) < type_rank(list.devices[best].type)))
            best = d.index;
    if (best < 0) *why = fmt::format("no usable Vulkan device; the devices are:{}", all);
    return best;
}

std::string device_summary(const DeviceInfo& d) {
    return fmt::format("{} ({}, Vulkan {}.{}.{}, {:.1f} GB)", d.name, type_name(d.type),
                       VK_API_VERSION_MAJOR(d.api_version), VK_API_VERSION_MINOR(d.api_version),
                       VK_API_VERSION_PATCH(d.api_version), d.local_bytes / kBytesPerGB);
}

}  // namespace coli::vk
