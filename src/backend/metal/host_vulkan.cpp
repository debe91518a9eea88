// The Metal-shaped device on Vulkan (host.h), for Linux: each kernel runs from the Vulkan shader it was
// generated from, with its frozen values and function constants as specialization constants; buffer(n) is
// binding n, a slot array's buffers (buffer(first) ..) are the elements of its binding, the push slot is
// the push constants, a dispatch is vkCmdDispatch on the Vulkan backend's stream, blits are its copies.
#include <algorithm>

#include "backend/metal/host.h"
#include "backend/vulkan/buffer.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/stream.h"
#include "core/error.h"

namespace coli::metal {

namespace {

class VulkanBuffer final : public Buffer {
public:
    VulkanBuffer(vk::BufferPtr b, uint64_t length) : b_(std::move(b)), length_(length) {}
    uint64_t length() const override { return length_; }
    void* contents() const override { return b_->mapped; }
    const vk::BufferPtr& vk() const { return b_; }

private:
    vk::BufferPtr b_;
    uint64_t length_;  // as asked (the Vulkan buffer may be larger)
};

const vk::BufferPtr& vk_of(const BufferPtr& b) {
    return static_cast<const VulkanBuffer&>(*b).vk();
}

class VulkanDevice final : public Device {
public:
    explicit VulkanDevice(std::shared_ptr<vk::Context> ctx) : ctx_(ctx), pipelines_(ctx), stream_(ctx) {}

    std::string name() const override { return ctx_->info.name + " (Vulkan, as a Metal device)"; }
    uint64_t recommended_working_set() const override { return ctx_->info.local_bytes; }
    uint64_t threadgroup_memory() const override { return ctx_->props.limits.maxComputeSharedMemorySize; }
    uint32_t thread_execution_width() const override { return ctx_->subgroup_size; }
    bool unified_memory() const override { return ctx_->unified(); }

    BufferPtr buffer_new(uint64_t bytes, Storage storage) override {
        // Shared storage is memory both sides see: device-local and host-visible where the device has it,
        // else host-visible.
        const vk::Memory kind = storage == Storage::gpu_only ? vk::Memory::device
                                : ctx_->unified()            ? vk::Memory::unified
                                                             : vk::Memory::staging;
        return std::make_shared<VulkanBuffer>(vk::buffer_new(ctx_, bytes, kind, vk::Sizing::exact), bytes);
    }

    void copy(const BufferPtr& src, uint64_t src_offset, const BufferPtr& dst, uint64_t dst_offset,
              uint64_t bytes) override {
        stream_.copy(vk_of(src), src_offset, vk_of(dst), dst_offset, bytes);
    }
    void fill(const BufferPtr& dst, uint8_t value) override {
        constexpr uint32_t kEveryByte = 0x01010101u;
        stream_.fill(vk_of(dst), value * kEveryByte);
    }
    void commit_and_wait() override { stream_.finish(); }

protected:
    std::shared_ptr<void> pipeline_make(const MetalKernel& k, std::span<const ConstantValue> constants,
                                        const std::array<uint32_t, 3>&) override {
        // Specialization constants 0 .. the largest id: frozen values, constants as set, else their fallback.
        uint32_t n = 0;
        for (const MetalFrozen& f : k.frozen) n = std::max(n, f.spec_id + 1);
        for (const MetalConstant& c : k.constants) n = std::max(n, c.spec_id + 1);
        std::vector<uint32_t> spec(n, 0);
        for (const MetalFrozen& f : k.frozen) spec[f.spec_id] = f.value;
        for (const MetalConstant& c : k.constants) spec[c.spec_id] = constant_bits(c, constants);
        return std::make_shared<vk::Pipeline>(pipelines_.get(k.shader, spec));
    }

    void dispatch_encode(const Pipeline& p, const DispatchArgs& args) override {
        const MetalKernel& k = *p.kernel;
        std::vector<vk::BufferPtr> bindings;  // bindings 0, 1, ...: the kernel's plain buffers
        std::vector<vk::BufferPtr> slots[2];  // the slot arrays' elements: codes, scales
        for (const MetalBuffer& b : k.buffers) {
            if (b.count == 1 && b.binding < vk::kSlotBinding) {
                if (bindings.size() <= b.binding) bindings.resize(b.binding + 1);
                bindings[b.binding] = vk_of(args.buffers[b.first]);
                continue;
            }
            check(b.binding == vk::kSlotBinding || b.binding == vk::kSlotBinding + 1,
                  "metal on vulkan: kernel '{}' has an array at binding {}, not a weight-slot binding",
                  k.name, b.binding);
            for (uint32_t e = 0; e < b.count && args.buffers[b.first + e]; ++e)
                slots[b.binding - vk::kSlotBinding].push_back(vk_of(args.buffers[b.first + e]));
        }
        for (size_t i = 0; i < bindings.size(); ++i)
            check(bindings[i] != nullptr, "metal on vulkan: kernel '{}' has no buffer at binding {}", k.name,
                  i);
        const auto push_bytes = static_cast<uint32_t>(k.push_bytes);
        stream_.dispatch(*static_cast<const vk::Pipeline*>(p.native.get()), bindings,
                         push_bytes > 0 ? args.push.data() : nullptr, push_bytes, args.groups[0],
                         args.groups[1], args.groups[2], vk::WeightSlots{slots[0], slots[1]});
    }

private:
    std::shared_ptr<vk::Context> ctx_;
    vk::Pipelines pipelines_;
    vk::Stream stream_;
};

}  // namespace

std::unique_ptr<Device> metal_device_on_vulkan(int index) {
    std::string why;
    const int picked = vk::device_pick(vk::device_list(), index, &why);
    check(picked >= 0, "metal on vulkan: no Vulkan device: {}", why);
    return std::make_unique<VulkanDevice>(std::make_shared<vk::Context>(picked));
}

}  // namespace coli::metal
