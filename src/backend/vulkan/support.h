// What the Vulkan backend's shaders can take, decided from the op alone (no device needed), so that
// `coli backends` and the docs show the Vulkan column on any machine. Compiled into every build.
#pragma once

#include <string>

#include "backend/backend.h"

namespace coli {

// The capability of the Vulkan shaders for an op and its parameters; ignores residency and device limits.
bool vulkan_supports(const OpDesc& d);
// Whether the Vulkan backend runs the op as a host step (Backend::host_step).
bool vulkan_host_step(const OpDesc& d);

// Whether a Vulkan device is usable here, and which (or why not).
struct VulkanProbe {
    bool ok = false;        // a usable device was found
    bool software = false;  // it is a CPU implementation (lavapipe, SwiftShader): `auto` does not pick it
    std::string detail;  // "NVIDIA H200 (discrete GPU, Vulkan 1.3.277, 150.1 GB)" or the reason and the fix
};
// The device --vk-device picks (-1: the best one). Defined only in builds with -DCOLI_VULKAN=ON.
VulkanProbe vulkan_probe(int device = -1);

}  // namespace coli
