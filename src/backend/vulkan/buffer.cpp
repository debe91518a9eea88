#include "backend/vulkan/buffer.h"

#include <bit>

#include "core/error.h"

namespace coli::vk {

namespace {

constexpr uint64_t kMinBytes = 256;             // smallest size class
constexpr uint64_t kPooledMaxBytes = 64 << 20;  // larger buffers (weights, caches) are not size-classed
constexpr uint64_t kPoolCapacity = 512 << 20;   // released bytes kept for reuse at most

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
        fail("vulkan: allocating {:.1f} MB failed: {} (lower --vram-gb, or use a smaller model)", bytes / 1e6,
             vk_result_name(r));
    }
    vk_check(ctx.api.vkBindBufferMemory(ctx.device, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if (kind != Memory::device)
        vk_check(ctx.api.vkMapMemory(ctx.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
    return b;
}

}  // namespace

uint64_t BufferPool::size_class(uint64_t bytes) {
    if (bytes <= kMinBytes) return kMinBytes;
    if (bytes <= kPooledMaxBytes) return std::bit_ceil(bytes);
    return (bytes + 3) / 4 * 4;  // whole words: the shaders read 32-bit words
}

BufferPool::~BufferPool() {
    for (auto& [key, list] : free_)
        for (const Buffer& b : list) release(b);
}

Buffer BufferPool::take(Memory kind, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find({kind, bytes});
    if (it == free_.end() || it->second.empty()) return {};
    Buffer b = it->second.back();
    it->second.pop_back();
    pooled_bytes_ -= b.bytes;
    return b;
}

void BufferPool::give(const Buffer& b) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (b.bytes <= kPooledMaxBytes && pooled_bytes_ + b.bytes <= kPoolCapacity) {
            free_[{b.kind, b.bytes}].push_back(b);
            pooled_bytes_ += b.bytes;
            return;
        }
    }
    release(b);
}

void BufferPool::release(const Buffer& b) {
    ctx_.api.vkDestroyBuffer(ctx_.device, b.buffer, nullptr);
    ctx_.api.vkFreeMemory(ctx_.device, b.memory, nullptr);  // unmaps too
}

BufferPtr buffer_new(const std::shared_ptr<Context>& ctx, uint64_t bytes, Memory kind) {
    const uint64_t cls = BufferPool::size_class(bytes);
    Buffer b = ctx->pool->take(kind, cls);
    if (b.buffer == VK_NULL_HANDLE) b = buffer_allocate(*ctx, cls, kind);
    return BufferPtr(new Buffer(b), [ctx](Buffer* p) {
        ctx->pool->give(*p);
        delete p;
    });
}

}  // namespace coli::vk
