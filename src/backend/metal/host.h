// The Metal backend's host, shaped as Metal is (MTLDevice, MTLBuffer, MTLComputePipelineState, a compute
// encoder's setBuffer / setBytes / dispatchThreadgroups, blits, command buffers), so that everything above it
// is portable C++ that runs on Linux too. Two implementations of the device: Metal itself (host_apple.mm,
// built on Apple only) and one on Vulkan (host_vulkan.cpp: buffer(n) is binding n, the slot arrays' buffers
// 8.. and 16.. are the weight-slot bindings' elements, the push slot is the push constants, a dispatch is
// vkCmdDispatch), which runs the same kernels from their SPIR-V on lavapipe in CI.
//
// Written once above the device: kernels are found in the generated table (kernel_table.h) by name, with
// their function constants; every binding is checked against the table (a slot the kernel has, every slot
// it uses bound, the push block's size, the threadgroup limits), so that a host that binds a kernel wrong
// fails on Linux with the kernel's name, not on a Mac with garbage.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/metal/kernel_table.h"

namespace coli::metal {

// Where a buffer lives (MTLStorageMode): shared with the host (unified memory: the CPU writes it in place)
// or private to the GPU.
enum class Storage : uint8_t { shared, gpu_only };

// A buffer of device memory (MTLBuffer).
class Buffer {
public:
    virtual ~Buffer() = default;
    virtual uint64_t length() const = 0;  // bytes
    virtual void* contents() const = 0;   // the host's view of shared storage; nullptr for gpu_only
};
using BufferPtr = std::shared_ptr<Buffer>;

// A function constant's value (MTLFunctionConstantValues), by its index in the library
// (MetalConstant::index), as 32 bits (u32, i32, f32 or a bool's 0 / 1).
struct ConstantValue {
    uint32_t index = 0;
    uint32_t bits = 0;
};

// The value of constant `c` of a kernel: as set in `set`, else its fallback (the shader's default).
inline uint32_t constant_bits(const MetalConstant& c, std::span<const ConstantValue> set) {
    for (const ConstantValue& v : set)
        if (v.index == c.index) return v.bits;
    return c.fallback;
}

// A compute pipeline state: one kernel of the table with its function constants set.
struct Pipeline {
    const MetalKernel* kernel = nullptr;   // its entry in the table
    std::vector<ConstantValue> constants;  // as set (the others take their fallback)
    std::array<uint32_t, 3> threads{1, 1,
                                    1};  // threads per threadgroup (the x spec's value where it has one)
    std::shared_ptr<void> native;        // the implementation's pipeline object
};

// The bindings of one dispatch, by Metal buffer slot, and its grid.
struct DispatchArgs {
    std::array<BufferPtr, kMetalMaxBuffers> buffers;  // buffer(slot); empty where unbound
    std::vector<uint8_t> push;                        // setBytes at kMetalPushSlot
    std::array<uint32_t, 3> groups{1, 1, 1};          // threadgroups per grid dimension
};

class Device {
public:
    virtual ~Device() = default;

    virtual std::string name() const = 0;                  // "Apple M3 Max", or the Vulkan device's
    virtual uint64_t recommended_working_set() const = 0;  // bytes the GPU should keep resident at most
    virtual uint64_t threadgroup_memory() const = 0;       // bytes of threadgroup memory per threadgroup
    virtual uint32_t thread_execution_width() const = 0;   // SIMD-group width
    virtual bool unified_memory() const = 0;               // the CPU and the GPU share memory

    virtual BufferPtr buffer_new(uint64_t bytes, Storage storage) = 0;

    // The pipeline of kernel `name` (MetalKernel::name) with `constants` set; made once per set and kept.
    // Throws coli::Error for a kernel the library lacks, a constant it does not have, or a threadgroup the
    // device cannot run.
    const Pipeline& pipeline(std::string_view name, std::span<const ConstantValue> constants = {});

    // Encodes a dispatch of `p` in the current command buffer, after checking args against the kernel's
    // table entry (throws coli::Error naming the kernel and the slot). Dispatches run in order, each
    // seeing every write before it.
    void dispatch(const Pipeline& p, const DispatchArgs& args);
    // Blits: dst[dst_offset, + bytes) = src[src_offset, + bytes); every byte of dst = value.
    virtual void copy(const BufferPtr& src, uint64_t src_offset, const BufferPtr& dst, uint64_t dst_offset,
                      uint64_t bytes) = 0;
    virtual void fill(const BufferPtr& dst, uint8_t value) = 0;
    // Commits the current command buffer and waits until it has run.
    virtual void commit_and_wait() = 0;

protected:
    // The implementation's pipeline for a kernel with its constants (already checked against the table).
    virtual std::shared_ptr<void> pipeline_make(const MetalKernel& k,
                                                std::span<const ConstantValue> constants,
                                                const std::array<uint32_t, 3>& threads) = 0;
    // Encodes a checked dispatch.
    virtual void dispatch_encode(const Pipeline& p, const DispatchArgs& args) = 0;

private:
    // Made so far, by kernel and its constants as (index << 32 | bits), sorted (their addresses stay valid).
    std::map<std::pair<const MetalKernel*, std::vector<uint64_t>>, std::unique_ptr<Pipeline>> pipelines_;
};

// A compute encoder as Metal's (MTLComputeCommandEncoder): set_pipeline, set_buffer / set_bytes by slot,
// dispatch_threadgroups; bindings carry over from one dispatch to the next, as Metal's do.
class ComputeEncoder {
public:
    explicit ComputeEncoder(Device& device) : device_(device) {}
    void set_pipeline(const Pipeline& p) { pipeline_ = &p; }
    void set_buffer(const BufferPtr& b, uint32_t index);
    void set_bytes(const void* bytes, uint32_t length, uint32_t index);
    void dispatch_threadgroups(uint32_t x, uint32_t y = 1, uint32_t z = 1);

private:
    Device& device_;
    const Pipeline* pipeline_ = nullptr;
    DispatchArgs args_;
};

// The device Metal offers on this machine: throws coli::Error saying why where there is none (not Apple, no
// GPU, a library that does not compile).
std::unique_ptr<Device> metal_device_open();
// The Metal-shaped device on Vulkan device `index` (-1: the best one), for the tests on Linux: throws
// coli::Error where this build has no Vulkan backend or the machine no device.
std::unique_ptr<Device> metal_device_on_vulkan(int index = -1);

}  // namespace coli::metal
