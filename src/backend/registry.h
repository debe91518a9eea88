// Which backends exist in this build and on this machine, and creating one by name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace coli {

class ThreadPool;

struct BackendInfo {
    std::string name;    // "cpu", "cuda", "vulkan", "metal"
    bool compiled;       // built into this binary
    bool available;      // compiled and a usable device was found
    std::string detail;  // the device when available, else why not and how to fix it
};

// Every backend the project knows, in order of preference for `auto` (best first).
std::vector<BackendInfo> backend_list();

// Creates the named backend; "auto" picks the first available in backend_list() order. An unknown
// name, or one not compiled in or without a device, is a coli::Error that says why and what to do.
std::unique_ptr<Backend> backend_create(std::string_view name, ThreadPool& pool);

}  // namespace coli
