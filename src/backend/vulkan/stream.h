// Commands in program order on the device's queue: dispatches, copies and fills are recorded into a
// command buffer (a batch). A command that reads or writes a buffer which a command since the last barrier
// wrote, or writes one that such a command read, gets a full barrier before it (whose scope also takes in
// the batches submitted earlier: it is the queue's submission order); others run without one, so that the
// device may overlap them (a layer's q, k and v projections). A dispatch's writes are the bindings its
// shader does not declare readonly (spirv_access.h). A batch is submitted when the host
// needs a result (finish, which waits), when a long op has been recorded (flush, which does not: the device
// runs it while the host records what follows) or when it grows long. The stream keeps every buffer a
// pending command uses alive until its batch completes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "backend/vulkan/buffer.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/profile.h"

namespace coli::vk {

// Weight buffers bound to the slot arrays (bindings kSlotBinding and kSlotBinding + 1), one per element;
// at most Context::weight_slots each, and as many codes as scales.
struct WeightSlots {
    std::span<const BufferPtr> codes;
    std::span<const BufferPtr> scales;
};

class Stream {
public:
    explicit Stream(std::shared_ptr<Context> ctx);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Runs `pipeline` over groups (x, y, z) with buffers bound to bindings 0, 1, ..., weights to the slot
    // arrays (read only), and push constants.
    void dispatch(const Pipeline& pipeline, std::span<const BufferPtr> buffers, const void* push,
                  uint32_t push_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1,
                  const WeightSlots& slots = {});
    void dispatch(const Pipeline& pipeline, std::initializer_list<BufferPtr> buffers, const void* push,
                  uint32_t push_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1,
                  const WeightSlots& slots = {}) {
        dispatch(pipeline, std::span<const BufferPtr>(buffers.begin(), buffers.size()), push, push_bytes, gx,
                 gy, gz, slots);
    }
    // dst[dst_offset, + bytes) = src[src_offset, + bytes).
    void copy(const BufferPtr& src, uint64_t src_offset, const BufferPtr& dst, uint64_t dst_offset,
              uint64_t bytes);
    // Fills the whole buffer with a 32-bit word (0: zeros).
    void fill(const BufferPtr& dst, uint32_t word);
    // dst[dst_offset, + bytes) = host bytes, through staging memory, or inside the command buffer when few
    // (src may go away after the call).
    void upload(const BufferPtr& dst, uint64_t dst_offset, const void* src, uint64_t bytes);
    // host dst = src[src_offset, + bytes), after every command before it (waits).
    void download(const BufferPtr& src, uint64_t src_offset, void* dst, uint64_t bytes);
    // Submits what is recorded and waits for it, and for every batch submitted before.
    void finish();
    // Submits what is recorded without waiting (the next batch waits for the oldest of kBatches in flight).
    void flush();
    // The next command writes other parts of the buffers that the command before it wrote (rows of its
    // own): its accesses to those buffers need no barrier.
    void concurrent_next() { concurrent_next_ = true; }

    // Device time of commands: timestamp() after a command records when the device finished it (and all
    // before it); once they have run (finish()), timestamps_ms() gives the timestamps taken since its last
    // call, in milliseconds from the first. Only where timestamps_supported(): the queue has timestamps.
    static constexpr uint32_t kMaxTimestamps = 64;  // timestamps between two timestamps_ms()
    bool timestamps_supported() const { return ctx_->timestamp_bits > 0; }
    void timestamp();
    std::vector<double> timestamps_ms();

    const std::shared_ptr<Context>& context() const { return ctx_; }

private:
    // One command buffer and what its commands hold until they have run.
    struct Batch {
        VkCommandBuffer cmd = VK_NULL_HANDLE;     // the commands
        VkFence fence = VK_NULL_HANDLE;           // signaled when a submission of cmd has run
        bool submitted = false;                   // submitted and not yet waited for
        std::vector<BufferPtr> held;              // buffers its commands use
        std::vector<VkDescriptorPool> set_pools;  // descriptor pools, reset once it has run
        size_t set_pool = 0;                      // the pool sets come from now
        uint32_t sets_taken = 0;                  // sets taken from it
    };
    static constexpr int kBatches = 3;  // batches in flight at most

    // Opens the command buffer and puts a barrier before the next command where its accesses conflict with
    // those since the last barrier (see above); then notes them.
    void record_begin(std::span<const VkBuffer> reads, std::span<const VkBuffer> writes);
    void barrier();  // a full barrier now: every command after it sees every write before it
    VkDescriptorSet set_new();
    void batch_wait(Batch& b);  // waits for b's submission, then releases what it held
    Batch& open() { return batches_[open_]; }

    std::shared_ptr<Context> ctx_;
    VkCommandPool command_pool_ = VK_NULL_HANDLE;
    Batch batches_[kBatches];
    int open_ = 0;                              // the batch commands are recorded into
    VkQueryPool timestamps_ = VK_NULL_HANDLE;   // kMaxTimestamps queries, made on first use
    uint32_t timestamps_taken_ = 0;             // taken since the last timestamps_ms()
    bool recording_ = false;                    // the open batch's command buffer is open
    bool concurrent_next_ = false;              // concurrent_next() was called
    std::vector<VkBuffer> written_;             // buffers written since the last barrier
    std::vector<VkBuffer> read_;                // buffers read since the last barrier
    std::vector<VkBuffer> last_written_;        // buffers the last command wrote
    std::unique_ptr<DispatchProfile> profile_;  // Context::profile: every dispatch timed alone
    uint32_t commands_ = 0;                     // commands recorded in the open batch
    uint64_t staged_bytes_ = 0;                 // staging memory held by the open batch
};

}  // namespace coli::vk
