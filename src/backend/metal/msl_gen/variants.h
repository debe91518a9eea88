// Which Metal kernels each Vulkan shader becomes. A Vulkan specialization constant stays an MSL function
// constant (the host specializes the pipeline, as Vulkan does) unless it shapes the kernel's interface or
// memory: the size of an array of buffers or of a `shared` array, which Metal needs at compile time. Those
// are frozen here, one kernel per listed set of values; the generator fails for a shader that needs a
// freeze not listed.
#pragma once

#include <string_view>
#include <vector>

#include "backend/metal/kernel_table.h"

namespace coli::metal::gen {

// The kernels of one shader: one per set of frozen values (one empty set: one kernel, nothing frozen).
std::vector<std::vector<MetalFrozen>> shader_variants(std::string_view shader);

}  // namespace coli::metal::gen
