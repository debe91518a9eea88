// vk::BufferPool, what the Vulkan backend keeps of released buffers: weights (Sizing::exact) take the bytes
// they ask for in whole words, scratch rounds up to its size class, and a pool full of large released buffers
// frees them to keep a small one, so that decode's scratch after a prefill's is reused, not reallocated.
// Skipped loudly where the build has no Vulkan backend or the machine no Vulkan device.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#if COLI_HAVE_VULKAN
#include "backend/vulkan/buffer.h"
#include "backend/vulkan/context.h"
#include "backend/vulkan/device.h"
#endif

namespace coli {
namespace {

#if COLI_HAVE_VULKAN
constexpr uint64_t kLargeBytes = 64ull << 20;  // the largest buffer the pools keep
constexpr int kLargeCount = 8;                 // enough of them to fill the scratch pool (512 MB)
constexpr uint64_t kSmallBytes = 4096;
#endif

// A Vulkan context on device 0, or the test skipped, loudly, where there is none.
class VulkanBufferPool : public ::testing::Test {
protected:
    void SetUp() override {
#if !COLI_HAVE_VULKAN
        GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
        if (vk::device_list().devices.empty())
            GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
        ctx = std::make_shared<vk::Context>(0);
#endif
    }
#if COLI_HAVE_VULKAN
    std::shared_ptr<vk::Context> ctx;
#endif
};

TEST_F(VulkanBufferPool, WeightsTakeTheirSizeScratchItsClass) {
#if COLI_HAVE_VULKAN
    EXPECT_EQ(vk::buffer_new(ctx, 1000, vk::Memory::device, vk::Sizing::exact)->bytes, 1000u);
    EXPECT_EQ(vk::buffer_new(ctx, 1001, vk::Memory::device, vk::Sizing::exact)->bytes, 1004u);
    EXPECT_EQ(vk::buffer_new(ctx, 1000, vk::Memory::device)->bytes, 1024u);
#endif
}

TEST_F(VulkanBufferPool, SmallScratchIsKeptWhenLargeScratchFilledThePool) {
#if COLI_HAVE_VULKAN
    const vk::BufferPool& pool = *ctx->pools[static_cast<int>(vk::Sizing::scratch)];
    {
        std::vector<vk::BufferPtr> large;
        for (int i = 0; i < kLargeCount; ++i)
            large.push_back(vk::buffer_new(ctx, kLargeBytes, vk::Memory::device));
    }                                                      // released: the pool is full
    vk::buffer_new(ctx, kSmallBytes, vk::Memory::device);  // allocated, then released into the full pool
    const uint64_t misses = pool.misses();
    const vk::BufferPtr again = vk::buffer_new(ctx, kSmallBytes, vk::Memory::device);
    EXPECT_EQ(pool.misses(), misses) << "the small buffer was freed instead of kept";
#endif
}

}  // namespace
}  // namespace coli
