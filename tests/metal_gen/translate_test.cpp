// coli_msl_gen's translation on small compute shaders compiled by glslc for the test: set 0's bindings at
// their buffer slots, arrays after, push constants at kMetalPushSlot, function constants at the kernel's
// base, frozen constants; and a failure naming the kernel for each limit it enforces (an implicit buffer,
// too many buffers, threadgroup memory, threads, an unfrozen buffer array).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "backend/metal/msl_gen/library.h"
#include "backend/metal/msl_gen/spirv_text.h"
#include "backend/metal/msl_gen/translate.h"

namespace coli::metal::gen {
namespace {

namespace fs = std::filesystem;

// The SPIR-V of a GLSL compute shader, compiled as the Vulkan build compiles its shaders.
std::vector<uint32_t> compile(const std::string& name, const std::string& glsl) {
    // One folder per process: ctest runs the cases of this file in parallel.
    const fs::path dir = fs::temp_directory_path() / ("coli_metal_gen_test_" + std::to_string(getpid()));
    fs::create_directories(dir);
    const fs::path src = dir / (name + ".comp"), out = dir / (name + ".spv.inc");
    std::ofstream(src) << glsl;
    const std::string cmd = std::string(COLI_GLSLC) + " --target-env=vulkan1.2 -O -mfmt=c -o " +
                            out.string() + " " + src.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(out);
    std::ostringstream text;
    text << in.rdbuf();
    return spirv_from_c_text(text.str());
}

// The message translate() throws, or "" when it does not.
std::string failure(const std::string& name, const std::string& glsl, std::vector<MetalFrozen> frozen = {}) {
    try {
        translate(name, compile(name, glsl), frozen, 0);
    } catch (const KernelError& e) {
        return e.what();
    }
    return "";
}

constexpr const char* kPlain = R"(#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint kMode = 0u;
layout(constant_id = 1) const bool kFlag = false;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer B { float b[]; };
layout(push_constant) uniform Push { uint n; float scale; } pc;
shared float tile[64];
void main() {
    uint i = gl_GlobalInvocationID.x;
    tile[gl_LocalInvocationID.x] = i < pc.n ? a[i] : 0.0;
    barrier();
    if (i < pc.n) b[i] = tile[63u - gl_LocalInvocationID.x] * pc.scale + float(kMode) + (kFlag ? 1.0 : 0.0);
}
)";

TEST(MetalGen, MapsBindingsPushConstantsAndFunctionConstants) {
    const Kernel k = translate("plain", compile("plain", kPlain), {}, 24);
    EXPECT_EQ(k.entry, "coli_plain");
    ASSERT_EQ(k.buffers.size(), 2u);
    EXPECT_EQ(k.buffers[0].first, 0u);
    EXPECT_FALSE(k.buffers[0].written);
    EXPECT_EQ(k.buffers[1].first, 3u);
    EXPECT_TRUE(k.buffers[1].written);
    EXPECT_EQ(k.push_bytes, 8u);
    EXPECT_EQ(k.threads[0], 64u);
    EXPECT_EQ(k.threadgroup_bytes, 256u);
    ASSERT_EQ(k.constants.size(), 2u);
    EXPECT_EQ(k.constants[0].index, 24u);
    EXPECT_EQ(k.constants[1].index, 25u);
    EXPECT_EQ(k.constants[1].type, MetalConstantType::boolean);
    EXPECT_NE(k.msl.find("kernel void coli_plain("), std::string::npos);
    EXPECT_NE(k.msl.find("[[buffer(3)]]"), std::string::npos);
    EXPECT_NE(k.msl.find("[[buffer(30)]]"), std::string::npos);
    EXPECT_NE(k.msl.find("[[function_constant(25)]]"), std::string::npos);
    EXPECT_EQ(k.msl.find("gl_WorkGroupSize"), std::string::npos);  // named for the kernel
}

TEST(MetalGen, TwoKernelsShareOneLibrary) {
    const std::vector<uint32_t> spirv = compile("plain", kPlain);
    const Kernel a = translate("first", spirv, {}, 0), b = translate("second", spirv, {}, 8);
    const std::string lib = msl_library(std::vector<Kernel>{a, b});
    EXPECT_NE(lib.find("kernel void coli_first("), std::string::npos);
    EXPECT_NE(lib.find("kernel void coli_second("), std::string::npos);
    size_t includes = 0;
    for (size_t at = lib.find("#include <metal_stdlib>"); at != std::string::npos;
         at = lib.find("#include <metal_stdlib>", at + 1))
        ++includes;
    EXPECT_EQ(includes, 1u);
}

constexpr const char* kSlots = R"(#version 450
layout(local_size_x = 32) in;
layout(constant_id = 2) const uint kSlots = 1u;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) readonly buffer W { float w[]; } weights[kSlots];
layout(std430, binding = 5) readonly buffer S { float s[]; } scales[kSlots];
void main() {
    uint i = gl_GlobalInvocationID.x;
    y[i] = weights[i % kSlots].w[i] * scales[i % kSlots].s[i];
}
)";

