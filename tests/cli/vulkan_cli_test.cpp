// The Vulkan backend's selection and fallback, on the binary as a user meets them: `--backend vulkan`
// without a device and `--vk-device` out of range are one-line errors that say why; an op that fails on
// the device runs on the CPU, counted, with the CPU's greedy tokens; COLI_VULKAN_PROFILE reports the device
// time per shader. Skipped loudly where the build has no
// Vulkan backend or the machine no Vulkan device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/registry.h"
#include "common/fixture.h"
#include "common/process.h"

namespace coli {
namespace {

constexpr const char* kFixture = "olmoe_gqa";

std::string run_args(const std::string& extra) {
    const test::Fixture fx = test::fixture_load(kFixture);
    std::string ids;
    for (int32_t id : fx.input_ids) ids.append(ids.empty() ? "" : ",").append(std::to_string(id));
    return fmt::format(
        "run --model {} --ids {} --max-tokens {} --temperature 0 --print-ids --hot-set none {}",
        fx.dir.string(), ids, fx.greedy.size(), extra);
}

std::string ids_text(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s.append(s.empty() ? "" : ",").append(std::to_string(id));
    return s;
}

bool vulkan_available() {
    for (const BackendInfo& b : backend_list())
        if (b.name == "vulkan") return b.available;
    return false;
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
