#include "backend/vulkan/buffer.h"

#include <algorithm>
#include <bit>
#include <type_traits>

#include "core/error.h"

namespace coli::vk {

namespace {

constexpr uint64_t kMinBytes = 256;             // smallest scratch size class
constexpr uint64_t kPooledMaxBytes = 64 << 20;  // larger buffers are neither size-classed nor kept
constexpr uint64_t kWordBytes = 4;              // the shaders read 32-bit words
static_assert(std::extent_v<decltype(Context::pools)> == kSizings, "one pool per Sizing");
// Released bytes each pool keeps for reuse at most.
constexpr uint64_t kPoolCapacity[kSizings] = {512ull << 20, 256ull << 20};

uint32_t type_of(const Context& ctx, Memory kind) {
    switch (kind) {
        case Memory::device:
            return ctx.local_type;
        case Memory::staging:
            return ctx.staging_type;
        case Memory::unified:
            return static_cast<uint32_t>(ctx.unified_type);
    }
    return ctx.local_type;
}

Buffer buffer_allocate(Context& ctx, uint64_t bytes, Memory kind) {
    Buffer b;
    b.bytes = bytes;
    b.kind = kind;
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    vk_check(ctx.api.vkCreateBuffer(ctx.device, &bci, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req{};
    ctx.api.vkGetBufferMemoryRequirements(ctx.device, b.buffer, &req);
    const uint32_t type = type_of(ctx, kind);
    if (!(req.memoryTypeBits & (1u << type))) {
        ctx.api.vkDestroyBuffer(ctx.device, b.buffer, nullptr);
        fail("vulkan: storage buffers cannot use memory type {} on {}", type, ctx.info.name);
    }
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    const VkResult r = ctx.api.vkAllocateMemory(ctx.device, &mai, nullptr, &b.memory);
    if (r != VK_SUCCESS) {
        ctx.api.vkDestroyBuffer(ctx.device, b.buffer, nullptr);
        const std::string what = fmt::format(
            "vulkan: allocating {:.1f} MB failed: {} (lower --vram-gb, or use a "
            "smaller model)",
            bytes / 1e6, vk_result_name(r));
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) throw OutOfMemory(what);
        throw Error(what);
    }
    vk_check(ctx.api.vkBindBufferMemory(ctx.device, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if (kind != Memory::device)
        vk_check(ctx.api.vkMapMemory(ctx.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
    return b;
}

}  // namespace

uint64_t BufferPool::capacity_of(uint64_t bytes) const {
    if (sizing_ == Sizing::scratch && bytes <= kMinBytes) return kMinBytes;
    if (sizing_ == Sizing::scratch && bytes <= kPooledMaxBytes) return std::bit_ceil(bytes);
    return std::max((bytes + kWordBytes - 1) / kWordBytes * kWordBytes, kWordBytes);
}

BufferPool::~BufferPool() {
    for (auto& [key, list] : free_)
        for (const Buffer& b : list) release(b);
}

Buffer BufferPool::take(Memory kind, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find({kind, bytes});
    if (it == free_.end()) {
        ++misses_;
        return {};
    }
    Buffer b = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);  // no empty lists: give() frees from the largest
    pooled_bytes_ -= b.bytes;
    return b;
}

void BufferPool::give(const Buffer& b) {
    const uint64_t capacity = kPoolCapacity[static_cast<int>(sizing_)];
    if (b.bytes > kPooledMaxBytes || b.bytes > capacity) return release(b);
    std::lock_guard<std::mutex> lock(mutex_);
    // Room is made by freeing the largest kept buffers: a prefill's large scratch must not leave decode's
    // small buffers (several per layer) to vkAllocateMemory.
    while (pooled_bytes_ + b.bytes > capacity) {
        auto largest = std::prev(free_.end());
        for (auto it = free_.begin(); it != free_.end(); ++it)
            if (it->first.second > largest->first.second) largest = it;
        release(largest->second.back());
        pooled_bytes_ -= largest->second.back().bytes;
        largest->second.pop_back();
        if (largest->second.empty()) free_.erase(largest);
    }
    free_[{b.kind, b.bytes}].push_back(b);
    pooled_bytes_ += b.bytes;
}

void BufferPool::release(const Buffer& b) {
    ctx_.api.vkDestroyBuffer(ctx_.device, b.buffer, nullptr);
    ctx_.api.vkFreeMemory(ctx_.device, b.memory, nullptr);  // unmaps too
}

BufferPtr buffer_new(const std::shared_ptr<Context>& ctx, uint64_t bytes, Memory kind, Sizing sizing) {
    BufferPool& pool = *ctx->pools[static_cast<int>(sizing)];
    const uint64_t capacity = pool.capacity_of(bytes);
    Buffer b = pool.take(kind, capacity);
    if (b.buffer == VK_NULL_HANDLE) b = buffer_allocate(*ctx, capacity, kind);
    return BufferPtr(new Buffer(b), [ctx, &pool](Buffer* p) {
        pool.give(*p);
        delete p;
    });
}

}  // namespace coli::vk
