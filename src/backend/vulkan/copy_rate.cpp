// The device-copy bound on Vulkan: copy_words.comp, a copy on the compute units that the kernels it bounds
// run on (vkCmdCopyBuffer may be served by a copy engine far slower than they, docs/benchmarks.md), timed by
// GPU timestamps where the queue has them.
#include <algorithm>
#include <vector>

#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/median.h"
#include "core/timer.h"

namespace coli {

namespace {
constexpr uint64_t kCopyWordBytes = 16;         // copy_words.comp moves uvec4 words
constexpr uint32_t kCopyThreads = 256;          // its local size
constexpr uint64_t kCopyMaxBytes = 1ull << 30;  // bytes per measured copy at most
constexpr uint64_t kLocalShare = 8;             // and at most this share of device-local memory
// An idle GPU lowers its clocks between submissions (docs/benchmarks.md), so copies run this long before the
// timed ones.
constexpr double kWarmupSeconds = 0.25;
constexpr int kRuns = 9;  // timed copies; the median is reported
constexpr double kGiga = 1e9;
}  // namespace

void VulkanBackend::words_copy(const vk::BufferPtr& src, uint64_t src_offset, const vk::BufferPtr& dst,
                               uint64_t dst_offset, uint64_t bytes) {
    const auto words = static_cast<uint32_t>(bytes / kCopyWordBytes);
    const struct {
        uint32_t count, src_word, dst_word;
    } push{words, static_cast<uint32_t>(src_offset / kCopyWordBytes),
           static_cast<uint32_t>(dst_offset / kCopyWordBytes)};
    run("copy_words", {}, {src, dst}, push, groups_for(words, kCopyThreads));
}

double VulkanBackend::copy_gbps_measure() {
    const uint64_t bytes = std::min(kCopyMaxBytes, ctx_->info.local_bytes / kLocalShare);
    const vk::BufferPtr src = vk::buffer_new(ctx_, bytes, vk::Memory::device),
                        dst = vk::buffer_new(ctx_, bytes, vk::Memory::device);
    stream_.fill(src, 0);
    for (const Timer warm; warm.seconds() < kWarmupSeconds;) {
        words_copy(src, 0, dst, 0, bytes);
        stream_.finish();
    }
    std::vector<double> ms(kRuns);
    if (stream_.timestamps_supported()) {
        stream_.timestamp();
        for (int r = 0; r < kRuns; ++r) {
            words_copy(src, 0, dst, 0, bytes);
            stream_.timestamp();
        }
        stream_.finish();
        const std::vector<double> t = stream_.timestamps_ms();
        for (int r = 0; r < kRuns; ++r) ms[r] = t[r + 1] - t[r];
    } else {
        for (double& run_ms : ms) {
            const Timer t;
            words_copy(src, 0, dst, 0, bytes);
            stream_.finish();
            run_ms = t.seconds() * 1e3;
        }
    }
    return 2.0 * static_cast<double>(bytes) / (median(ms) * 1e-3) / kGiga;
}

}  // namespace coli
