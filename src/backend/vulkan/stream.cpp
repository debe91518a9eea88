#include "backend/vulkan/stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/timer.h"

namespace coli::vk {

namespace {
constexpr uint32_t kSetsPerPool = 512;           // descriptor sets per descriptor pool
constexpr uint32_t kMaxBatchCommands = 2048;     // commands per batch before it is submitted
constexpr uint64_t kStagingChunk = 64ull << 20;  // bytes per staging copy of a large upload
// Staging memory a batch holds before it is submitted (kBatches of them may be in flight).
constexpr uint64_t kMaxBatchStaging = 128ull << 20;
constexpr uint64_t kInlineUploadMax = 4096;  // bytes an upload may carry in the command buffer
constexpr double kFencePollSeconds = 0.002;  // a wait polls its fence this long, then blocks
}  // namespace

Stream::Stream(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
    const Api& api = ctx_->api;
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = ctx_->queue_family;
    vk_check(api.vkCreateCommandPool(ctx_->device, &pci, nullptr, &command_pool_), "vkCreateCommandPool");
    for (Batch& b : batches_) {
        VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = command_pool_;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        vk_check(api.vkAllocateCommandBuffers(ctx_->device, &ai, &b.cmd), "vkAllocateCommandBuffers");
        VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        vk_check(api.vkCreateFence(ctx_->device, &fci, nullptr, &b.fence), "vkCreateFence");
    }
    if (ctx_->profile) profile_ = std::make_unique<DispatchProfile>(ctx_, 2 * kMaxBatchCommands, kBatches);
}

Stream::~Stream() {
    try {
        finish();
    } catch (const Error&) {  // a lost device at exit: nothing left to report it to
    }
    if (profile_) fmt::print(stderr, "{}", profile_->report());
    const Api& api = ctx_->api;
    for (Batch& b : batches_) {
        for (VkDescriptorPool p : b.set_pools) api.vkDestroyDescriptorPool(ctx_->device, p, nullptr);
        api.vkDestroyFence(ctx_->device, b.fence, nullptr);
    }
    if (timestamps_ != VK_NULL_HANDLE) api.vkDestroyQueryPool(ctx_->device, timestamps_, nullptr);
    api.vkDestroyCommandPool(ctx_->device, command_pool_, nullptr);
}

void Stream::record_begin(std::span<const VkBuffer> reads, std::span<const VkBuffer> writes) {
    if (commands_ >= kMaxBatchCommands || staged_bytes_ >= kMaxBatchStaging) flush();
    if (!recording_) {
        VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        vk_check(ctx_->api.vkBeginCommandBuffer(open().cmd, &bi), "vkBeginCommandBuffer");
        recording_ = true;
        if (profile_) profile_->batch_begin(open().cmd, open_);
    }
    // After concurrent_next(), the buffers the last command wrote are exempt: it wrote other parts of them,
    // and any earlier access to them already had its barrier before that command.
    const bool exempt_last = std::exchange(concurrent_next_, false);
    const auto in = [](const std::vector<VkBuffer>& v, VkBuffer b) {
        return std::ranges::find(v, b) != v.end();
    };
    const auto checked = [&](VkBuffer b) { return !(exempt_last && in(last_written_, b)); };
    bool conflict = false;
    for (VkBuffer b : reads) conflict = conflict || (checked(b) && in(written_, b));
    for (VkBuffer b : writes) conflict = conflict || (checked(b) && (in(written_, b) || in(read_, b)));
    if (conflict || profile_) barrier();  // profiled: each command alone
    read_.insert(read_.end(), reads.begin(), reads.end());
    written_.insert(written_.end(), writes.begin(), writes.end());
    last_written_.assign(writes.begin(), writes.end());
}

void Stream::barrier() {
    written_.clear();
    read_.clear();
    // One global barrier, compute and transfer.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    constexpr VkPipelineStageFlags kStages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    ctx_->api.vkCmdPipelineBarrier(open().cmd, kStages, kStages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

VkDescriptorSet Stream::set_new() {
    const Api& api = ctx_->api;
    Batch& b = open();
    if (b.set_pool < b.set_pools.size() && b.sets_taken == kSetsPerPool) {
        ++b.set_pool;
        b.sets_taken = 0;
    }
    if (b.set_pool == b.set_pools.size()) {
        const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                        kSetsPerPool * (kMaxBindings + 2 * ctx_->weight_slots)};
        VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        pci.maxSets = kSetsPerPool;
        pci.poolSizeCount = 1;
        pci.pPoolSizes = &size;
        VkDescriptorPool pool = VK_NULL_HANDLE;
        vk_check(api.vkCreateDescriptorPool(ctx_->device, &pci, nullptr, &pool), "vkCreateDescriptorPool");
        b.set_pools.push_back(pool);
        b.sets_taken = 0;
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = b.set_pools[b.set_pool];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &ctx_->set_layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    vk_check(api.vkAllocateDescriptorSets(ctx_->device, &ai, &set), "vkAllocateDescriptorSets");
    ++b.sets_taken;
    return set;
}

void Stream::dispatch(const Pipeline& pipeline, std::span<const BufferPtr> buffers, const void* push,
                      uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz, const WeightSlots& slots) {
    check(buffers.size() >= 1 && buffers.size() <= kMaxBindings && push_bytes <= kPushBytes,
          "vulkan: dispatch with {} buffers and {} push bytes", buffers.size(), push_bytes);
    check(slots.codes.size() == slots.scales.size() && slots.codes.size() <= ctx_->weight_slots,
          "vulkan: dispatch with {} + {} weight slots, the device binds {}", slots.codes.size(),
          slots.scales.size(), ctx_->weight_slots);
    if (gx == 0 || gy == 0 || gz == 0) return;
    const VkPhysicalDeviceLimits& lim = ctx_->props.limits;
    check(gx <= lim.maxComputeWorkGroupCount[0] && gy <= lim.maxComputeWorkGroupCount[1] &&
              gz <= lim.maxComputeWorkGroupCount[2],
          "vulkan: {}x{}x{} workgroups exceed the device's limits", gx, gy, gz);
    VkBuffer reads[kMaxBindings + 2 * kMaxWeightSlots], written[kMaxBindings];
    size_t n_reads = 0, n_written = 0, index = 0;
    for (const BufferPtr& buf : buffers) {
        reads[n_reads++] = buf->buffer;
        if (pipeline.written & (1u << index++)) written[n_written++] = buf->buffer;
    }
    for (std::span<const BufferPtr> slot : {slots.codes, slots.scales})
        for (const BufferPtr& buf : slot) reads[n_reads++] = buf->buffer;
    record_begin({reads, n_reads}, {written, n_written});
    const Api& api = ctx_->api;
    const VkDescriptorSet set = set_new();
    VkDescriptorBufferInfo infos[kMaxBindings + 2 * kMaxWeightSlots];
    VkWriteDescriptorSet writes[kMaxBindings + 2];
    uint32_t w = 0, i = 0;
    // One write of `count` consecutive descriptors from binding `binding`: the buffers, then (slot arrays)
    // the first one again. The shaders index the slot arrays dynamically, so each element must hold a
    // buffer, also past the jobs.
    const auto bind = [&](uint32_t binding, std::span<const BufferPtr> bufs, size_t count) {
        if (bufs.empty()) return;
        writes[w] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[w].dstSet = set;
        writes[w].dstBinding = binding;
        writes[w].descriptorCount = static_cast<uint32_t>(count);
        writes[w].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[w].pBufferInfo = &infos[i];
        ++w;
        for (const BufferPtr& buf : bufs) {
            infos[i++] = {buf->buffer, 0, VK_WHOLE_SIZE};
            open().held.push_back(buf);
        }
        for (size_t e = bufs.size(); e < count; ++e) infos[i++] = {bufs[0]->buffer, 0, VK_WHOLE_SIZE};
    };
    uint32_t b = 0;
    for (const BufferPtr& buf : buffers) bind(b++, std::span<const BufferPtr>(&buf, 1), 1);
    bind(kSlotBinding, slots.codes, ctx_->weight_slots);
    bind(kSlotBinding + 1, slots.scales, ctx_->weight_slots);
    api.vkUpdateDescriptorSets(ctx_->device, w, writes, 0, nullptr);
    api.vkCmdBindPipeline(open().cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline);
    api.vkCmdBindDescriptorSets(open().cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx_->pipeline_layout, 0, 1, &set,
                                0, nullptr);
    if (push_bytes > 0)
        api.vkCmdPushConstants(open().cmd, ctx_->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes,
                               push);
    if (profile_) profile_->dispatch_start(open().cmd, open_, pipeline.name);
    api.vkCmdDispatch(open().cmd, gx, gy, gz);
    if (profile_) profile_->dispatch_end(open().cmd, open_);
    ++commands_;
}

void Stream::copy(const BufferPtr& src, uint64_t src_offset, const BufferPtr& dst, uint64_t dst_offset,
                  uint64_t bytes) {
    if (bytes == 0) return;
    record_begin({&src->buffer, 1}, {&dst->buffer, 1});
    const VkBufferCopy region{src_offset, dst_offset, bytes};
    ctx_->api.vkCmdCopyBuffer(open().cmd, src->buffer, dst->buffer, 1, &region);
    open().held.push_back(src);
    open().held.push_back(dst);
    ++commands_;
}

void Stream::fill(const BufferPtr& dst, uint32_t word) {
    record_begin({}, {&dst->buffer, 1});
    ctx_->api.vkCmdFillBuffer(open().cmd, dst->buffer, 0, VK_WHOLE_SIZE, word);
    open().held.push_back(dst);
    ++commands_;
}

void Stream::upload(const BufferPtr& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
    // Small uploads travel inside the command buffer: no staging memory, and no buffer-to-buffer copy, which
    // a GPU may run on a copy engine that its compute work then waits for.
    if (bytes <= kInlineUploadMax && bytes % 4 == 0 && dst_offset % 4 == 0) {
        if (bytes == 0) return;
        record_begin({}, {&dst->buffer, 1});
        ctx_->api.vkCmdUpdateBuffer(open().cmd, dst->buffer, dst_offset, bytes, src);
        open().held.push_back(dst);
        ++commands_;
        return;
    }
    for (uint64_t done = 0; done < bytes;) {
        const uint64_t part = std::min(bytes - done, kStagingChunk);
        BufferPtr staging = buffer_new(ctx_, part, Memory::staging);
        std::memcpy(staging->mapped, static_cast<const uint8_t*>(src) + done, part);
        copy(staging, 0, dst, dst_offset + done, part);
        staged_bytes_ += staging->bytes;
        done += part;
    }
}

void Stream::download(const BufferPtr& src, uint64_t src_offset, void* dst, uint64_t bytes) {
    if (bytes == 0) return finish();
    BufferPtr staging = buffer_new(ctx_, bytes, Memory::staging);
    copy(src, src_offset, staging, 0, bytes);
    finish();
    std::memcpy(dst, staging->mapped, bytes);
}

void Stream::timestamp() {
    check(timestamps_supported(), "vulkan: the device's queue has no timestamps");
    const Api& api = ctx_->api;
    if (timestamps_ == VK_NULL_HANDLE) {
        VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qci.queryCount = kMaxTimestamps;
        vk_check(api.vkCreateQueryPool(ctx_->device, &qci, nullptr, &timestamps_), "vkCreateQueryPool");
    }
    record_begin({}, {});
    barrier();  // the timestamp follows the commands before it, and those after it wait for it
    check(timestamps_taken_ < kMaxTimestamps, "vulkan: more than {} timestamps in one batch", kMaxTimestamps);
    api.vkCmdResetQueryPool(open().cmd, timestamps_, timestamps_taken_, 1);
    api.vkCmdWriteTimestamp(open().cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_,
                            timestamps_taken_++);
    ++commands_;
}

std::vector<double> Stream::timestamps_ms() {
    std::vector<uint64_t> ticks(timestamps_taken_);
    if (!ticks.empty())
        vk_check(ctx_->api.vkGetQueryPoolResults(
                     ctx_->device, timestamps_, 0, timestamps_taken_, ticks.size() * sizeof(uint64_t),
                     ticks.data(), sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                 "vkGetQueryPoolResults");
    timestamps_taken_ = 0;
    std::vector<double> ms;
    for (uint64_t t : ticks) ms.push_back(ctx_->timestamp_span_ms(ticks.front(), t));
    return ms;
}

void Stream::flush() {
    if (!recording_) return;
    const Api& api = ctx_->api;
    Batch& b = open();
    recording_ = false;
    commands_ = 0;
    staged_bytes_ = 0;
    vk_check(api.vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &b.cmd;
    vk_check(api.vkQueueSubmit(ctx_->queue, 1, &si, b.fence), "vkQueueSubmit");
    b.submitted = true;
    open_ = (open_ + 1) % kBatches;
    if (open().submitted) batch_wait(open());
}

void Stream::finish() {
    flush();
    for (Batch& b : batches_)
        if (b.submitted) batch_wait(b);
    written_.clear();  // every command has run
    read_.clear();
}

void Stream::batch_wait(Batch& b) {
    const Api& api = ctx_->api;
    // Polled before blocking: a thread blocked in vkWaitForFences wakes late, which a decode step that waits
    // for each layer's routing pays in every layer (docs/benchmarks.md).
    VkResult waited = VK_NOT_READY;
    for (const Timer spin; waited == VK_NOT_READY && spin.seconds() < kFencePollSeconds;)
        waited = api.vkGetFenceStatus(ctx_->device, b.fence);
    if (waited == VK_NOT_READY) waited = api.vkWaitForFences(ctx_->device, 1, &b.fence, VK_TRUE, UINT64_MAX);
    b.submitted = false;
    if (profile_ && waited == VK_SUCCESS) profile_->batch_done(static_cast<int>(&b - batches_));
    vk_check(api.vkResetFences(ctx_->device, 1, &b.fence), "vkResetFences");
    vk_check(api.vkResetCommandBuffer(b.cmd, 0), "vkResetCommandBuffer");
    for (VkDescriptorPool p : b.set_pools) api.vkResetDescriptorPool(ctx_->device, p, 0);
    b.set_pool = 0;
    b.sets_taken = 0;
    b.held.clear();
    vk_check(waited, "the device's work (vkWaitForFences)");
}

}  // namespace coli::vk
