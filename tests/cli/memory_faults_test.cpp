// Memory that runs out while the model runs (docs/reliability.md): the expert store's read buffers
// (COLI_STORE_MEMORY_LIMIT: a new buffer beyond that many bytes fails as out of memory) and a device's
// expert tier (COLI_TIER_MEMORY_LIMIT: an upload beyond that many resident bytes fails as the device's
// allocation would). Each lowers its budget to what it held and goes on with fewer experts cached; the
// greedy tokens stay transformers' own. A limit below what a token uses in a layer is a one-line error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/fixture_run.h"
#include "common/fixture.h"
#include "common/process.h"

namespace coli {
namespace {

// 16 experts of 24.6 KB (28 KB read buffers) in each of 3 layers, top-4: a token uses 115 KB of them in a
// layer, and the 12-token prompt uses every expert of a layer (460 KB) at once.
constexpr const char* kFixture = "olmoe_gqa";

// `coli run` on the fixture's prompt for as many greedy tokens as its oracle has, with `hook` set to
// `limit` bytes.
test::ProcessResult run_with_limit(const test::Fixture& fx, const char* hook, const std::string& limit,
                                   const std::string& flags) {
    ::setenv(hook, limit.c_str(), 1);
    test::ProcessResult r = test::coli_run(test::fixture_run_args(fx, flags));
    ::unsetenv(hook);
    return r;
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(MemoryFaults, AStoreShortOfMemoryLowersItsBudgetAndChangesNoToken) {
    const test::Fixture fx = test::fixture_load(kFixture);
    // Unlimited (--no-mmap: the experts are read into buffers the store allocates) and a budget of 1 MB,
    // each under limits of about 7 and 4 experts.
    for (const char* flags : {"--backend cpu --no-mmap", "--backend cpu --ram-gb 0.001"}) {
        for (const char* limit : {"200000", "120000"}) {
            SCOPED_TRACE(fmt::format("{}, limit {}", flags, limit));
            const auto r = run_with_limit(fx, "COLI_STORE_MEMORY_LIMIT", limit, flags);
            ASSERT_EQ(r.exit_code, 0) << r.err;
            EXPECT_EQ(test::last_line(r.out), test::ids_text(fx.greedy));
            EXPECT_EQ(count_of(r.err, "the RAM budget for experts is lowered from"), 1u) << r.err;
            EXPECT_NE(r.err.find("RAM budget for experts: lowered to"), std::string::npos) << r.err;
        }
    }
}

TEST(MemoryFaults, BelowWhatATokenUsesInALayerIsAOneLineError) {
    const test::Fixture fx = test::fixture_load(kFixture);
    const auto r = run_with_limit(fx, "COLI_STORE_MEMORY_LIMIT", "100000", "--backend cpu --no-mmap");
    EXPECT_EQ(r.exit_code, 1);
    const std::string last = test::last_line(r.err);
    EXPECT_EQ(last.rfind("coli: error: expert store: cannot read expert", 0), 0u) << r.err;
    EXPECT_NE(last.find("out of memory"), std::string::npos) << last;
}

// The tier's capacity is lowered to what it held; a call whose experts do not fit on the device at once
// then runs on the CPU (counted), which needs the device op to have left its output untouched: the uploads
// all come before the first kernel (a call that failed half-way would add its first experts twice).
TEST(MemoryFaults, ADeviceTierShortOfMemoryLowersItsCapacityAndChangesNoToken) {
    if (!test::vulkan_available())
        GTEST_SKIP() << "SKIPPED: no Vulkan device here (install mesa-vulkan-drivers)";
    const test::Fixture fx = test::fixture_load(kFixture);
    for (const char* limit : {"200000", "50000"}) {
        SCOPED_TRACE(fmt::format("limit {}", limit));
        const auto r = run_with_limit(fx, "COLI_TIER_MEMORY_LIMIT", limit, "--backend vulkan");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(test::last_line(r.out), test::ids_text(fx.greedy));
        EXPECT_EQ(count_of(r.err, "its capacity is lowered from"), 1u) << r.err;
        EXPECT_NE(r.err.find("(lowered; failed device allocations: 1)"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("moe_experts/f32/fault="), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace coli
