// The committed Metal kernels (src/backend/metal/generated): the table agrees with the MSL source it
// describes, every kernel fits Metal's limits, and all kernels can share one library (no file-scope name or
// function-constant index twice). The metal_msl_golden test checks that both files are what the generator
// makes from the Vulkan shaders; this one checks the files themselves, in every build.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "backend/metal/kernel_table.h"

namespace coli::metal {
namespace {

std::string library_source() {
    std::ifstream in(std::string(COLI_METAL_LIBRARY));  // made in the build tree by coli_metal_msl
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The parameter list of `kernel void entry(...)` (one line, as SPIRV-Cross writes it), or empty when the
// source has no such kernel.
std::string signature(const std::string& src, std::string_view entry) {
    const std::string head = "kernel void " + std::string(entry) + "(";
    const size_t at = src.find(head);
    if (at == std::string::npos) return {};
    return src.substr(at + head.size(), src.find('\n', at) - at - head.size());
}

TEST(MetalKernels, TableMatchesTheSource) {
    const std::string src = library_source();
    ASSERT_FALSE(src.empty());
    ASSERT_FALSE(metal_kernels().empty());
    const std::regex buffer_attr(R"(\[\[buffer\((\d+)\)\]\])");
    std::set<std::string_view> names;
    for (const MetalKernel& k : metal_kernels()) {
        SCOPED_TRACE(std::string(k.name));
        EXPECT_TRUE(names.insert(k.name).second) << "a kernel name twice";
        EXPECT_EQ(k.entry, "coli_" + std::string(k.name));
        const std::string sig = signature(src, k.entry);
        ASSERT_FALSE(sig.empty()) << "no kernel " << k.entry << " in kernels.metal";
        EXPECT_EQ(src.find("kernel void " + std::string(k.entry) + "(", src.find(k.entry) + 1),
                  std::string::npos);
        std::multiset<uint32_t> in_source, in_table;
        for (std::sregex_iterator it(sig.begin(), sig.end(), buffer_attr), end; it != end; ++it)
            in_source.insert(static_cast<uint32_t>(std::stoul((*it)[1])));
        for (const MetalBuffer& b : k.buffers)
            for (uint32_t i = 0; i < b.count; ++i) in_table.insert(b.first + i);
        if (k.push_bytes > 0) in_table.insert(kMetalPushSlot);
        EXPECT_EQ(in_source, in_table) << "the kernel's [[buffer(n)]] slots differ from the table's";
    }
}

TEST(MetalKernels, FitMetalLimits) {
    for (const MetalKernel& k : metal_kernels()) {
        SCOPED_TRACE(std::string(k.name));
        uint32_t slots = k.push_bytes > 0 ? 1 : 0, next = 0;
        for (const MetalBuffer& b : k.buffers) {
            EXPECT_GE(b.first, next) << "buffers overlap";
            next = b.first + b.count;
            EXPECT_LE(next, kMetalPushSlot);
            slots += b.count;
        }
        EXPECT_LE(slots, kMetalMaxBuffers);
        EXPECT_LE(uint64_t{k.threads[0]} * k.threads[1] * k.threads[2], kMetalMaxThreads);
        EXPECT_LE(k.threadgroup_bytes, kMetalMaxThreadgroupBytes);
        for (const MetalConstant& c : k.constants) EXPECT_LT(c.spec_id, kMetalConstantsPerKernel);
    }
}

// One library: each function-constant index is declared once in the source and owned by one kernel, and
// no file-scope name (a struct or a program-scope constant) is declared twice.
TEST(MetalKernels, ShareOneLibrary) {
    const std::string src = library_source();
    std::map<uint32_t, std::string_view> owner;
    for (const MetalKernel& k : metal_kernels())
        for (const MetalConstant& c : k.constants) {
            EXPECT_TRUE(owner.emplace(c.index, k.name).second) << "function constant " << c.index << " twice";
            const std::string attr = "[[function_constant(" + std::to_string(c.index) + ")]]";
            const size_t at = src.find(attr);
            EXPECT_NE(at, std::string::npos) << k.name << ": no " << attr;
            EXPECT_EQ(src.find(attr, at + 1), std::string::npos) << attr << " twice";
        }
    const std::regex decl(R"((?:^|\n)(?:struct|constant [A-Za-z_0-9<>, ]+?) ([A-Za-z_][A-Za-z_0-9]*)\b)");
    std::set<std::string> declared;
    for (std::sregex_iterator it(src.begin(), src.end(), decl), end; it != end; ++it)
        EXPECT_TRUE(declared.insert((*it)[1]).second) << "file-scope name declared twice: " << (*it)[1];
    EXPECT_GT(declared.size(), metal_kernels().size());
}

TEST(MetalKernels, SkippedShadersSayWhy) {
    for (const MetalSkipped& s : metal_skipped_shaders()) {
        EXPECT_FALSE(s.reason.empty()) << s.shader;
        for (const MetalKernel& k : metal_kernels()) EXPECT_NE(k.shader, s.shader);
    }
}

}  // namespace
}  // namespace coli::metal
