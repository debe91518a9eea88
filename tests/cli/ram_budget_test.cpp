// The RAM budget is a hard limit for the whole process, not only for the cache's bookkeeping: `coli run`
// on a model whose routed experts are several times --ram-gb stays, at its peak resident set (VmHWM, from
// wait4), under dense weights + budget + a stated slack. A control run without a budget goes over the
// same bound, which shows that the bound is tight enough to catch a cache that ignores the budget. A budget
// below what one token needs in a layer is slow but exact; below one expert, it is refused at start.
#include <gtest/gtest.h>

#include <string>

#include "cli/coli_exec.h"
#include "common/checkpoint_bytes.h"
#include "common/process.h"

namespace coli {
namespace {

// OLMoE at --scale 4 (hidden 512, expert intermediate 256, vocabulary 12576), 3 layers of 64 experts:
// 192 experts of 786 KB = 151 MB of routed experts, 32 MB of dense weights.
const std::vector<std::string> kModelFlags = {"--scale", "4", "--layers", "3"};
constexpr double kBudgetGB = 0.04;  // 40 MB: about a quarter of the experts
constexpr uint64_t kBudgetBytes = 40'000'000;

// What a run holds besides dense weights and cached experts. Measured with this same wait4 method:
// `coli --version` peaks at 4.7 MiB (binary, libstdc++, fmt), a full `coli run` of a 3 MB model
// at 9.1 MiB, so the fixed cost is ~10 MB: thread stacks (2 pool + 4 I/O threads, touched pages only),
// glibc malloc arenas (one per allocating thread, keeping freed activation and routing buffers), the KV
// cache (--ctx 64: 3 layers x 2 x 512 floats x 64 positions = 0.8 MB), parsed headers. Linux also carries
// the forking test process's resident set into the child's ru_maxrss across exec (a few MB). 24 MB covers
// these twice over, and stays well below what an unbudgeted cache adds (the control run below, ~80 MB).
constexpr uint64_t kSlackBytes = 24'000'000;

uint64_t dense_bytes_of(const std::filesystem::path& dir) {
    const test::CheckpointBytes b = test::checkpoint_bytes(dir);
    EXPECT_GE(b.experts, 3 * kBudgetBytes) << "the experts should be several times the budget";
    return b.dense;
}

test::ExecResult run_with_budget(const std::filesystem::path& dir, const std::string& ram_gb,
                                 const std::filesystem::path& scratch) {
    return test::coli_exec(
        // --backend cpu: `auto` probes the GPU runtimes (CUDA, the Vulkan loader and its drivers), whose
        // libraries alone are tens of MB of resident set; the bound is about the expert cache.
        {"run", "-m", dir.string(), "--backend", "cpu", "--ram-gb", ram_gb, "--hot-set", "none", "--ctx",
         "64", "--ids", "17,4242,99,1000,5,6000,321,77", "--max-tokens", "6", "--ignore-eos", "--temperature",
         "0"},
        scratch);
}

TEST(RamBudget, PeakRssStaysUnderDensePlusBudgetPlusSlack) {
    test::ScratchDir scratch("ram-budget");
    const auto dir = scratch / "model";
    test::synth_olmoe(dir, kModelFlags, scratch.path());
    const uint64_t bound = dense_bytes_of(dir) + kBudgetBytes + kSlackBytes;

    const test::ExecResult budgeted = run_with_budget(dir, std::to_string(kBudgetGB), scratch.path());
    ASSERT_EQ(budgeted.exit_code, 0) << budgeted.err;
    EXPECT_NE(budgeted.err.find("misses"), std::string::npos) << budgeted.err;
    EXPECT_LE(budgeted.peak_rss_bytes, bound)
        << "peak RSS " << budgeted.peak_rss_bytes << " B over the bound " << bound << " B\n"
        << budgeted.err;

    const test::ExecResult unlimited = run_with_budget(dir, "0", scratch.path());
    ASSERT_EQ(unlimited.exit_code, 0) << unlimited.err;
    EXPECT_GT(unlimited.peak_rss_bytes, bound)
        << "without a budget the run should cache more than the bound allows; if it does not, the bound is "
           "too loose to test anything\n"
        << unlimited.err;
}

// The demo model: 2 experts per token in a layer, each 3 x 256 x 160 bf16 = 246 KB (0.00025 GB).
TEST(RamBudget, BelowATokensExpertsIsExactAndBelowOneExpertIsRefused) {
    const std::string run =
        "run --no-mmap --hot-set none -n 8 --temperature 0 --print-ids --ids 5,17,99,200,33";
    const auto clean = test::coli_run(run);
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    const auto one_expert = test::coli_run(run + " --ram-gb 0.0003");  // one expert, not a token's two
    ASSERT_EQ(one_expert.exit_code, 0) << one_expert.err;
    EXPECT_EQ(test::last_line(one_expert.out), test::last_line(clean.out));
    EXPECT_NE(one_expert.err.find("holds fewer than the 2 experts a token uses"), std::string::npos)
        << one_expert.err;
    const auto refused = test::coli_run(run + " --ram-gb 0.0001");
    EXPECT_EQ(refused.exit_code, 1);
    const std::string last = test::last_line(refused.err);
    EXPECT_EQ(last.rfind("coli: error: ", 0), 0u) << refused.err;
    EXPECT_NE(last.find("smaller than one expert"), std::string::npos) << last;
    EXPECT_NE(last.find("raise --ram-gb to at least 0.01"), std::string::npos) << last;
}

}  // namespace
}  // namespace coli
