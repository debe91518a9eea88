// Which backends exist in this build and on this machine, and creating one by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace coli {

class ThreadPool;

// What a backend answers for an op from its kernels alone (format and shape), without a device: the
// capability `coli backends` shows. The live Backend::supports() also checks residency and limits.
using SupportFn = bool (*)(const OpDesc& d);

struct BackendInfo {
    std::string name;             // "cpu", "cuda", "vulkan", "metal"
    bool compiled;                // built into this binary
    bool available;               // compiled and a usable device was found
    std::string detail;           // the device when available, else why not and how to fix it
    SupportFn support = nullptr;  // capability by op, format and shape; nullptr: no backend written yet
    std::string auto_skip;  // why `auto` passes over it although available (a software device), or empty
};

// Choices a device backend takes at creation.
struct BackendOptions {
    uint64_t vram_bytes =
        0;               // budget for resident weights and the expert tier; 0 = free memory less a reserve
    int vk_device = -1;  // Vulkan device index (--vk-device); -1 = the best one
};

// Every backend the project knows, in order of preference for `auto` (best first). vk_device: the Vulkan
// device whose availability is reported (-1: the best one).
std::vector<BackendInfo> backend_list(int vk_device = -1);

// Creates the named backend; "auto" picks the first available in backend_list() order and says so on
// stderr. An unknown name, or one not compiled in or without a device, is a coli::Error that says why
// and what to do.
std::unique_ptr<Backend> backend_create(std::string_view name, ThreadPool& pool,
                                        const BackendOptions& opts = {});

}  // namespace coli