TEST(MetalGen, BufferArraysNeedAFrozenLengthAndTakeTheSlotsAfter) {
    EXPECT_NE(failure("slots", kSlots).find("kernel slots: binding 4's array length"), std::string::npos);
    const Kernel k = translate("slots", compile("slots", kSlots), {{2, 6}}, 0);
    EXPECT_EQ(k.name, "slots_k2_6");
    ASSERT_EQ(k.buffers.size(), 3u);
    EXPECT_EQ(k.buffers[1].first, 4u);
    EXPECT_EQ(k.buffers[1].count, 6u);
    EXPECT_EQ(k.buffers[2].first, 10u);  // after the 6 slots of binding 4
    EXPECT_NE(k.msl.find("[[buffer(15)]]"), std::string::npos);
    EXPECT_TRUE(k.constants.empty());
    EXPECT_NE(failure("slots", kSlots, {{2, 14}}).find("past the 30"), std::string::npos);  // 4 + 28 slots
    EXPECT_NE(failure("slots", kSlots, {{7, 1}}).find("no specialization constant 7"), std::string::npos);
}

TEST(MetalGen, RuntimeArrayLengthFails) {
    const std::string message = failure("lengthy", R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer A { float a[]; };
void main() { a[gl_GlobalInvocationID.x % uint(a.length())] = 1.0; }
)");
    EXPECT_NE(message.find("kernel lengthy"), std::string::npos) << message;
    EXPECT_NE(message.find(".length()"), std::string::npos) << message;
}

TEST(MetalGen, TooMuchThreadgroupMemoryFails) {
    const std::string message = failure("big_shared", R"(#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer A { float a[]; };
shared float s[8200];  // 32800 bytes
void main() { s[gl_LocalInvocationID.x * 128u] = 1.0; barrier(); a[gl_GlobalInvocationID.x] = s[gl_LocalInvocationID.x]; }
)");
    EXPECT_NE(message.find("kernel big_shared: 32800 bytes of threadgroup memory"), std::string::npos)
        << message;
}

TEST(MetalGen, TooManyThreadsFails) {
    const std::string message = failure("wide", R"(#version 450
layout(local_size_x = 512, local_size_y = 4) in;
layout(std430, binding = 0) buffer A { float a[]; };
void main() { a[gl_LocalInvocationIndex] = 1.0; }
)");
    EXPECT_NE(message.find("kernel wide: 2048 threads"), std::string::npos) << message;
}

TEST(MetalGen, TooManyBuffersFails) {
    std::string glsl = "#version 450\nlayout(local_size_x = 32) in;\n";
    std::string body;
    for (int b = 0; b < 31; ++b) {
        glsl += "layout(std430, binding = " + std::to_string(b) + ") buffer B" + std::to_string(b) +
                " { float v" + std::to_string(b) + "[]; };\n";
        body += " v" + std::to_string(b) + "[gl_GlobalInvocationID.x] = 1.0;";
    }
    glsl += "void main() {" + body + " }\n";
    const std::string message = failure("crowded", glsl);
    EXPECT_NE(message.find("kernel crowded: binding 30 needs Metal buffer slots up to 30"), std::string::npos)
        << message;
}

// (The shaders on packed integer dot products that are left out are the Vulkan build's own: tests/metal
// checks that the committed table lists them with the reason.)
TEST(MetalGen, PlainShadersAreSupported) {
    EXPECT_TRUE(unsupported_reason(compile("plain", kPlain)).empty());
}

}  // namespace
}  // namespace coli::metal::gen
