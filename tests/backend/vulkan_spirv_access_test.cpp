// vk::spirv_written_bindings, which tells the stream which buffers a dispatch writes (where it needs
// barriers): for every shader of the build, the bindings its GLSL source declares without `readonly` must be
// exactly those the SPIR-V reader finds writable. A reader that misses a write would let a command read a
// buffer before an earlier one has finished writing it.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#if COLI_HAVE_VULKAN
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/spirv_access.h"
#endif

namespace coli {
namespace {

#if COLI_HAVE_VULKAN
// Bit b for every `layout(..., binding = b) <qualifiers> buffer` of the source whose qualifiers lack
// `readonly`.
uint32_t source_written_bindings(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    static const std::regex decl(R"(layout\s*\([^)]*binding\s*=\s*(\d+)[^)]*\)\s*((?:\w+\s+)*?)buffer\b)");
    uint32_t written = 0;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), decl); it != std::sregex_iterator(); ++it)
        if ((*it)[2].str().find("readonly") == std::string::npos) written |= 1u << std::stoi((*it)[1].str());
    return written;
}
#endif

TEST(VulkanSpirvAccess, WrittenBindingsMatchEveryShadersSource) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    const std::filesystem::path dir = std::filesystem::path(COLI_SOURCE_DIR) / "src/backend/vulkan/shaders";
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".comp") continue;
        const std::string stem = entry.path().stem().string();
        // gemv.comp is built in variants (cmake/vulkan.cmake); the others under their own name.
        const std::vector<std::string> names =
            stem == "gemv"
                ? std::vector<std::string>{"gemv_subgroup", "gemv_batch_shared", "gemv_batch_dot_subgroup"}
                : std::vector<std::string>{stem};
        const uint32_t expected = source_written_bindings(entry.path());
        for (const std::string& name : names) {
            EXPECT_EQ(vk::spirv_written_bindings(vk::shader_spirv(name)), expected) << name;
            ++checked;
        }
    }
    EXPECT_GT(checked, 30);
#endif
}

TEST(VulkanSpirvAccess, UnreadableCodeMayWriteEveryBinding) {
#if !COLI_HAVE_VULKAN
    GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
#else
    const std::vector<uint32_t> garbage = {1, 2, 3, 4, 5, 6};
    EXPECT_EQ(vk::spirv_written_bindings(garbage), ~0u);
    constexpr size_t kFirstInstruction = 5;  // after the header
    std::vector<uint32_t> overlong(vk::shader_spirv("softmax").begin(), vk::shader_spirv("softmax").end());
    overlong[kFirstInstruction] |= 0xffffu << 16;  // its word count runs past the end
    EXPECT_EQ(vk::spirv_written_bindings(overlong), ~0u);
#endif
}

}  // namespace
}  // namespace coli
