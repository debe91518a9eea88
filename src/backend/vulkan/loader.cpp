#include "backend/vulkan/loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "core/error.h"

namespace coli::vk {

namespace {
constexpr const char* kLoaderName = "libvulkan.so.1";  // the soname of Debian's libvulkan1 (and Khronos')
}  // namespace

const Api* api_load(std::string* why) {
    static Api api;
    static std::string error;
    static const bool loaded = [] {
        void* lib = dlopen(kLoaderName, RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            const char* e = dlerror();
            error = fmt::format(
                "the Vulkan loader {} was not found ({}): install it (Debian: apt install libvulkan1) or put "
                "it in LD_LIBRARY_PATH, or use --backend cpu",
                kLoaderName, e ? e : "dlopen failed");
            return false;
        }
        api.vkGetInstanceProcAddr =
            reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
        if (api.vkGetInstanceProcAddr == nullptr) {
            error = fmt::format("{} has no vkGetInstanceProcAddr: not a Vulkan loader", kLoaderName);
            return false;
        }
#define COLI_VK_GLOBAL(name) \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
        COLI_VK_GLOBAL_FUNCS(COLI_VK_GLOBAL)
#undef COLI_VK_GLOBAL
        return true;
    }();
    if (!loaded && why != nullptr) *why = error;
    return loaded ? &api : nullptr;
}

void api_load_instance(Api& api, VkInstance instance) {
#define COLI_VK_INSTANCE(name)                                                           \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(instance, #name)); \
    check(api.name != nullptr, "vulkan: the loader does not provide {}: Vulkan 1.2 is needed", #name);
    COLI_VK_INSTANCE_FUNCS(COLI_VK_INSTANCE)
#undef COLI_VK_INSTANCE
}

void api_load_device(Api& api, VkDevice device) {
#define COLI_VK_EXTENSION(name) \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetDeviceProcAddr(device, #name));
    COLI_VK_EXTENSION_FUNCS(COLI_VK_EXTENSION)
#undef COLI_VK_EXTENSION
}

std::string vk_result_name(VkResult r) {
    switch (r) {
        case VK_NOT_READY:
            return "VK_NOT_READY";
        case VK_TIMEOUT:
            return "VK_TIMEOUT";
        case VK_ERROR_OUT_OF_HOST_MEMORY:
            return "VK_ERROR_OUT_OF_HOST_MEMORY";
        case VK_ERROR_OUT_OF_DEVICE_MEMORY:
            return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
        case VK_ERROR_INITIALIZATION_FAILED:
            return "VK_ERROR_INITIALIZATION_FAILED";
        case VK_ERROR_DEVICE_LOST:
            return "VK_ERROR_DEVICE_LOST";
        case VK_ERROR_MEMORY_MAP_FAILED:
            return "VK_ERROR_MEMORY_MAP_FAILED";
        case VK_ERROR_LAYER_NOT_PRESENT:
            return "VK_ERROR_LAYER_NOT_PRESENT";
        case VK_ERROR_EXTENSION_NOT_PRESENT:
            return "VK_ERROR_EXTENSION_NOT_PRESENT";
        case VK_ERROR_FEATURE_NOT_PRESENT:
            return "VK_ERROR_FEATURE_NOT_PRESENT";
        case VK_ERROR_INCOMPATIBLE_DRIVER:
            return "VK_ERROR_INCOMPATIBLE_DRIVER";
        case VK_ERROR_TOO_MANY_OBJECTS:
            return "VK_ERROR_TOO_MANY_OBJECTS";
        case VK_ERROR_FRAGMENTED_POOL:
            return "VK_ERROR_FRAGMENTED_POOL";
        case VK_ERROR_OUT_OF_POOL_MEMORY:
            return "VK_ERROR_OUT_OF_POOL_MEMORY";
        default:
            return fmt::format("VkResult {}", static_cast<int>(r));
    }
}

void vk_check(VkResult r, const char* what) {
    if (r != VK_SUCCESS) fail("vulkan: {} failed: {}", what, vk_result_name(r));
}

}  // namespace coli::vk
