// Device time per shader, for COLI_VULKAN_PROFILE=1: every dispatch runs alone, after a barrier, between two
// timestamps, and the stream adds each one's time to its shader's line once its batch has run. Serialized,
// so the sum is the device time of the dispatches one after another, not of the overlapped stream; it says
// where a step's device time goes. The report is printed when the backend closes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/vulkan/context.h"

namespace coli::vk {

class DispatchProfile {
public:
    // queries_per_batch: timestamps one batch may take (two per dispatch); batches: batches in flight.
    DispatchProfile(std::shared_ptr<Context> ctx, uint32_t queries_per_batch, int batches);
    ~DispatchProfile();
    DispatchProfile(const DispatchProfile&) = delete;
    DispatchProfile& operator=(const DispatchProfile&) = delete;

    // Records the reset of batch b's queries into cmd (before any of its timestamps).
    void batch_begin(VkCommandBuffer cmd, int b);
    // Records a timestamp before (start) or after the dispatch of `shader` in batch b; the caller puts a
    // barrier before the start.
    void dispatch_start(VkCommandBuffer cmd, int b, const char* shader);
    void dispatch_end(VkCommandBuffer cmd, int b);
    // Adds batch b's dispatches to the totals, once its submission has completed.
    void batch_done(int b);
    // Shaders by total device time: calls, total ms, us per call.
    std::string report() const;

private:
    struct Line {
        uint64_t calls = 0;
        double ms = 0;
    };
    std::shared_ptr<Context> ctx_;
    VkQueryPool pool_ = VK_NULL_HANDLE;
    uint32_t per_batch_;                             // queries of each batch's range
    std::vector<std::vector<const char*>> shaders_;  // per batch: the shader of each timed dispatch
    std::map<std::string, Line> lines_;              // by shader
};

}  // namespace coli::vk
