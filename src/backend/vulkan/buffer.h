// Vulkan buffers: one VkBuffer with its own memory, freed (or kept for reuse) when the last reference
// goes. The command stream holds references to every buffer its pending commands use, so a buffer is
// never released while the device may still touch it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/vulkan/context.h"

namespace coli::vk {

enum class Memory : uint8_t {
    device,   // device-local: tensors, weights, scratch
    staging,  // host-visible, mapped: uploads and readbacks
    unified,  // device-local and host-visible (Context::unified()): weights written in place
};

struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;        // the buffer
    VkDeviceMemory memory = VK_NULL_HANDLE;  // its memory
    uint64_t bytes = 0;                      // capacity (at least what was asked, a multiple of 4)
    void* mapped = nullptr;                  // host address for staging and unified memory, else null
    Memory kind = Memory::device;            // where it lives
};
using BufferPtr = std::shared_ptr<Buffer>;

// A buffer of at least `bytes` (never 0: empty tensors still bind a valid buffer).
BufferPtr buffer_new(const std::shared_ptr<Context>& ctx, uint64_t bytes, Memory kind);

// Released buffers by size class, for reuse: ops allocate scratch constantly and vkAllocateMemory is slow.
class BufferPool {
public:
    explicit BufferPool(Context& ctx) : ctx_(ctx) {}
    ~BufferPool();
    // A pooled buffer of class `bytes`, or a null buffer when none is kept.
    Buffer take(Memory kind, uint64_t bytes);
    // Keeps b for reuse when the pool has room, else frees it.
    void give(const Buffer& b);
    // The size class of a request: small buffers round up to a power of two so that they can be reused.
    static uint64_t size_class(uint64_t bytes);

private:
    void release(const Buffer& b);
    Context& ctx_;
    std::mutex mutex_;                                                 // buffers are freed from any thread
    std::map<std::pair<Memory, uint64_t>, std::vector<Buffer>> free_;  // by (kind, capacity)
    uint64_t pooled_bytes_ = 0;                                        // capacity held in free_
};

}  // namespace coli::vk
