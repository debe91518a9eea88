// The first part of the kernel self-test a Mac user runs (docs/design.md, "Metal"): what the device is,
// and every kernel of the library made into a pipeline with its constants' defaults, each checked against
// the table's threadgroup size and memory and the device's SIMD-group width. On Linux it runs on the
// Metal-shaped Vulkan device, where it makes every kernel from the SPIR-V it was generated from.
#pragma once

#include <string>
#include <vector>

#include "backend/metal/host.h"

namespace coli::metal {

struct SelfTestReport {
    std::string device;                 // name, SIMD-group width, threadgroup memory, working set, memory
    int pipelines = 0;                  // kernels made into pipelines
    std::vector<std::string> failures;  // one line per kernel that could not be made, naming it and why
};

// Makes every kernel's pipeline on `device`; a kernel that fails is reported, not thrown.
SelfTestReport metal_self_test(Device& device);

}  // namespace coli::metal
