// VulkanBackend::upload (and tensor_write, which writes through the same buffer_write): a host table
// reaches the device byte for byte whichever way it travels (up to kPushUploadMaxBytes in write_words
// dispatches of 30 push-constant words each, beyond that or in sizes that are not whole words through the
// stream's upload). Skipped loudly where the build has no Vulkan backend or the machine no Vulkan device.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"

#if COLI_HAVE_VULKAN
#include "backend/vulkan/context.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#endif

namespace coli {
namespace {

TEST(VulkanUpload, TablesArriveByteForByte) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    if (vk::device_list().devices.empty())
        GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    VulkanBackend backend(std::make_shared<vk::Context>(0), 0, default_pool());
    // Around one dispatch's 30 words, several dispatches, the 480-byte limit, and the stream's paths.
    for (const uint64_t bytes : {4, 116, 120, 124, 240, 476, 480, 484, 4000, 6, 10000}) {
        std::vector<uint8_t> table(bytes);
        for (uint64_t i = 0; i < bytes; ++i) table[i] = static_cast<uint8_t>(i * 37 + bytes);
        const vk::BufferPtr b = backend.upload(table.data(), bytes);
        std::vector<uint8_t> back(bytes);
        backend.stream().download(b, 0, back.data(), bytes);
        EXPECT_EQ(back, table) << bytes << " bytes";
    }
#endif
}

}  // namespace
}  // namespace coli
