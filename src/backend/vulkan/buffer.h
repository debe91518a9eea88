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

// How a buffer's capacity follows its request, and which pool keeps it for reuse once released.
enum class Sizing : uint8_t {
    scratch,  // small requests round up to a power of two, so that buffers of nearby sizes are reused
    exact,    // the request in whole words (weights: device memory holds what the VRAM budget counts; an
              // evicted expert's buffers are reused by the next expert of its shape)
};
inline constexpr int kSizings = 2;

// A buffer of at least `bytes` (never 0: empty tensors still bind a valid buffer).
BufferPtr buffer_new(const std::shared_ptr<Context>& ctx, uint64_t bytes, Memory kind,
                     Sizing sizing = Sizing::scratch);

// Released buffers by capacity, for reuse: ops allocate scratch constantly and vkAllocateMemory is slow
// (docs/benchmarks.md). Each Sizing has a pool of its own, so that released weights cannot fill the room
// that scratch needs.
class BufferPool {
public:
    BufferPool(Context& ctx, Sizing sizing) : ctx_(ctx), sizing_(sizing) {}
    ~BufferPool();
    // A pooled buffer of capacity `bytes`, or a null buffer when none is kept.
    Buffer take(Memory kind, uint64_t bytes);
    // Keeps b for reuse, freeing the largest kept buffers to make room, or frees b when it is too large.
    void give(const Buffer& b);
    // The capacity of a buffer for a request of `bytes`.
    uint64_t capacity_of(uint64_t bytes) const;
    // Requests that no kept buffer served: each one a new allocation.
    uint64_t misses() const { return misses_; }

private:
    void release(const Buffer& b);
    Context& ctx_;
    Sizing sizing_;
    std::mutex mutex_;                                                 // buffers are freed from any thread
    std::map<std::pair<Memory, uint64_t>, std::vector<Buffer>> free_;  // by (kind, capacity)
    uint64_t pooled_bytes_ = 0;                                        // capacity held in free_
    uint64_t misses_ = 0;                                              // take() without a kept buffer
};

}  // namespace coli::vk
