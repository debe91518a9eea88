// One Metal kernel from one Vulkan shader's SPIR-V, by SPIRV-Cross's MSL compiler: MSL 2.3 for macOS,
// set 0's binding b at [[buffer(b)]] (arrays of buffers on the slots that follow), push constants at
// kMetalPushSlot, SIMD-groups of 32, the entry point named coli_<kernel> and every other file-scope name
// prefixed with the kernel's, so that all kernels share one library. The checks Metal's limits need are
// here: a kernel that would need an implicit buffer (a runtime array's length), more buffers than Metal
// binds, more threadgroup memory or threads than every Apple GPU offers, fails with its name.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/metal/kernel_table.h"

namespace coli::metal::gen {

// A kernel that cannot be made: the message names it and says why.
struct KernelError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// What the generator writes for one kernel: its MSL and its row of the table (kernel_table.h).
struct Kernel {
    std::string name, shader, entry;
    std::string msl;  // SPIRV-Cross's output for this kernel alone
    std::vector<MetalFrozen> frozen;
    std::vector<MetalConstant> constants;
    std::vector<MetalBuffer> buffers;
    uint32_t push_bytes = 0;
    std::array<uint32_t, 3> threads{1, 1, 1};
    int32_t threads_x_spec = -1;
    uint32_t threadgroup_bytes = 0;
    bool simdgroup = false;
};

// Why a shader has no Metal kernel at all (a feature MSL lacks), or empty when it can have one.
std::string unsupported_reason(std::span<const uint32_t> spirv);

// The kernel of `shader` with `frozen` specialization constants fixed; its function constants take indices
// constant_base + spec id. Throws KernelError.
Kernel translate(const std::string& shader, std::span<const uint32_t> spirv,
                 const std::vector<MetalFrozen>& frozen, uint32_t constant_base);

}  // namespace coli::metal::gen
