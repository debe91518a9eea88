// The Vulkan loader (libvulkan.so.1, Debian's libvulkan1), opened with dlopen at backend start rather than
// linked: a binary built with -DCOLI_VULKAN=ON still runs on a machine without it, and `--backend vulkan`
// then says what is missing. Every Vulkan function the backend calls is in the lists below.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace coli::vk {

// Functions resolved from the loader itself.
#define COLI_VK_GLOBAL_FUNCS(X) \
    X(vkCreateInstance)         \
    X(vkEnumerateInstanceExtensionProperties)

// Functions resolved through an instance (device functions go through the loader's dispatch).
#define COLI_VK_INSTANCE_FUNCS(X)               \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceFeatures)              \
    X(vkGetPhysicalDeviceFeatures2)             \
    X(vkGetPhysicalDeviceMemoryProperties)      \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkEnumerateDeviceExtensionProperties)     \
    X(vkCreateDevice)                           \
    X(vkDestroyDevice)                          \
    X(vkGetDeviceQueue)                         \
    X(vkCreateBuffer)                           \
    X(vkDestroyBuffer)                          \
    X(vkGetBufferMemoryRequirements)            \
    X(vkAllocateMemory)                         \
    X(vkFreeMemory)                             \
    X(vkBindBufferMemory)                       \
    X(vkMapMemory)                              \
    X(vkCreateShaderModule)                     \
    X(vkDestroyShaderModule)                    \
    X(vkCreateDescriptorSetLayout)              \
    X(vkDestroyDescriptorSetLayout)             \
    X(vkCreatePipelineLayout)                   \
    X(vkDestroyPipelineLayout)                  \
    X(vkCreateComputePipelines)                 \
    X(vkDestroyPipeline)                        \
    X(vkCreateDescriptorPool)                   \
    X(vkDestroyDescriptorPool)                  \
    X(vkResetDescriptorPool)                    \
    X(vkAllocateDescriptorSets)                 \
    X(vkUpdateDescriptorSets)                   \
    X(vkCreateCommandPool)                      \
    X(vkDestroyCommandPool)                     \
    X(vkAllocateCommandBuffers)                 \
    X(vkBeginCommandBuffer)                     \
    X(vkEndCommandBuffer)                       \
    X(vkResetCommandBuffer)                     \
    X(vkCmdBindPipeline)                        \
    X(vkCmdBindDescriptorSets)                  \
    X(vkCmdPushConstants)                       \
    X(vkCmdDispatch)                            \
    X(vkCmdCopyBuffer)                          \
    X(vkCmdFillBuffer)                          \
    X(vkCmdUpdateBuffer)                        \
    X(vkCmdPipelineBarrier)                     \
    X(vkQueueSubmit)                            \
    X(vkCreateFence)                            \
    X(vkDestroyFence)                           \
    X(vkWaitForFences)                          \
    X(vkGetFenceStatus)                         \
    X(vkResetFences)                            \
    X(vkDeviceWaitIdle)                         \
    X(vkCreateQueryPool)                        \
    X(vkDestroyQueryPool)                       \
    X(vkCmdResetQueryPool)                      \
    X(vkCmdWriteTimestamp)                      \
    X(vkGetQueryPoolResults)                    \
    X(vkGetDeviceProcAddr)

// Functions of optional device extensions, resolved by api_load_device() when the extension is enabled.
#define COLI_VK_EXTENSION_FUNCS(X)          \
    X(vkGetPipelineExecutablePropertiesKHR) \
    X(vkGetPipelineExecutableStatisticsKHR)

// The loaded entry points. Global ones are set by api_load(), instance ones by api_load_instance(), the
// extensions' by api_load_device() (null where the extension is not enabled).
struct Api {
#define COLI_VK_DECLARE(name) PFN_##name name = nullptr;  // one pointer per function of the lists
    COLI_VK_DECLARE(vkGetInstanceProcAddr)
    COLI_VK_GLOBAL_FUNCS(COLI_VK_DECLARE)
    COLI_VK_INSTANCE_FUNCS(COLI_VK_DECLARE)
    COLI_VK_EXTENSION_FUNCS(COLI_VK_DECLARE)
#undef COLI_VK_DECLARE
};

// Opens the loader once per process and resolves the global functions. Returns nullptr and sets *why
// (the dlopen error and the fix) when it is missing.
const Api* api_load(std::string* why);
// Resolves the instance-level functions into api for instance. Throws coli::Error naming a missing one.
void api_load_instance(Api& api, VkInstance instance);

// Resolves the extension functions for device (those it does not provide stay null).
void api_load_device(Api& api, VkDevice device);

// Throws coli::Error naming `what` and the VkResult when r is not VK_SUCCESS.
void vk_check(VkResult r, const char* what);
// "VK_ERROR_OUT_OF_DEVICE_MEMORY", or the number for codes this build does not name.
std::string vk_result_name(VkResult r);

}  // namespace coli::vk
