// The Vulkan stream's GPU timestamps, which the benchmark's device times come from: one per call, in
// milliseconds from the first, later after more work, and forgotten once read. Skipped loudly where the
// build has no Vulkan backend, the machine no Vulkan device, or its queue no timestamps.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#if COLI_HAVE_VULKAN
#include "backend/vulkan/buffer.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/stream.h"
#endif

namespace coli {
namespace {

#if COLI_HAVE_VULKAN
constexpr uint64_t kCopyBytes = 16ull << 20;  // one copy: long enough to be seen on any device
constexpr int kManyCopies = 16;               // the longer stretch
#endif

TEST(VulkanTimestamps, FollowTheCommandsAndAreForgottenOnceRead) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    if (vk::device_list().devices.empty())
        GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    auto ctx = std::make_shared<vk::Context>(0);
    vk::Stream s(ctx);
    if (!s.timestamps_supported()) GTEST_SKIP() << "SKIPPED: the device's queue has no timestamps";
    const vk::BufferPtr a = vk::buffer_new(ctx, kCopyBytes, vk::Memory::device),
                        b = vk::buffer_new(ctx, kCopyBytes, vk::Memory::device);
    s.fill(a, 0);
    s.copy(a, 0, b, 0, kCopyBytes);  // the first touch of b's memory (slow on a CPU device) is not timed
    s.timestamp();
    s.copy(a, 0, b, 0, kCopyBytes);
    s.timestamp();
    for (int i = 0; i < kManyCopies; ++i) s.copy(a, 0, b, 0, kCopyBytes);
    s.timestamp();
    s.finish();
    const std::vector<double> t = s.timestamps_ms();
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0], 0.0);
    EXPECT_GT(t[1], 0.0);
    EXPECT_GT(t[2] - t[1], t[1] - t[0]) << "16 copies took less device time than one";
    EXPECT_TRUE(s.timestamps_ms().empty());
#endif
}

}  // namespace
}  // namespace coli
