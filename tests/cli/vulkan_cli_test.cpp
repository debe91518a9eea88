// The Vulkan backend's selection and fallback, on the binary as a user meets them: `--backend vulkan`
// without a device and `--vk-device` out of range are one-line errors that say why; an op that fails on
// the device runs on the CPU, counted, with the CPU's greedy tokens; COLI_VULKAN_PROFILE reports the device
// time per shader. Skipped loudly where the build has no
// Vulkan backend or the machine no Vulkan device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "cli/fixture_run.h"
#include "common/fixture.h"
#include "common/process.h"

namespace coli {
namespace {

constexpr const char* kFixture = "olmoe_gqa";

using test::ids_text;
using test::vulkan_available;

std::string run_args(const std::string& extra, const char* fixture = kFixture) {
    return test::fixture_run_args(test::fixture_load(fixture), extra);
}

TEST(VulkanCli, NoDeviceIsAnErrorThatSaysWhy) {
    if (!COLI_HAVE_VULKAN) GTEST_SKIP() << "SKIPPED: this build has no Vulkan backend (-DCOLI_VULKAN=ON)";
    // An ICD list naming no driver: the loader finds no device, as on a machine without a Vulkan driver.
    ASSERT_EQ(setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1), 0);
    const test::ProcessResult r = test::coli_run(run_args("--backend vulkan"));
    unsetenv("VK_ICD_FILENAMES");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("backend 'vulkan' is unavailable"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--backend cpu"), std::string::npos) << "the fix is named: " << r.err;
}

TEST(VulkanCli, DeviceIndexOutOfRangeListsTheDevices) {
    if (!vulkan_available()) GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    const test::ProcessResult r = test::coli_run(run_args("--backend vulkan --vk-device 99"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--vk-device 99 does not exist"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("0: "), std::string::npos) << "device 0 is listed: " << r.err;
}

TEST(VulkanCli, FailingOpsFallBackToTheCpuWithItsTokens) {
    if (!vulkan_available()) GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    const test::Fixture fx = test::fixture_load(kFixture);
    ASSERT_EQ(setenv("COLI_FAIL_OP", "vulkan:matmul,vulkan:moe_experts", 1), 0);
    const test::ProcessResult r = test::coli_run(run_args("--backend vulkan"));
    unsetenv("COLI_FAIL_OP");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(test::last_line(r.out), ids_text(fx.greedy));
    EXPECT_NE(r.err.find("fault injection"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("matmul 0/"), std::string::npos)
        << "every matmul is counted as a fallback: " << r.err;
    EXPECT_NE(r.err.find("route_softmax_topk 0/"), std::string::npos)
        << "the router reads the logits back: a host step, not a native op: " << r.err;
    EXPECT_NE(r.err.find("host steps: "), std::string::npos) << r.err;
}

// The op kinds a run called, from its "ops on vulkan: embedding 8/0/0, ... (native/host step/fallback)".
std::vector<std::string> ops_used(const std::string& err) {
    const std::string head = "ops on vulkan: ";
    const size_t begin = err.find(head), end = err.find(" (native/host step/fallback)", begin);
    if (begin == std::string::npos || end == std::string::npos) return {};
    std::vector<std::string> ops;
    for (size_t pos = begin + head.size(); pos < end;) {
        const size_t space = err.find(' ', pos), comma = err.find(", ", pos);
        ops.push_back(err.substr(pos, space - pos));
        if (comma == std::string::npos || comma > end) break;
        pos = comma + 2;
    }
    return ops;
}

// A device that fails mid-run (docs/reliability.md): every op kind that the fixtures' forwards call,
// failing in turn, runs on the CPU instead, counted as a fallback, and the greedy tokens stay the
// reference's. Fixtures that together call every kind of op the models use (GQA, MLA with the DSA indexer,
// KDA with MXFP4 experts, DeepSeek-V4's compressed attention and hyper-connections with FP8 and MXFP4
// weights); each op kind is failed on the first fixture that calls it.
TEST(VulkanCli, EachOpFailingInTurnKeepsTheTokens) {
    if (!vulkan_available()) GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    std::set<std::string> failed;
    for (const char* fixture : {"olmoe_gqa", "deepseek_v32", "kimi_k3", "deepseek_v4_orig"}) {
        const std::string expected = ids_text(test::fixture_load(fixture).greedy);
        const test::ProcessResult clean = test::coli_run(run_args("--backend vulkan", fixture));
        ASSERT_EQ(clean.exit_code, 0) << fixture << ": " << clean.err;
        ASSERT_EQ(test::last_line(clean.out), expected) << fixture;
        const std::vector<std::string> ops = ops_used(clean.err);
        ASSERT_FALSE(ops.empty()) << fixture << ": " << clean.err;
        for (const std::string& op : ops) {
            if (!failed.insert(op).second) continue;
            ASSERT_EQ(setenv("COLI_FAIL_OP", ("vulkan:" + op).c_str(), 1), 0);
            const test::ProcessResult r = test::coli_run(run_args("--backend vulkan", fixture));
            unsetenv("COLI_FAIL_OP");
            ASSERT_EQ(r.exit_code, 0) << fixture << " with " << op << " failing: " << r.err;
            EXPECT_EQ(test::last_line(r.out), expected) << fixture << " with " << op << " failing";
            EXPECT_NE(r.err.find(op + " 0/0/"), std::string::npos)
                << fixture << ": every " << op << " runs on the cpu, counted: " << r.err;
        }
    }
}

TEST(VulkanCli, ProfileTimesEachShaderWithTheSameTokens) {
    if (!vulkan_available()) GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    const test::Fixture fx = test::fixture_load(kFixture);
    ASSERT_EQ(setenv("COLI_VULKAN_PROFILE", "1", 1), 0);
    const test::ProcessResult r = test::coli_run(run_args("--backend vulkan"));
    unsetenv("COLI_VULKAN_PROFILE");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(test::last_line(r.out), ids_text(fx.greedy)) << "serialized dispatches, same tokens";
    const size_t report = r.err.find("vulkan profile (COLI_VULKAN_PROFILE)");
    ASSERT_NE(report, std::string::npos) << r.err;
    // The decode's projections and its attention are lines of the report, with calls counted.
    for (const char* shader : {"\ngemv_", "\nattn_split ", "\nnorm "})
        EXPECT_NE(r.err.find(shader, report), std::string::npos) << shader << " in " << r.err.substr(report);
}

}  // namespace
}  // namespace coli
