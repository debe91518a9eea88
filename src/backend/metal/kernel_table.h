// The Metal kernels: one MSL library generated from the Vulkan backend's SPIR-V at build time
// (msl_gen/, docs/design.md "Metal"), and the table that tells a Metal host how to bind and dispatch each
// kernel. Both are committed (generated/) and regenerated and compared by a test.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace coli::metal {

// Metal's limits that every Apple GPU meets, which each kernel must fit (the generator fails otherwise).
inline constexpr uint32_t kMetalMaxBuffers = 31;              // buffer argument table entries, 0 .. 30
inline constexpr uint32_t kMetalPushSlot = 30;                // the push constants, set with setBytes
inline constexpr uint32_t kMetalMaxThreadgroupBytes = 32768;  // threadgroup memory of one kernel
inline constexpr uint32_t kMetalMaxThreads = 1024;            // threads of one threadgroup
inline constexpr uint32_t kMetalSimdWidth = 32;               // SIMD-group size of Apple GPUs (subgroups)
inline constexpr uint32_t kMetalConstantsPerKernel = 8;       // function-constant indices kept per kernel
// The weights one batched GEMV dispatch binds (gemv.comp's kSlots, frozen): codes and scales of 8 slots
// take buffers 8 .. 23, within the 30 below the push slot.
inline constexpr uint32_t kMetalGemvSlots = 8;

// One storage buffer of a kernel: Vulkan's binding `binding` (set 0), `count` elements of an array, bound
// at Metal buffer slots first .. first + count - 1.
struct MetalBuffer {
    uint32_t binding = 0;
    uint32_t first = 0;  // the Metal buffer slot of element 0
    uint32_t count = 1;
    bool written = false;  // the kernel may write it (not `readonly` in the shader)
};

enum class MetalConstantType : uint8_t { u32, i32, f32, boolean };

// One Vulkan specialization constant left as an MSL function constant: the host sets it with
// MTLFunctionConstantValues at `index` (the spec id plus the kernel's base, so that indices never repeat
// within the library). When not set, `fallback` (the shader's default, as bits) applies.
struct MetalConstant {
    uint32_t spec_id = 0;
    uint32_t index = 0;
    MetalConstantType type = MetalConstantType::u32;
    uint32_t fallback = 0;
};

// A specialization constant frozen at generation: the kernel exists only with this value.
struct MetalFrozen {
    uint32_t spec_id = 0;
    uint32_t value = 0;
};

struct MetalKernel {
    std::string_view name;    // the kernel: the Vulkan shader's name, and its frozen values (_k<id>_<value>)
    std::string_view shader;  // the Vulkan shader it was made from (vulkan/backend.cmake's name)
    std::string_view entry;   // the MSL function: coli_<name>
    std::span<const MetalFrozen> frozen;
    std::span<const MetalConstant> constants;
    std::span<const MetalBuffer> buffers;
    uint32_t push_bytes = 0;                   // the push-constant block at kMetalPushSlot, 0: none
    std::array<uint32_t, 3> threads{1, 1, 1};  // threadgroup size (the shader's local_size)
    int32_t threads_x_spec = -1;     // >= 0: threads[0] is this spec constant's value (a default here)
    uint32_t threadgroup_bytes = 0;  // static threadgroup memory (`shared` arrays)
    bool simdgroup = false;          // uses SIMD-group functions (subgroups), 32 wide
};

// A Vulkan shader that has no Metal kernel, and why (the host takes another path for its work).
struct MetalSkipped {
    std::string_view shader;
    std::string_view reason;
};

// Every kernel of the generated library (generated/kernel_table.cpp), in the order of the source.
std::span<const MetalKernel> metal_kernels();
// The Vulkan shaders left out of the library.
std::span<const MetalSkipped> metal_skipped_shaders();

}  // namespace coli::metal
