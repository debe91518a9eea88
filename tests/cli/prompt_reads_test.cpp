// A prompt needs each routed expert at most once: whatever the cache holds, the expert bytes a prompt
// reads stay within the model's expert bytes, which `coli run` prints beside them. The budget here is a
// quarter of the experts, so a store that evicted experts the prompt still needs, or read the next
// layer's guesses over them, would read some twice and go over.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>

#include "cli/coli_exec.h"

namespace coli {
namespace {

// OLMoE at --scale 4, 3 layers of 64 experts top-8: 151 MB of routed experts (see ram_budget_test.cpp).
const std::vector<std::string> kModelFlags = {"--scale", "4", "--layers", "3"};
constexpr const char* kBudgetGB = "0.04";  // about a quarter of the experts
constexpr int kExpertsInModel = 3 * 64;
constexpr int kMaxExpertsInBudget = 40'000'000 / 786'432;  // the budget over one expert's 786 KB
constexpr int kPromptTokens = 48;  // x 8 experts each: nearly every expert of every layer

// The bytes of a figure printed by bytes_human ("151.00 MB", "786 B").
double bytes_of(const std::string& value, const std::string& unit) {
    const double v = std::stod(value);
    if (unit == "KB") return v * 1e3;
    if (unit == "MB") return v * 1e6;
    if (unit == "GB") return v * 1e9;
    return v;
}

// The line `coli run` prints for a prompt that read experts.
const std::regex kPromptLine(
    R"(prompt: ([\d.]+) (B|KB|MB|GB) of experts read, of the model's ([\d.]+) (B|KB|MB|GB))");

// Runs the prompt with `extra` flags; checks the prompt's expert bytes against the model's (when it read
// any) and returns stderr.
std::string expect_prompt_reads_within_model(const std::vector<std::string>& extra) {
    test::ScratchDir scratch("prompt-reads");
    const auto dir = scratch / "model";
    test::synth_olmoe(dir, kModelFlags, scratch.path());
    std::string ids;
    for (int i = 0; i < kPromptTokens; ++i) ids += (i ? "," : "") + std::to_string(1 + 257 * i % 12000);
    std::vector<std::string> args = {"run",       "-m",           dir.string(), "--backend", "cpu",
                                     "--hot-set", "none",         "--ctx",      "64",        "--ids",
                                     ids,         "--max-tokens", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::ExecResult r = test::coli_exec(args, scratch.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    if (std::regex_search(r.err, m, kPromptLine)) {
        const double read = bytes_of(m[1], m[2]), model = bytes_of(m[3], m[4]);
        EXPECT_GT(model, 100e6) << r.err;  // the synthetic model's experts, as the store indexed them
        EXPECT_LE(read, model) << r.err;
    }
    return r.err;
}

// The prompt read more than half the model's experts: it routed to most of them, and none was read before.
void expect_prompt_read_most(const std::string& err) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(err, m, kPromptLine)) << err;
    EXPECT_GT(bytes_of(m[1], m[2]), 0.5 * bytes_of(m[3], m[4])) << err;
}

// "experts preloaded: N of M (...)": N and M, or -1 and -1 without that line.
std::pair<int, int> preloaded_of(const std::string& err) {
    const std::regex line(R"(experts preloaded: (\d+) of (\d+) \()");
    std::smatch m;
    if (!std::regex_search(err, m, line)) return {-1, -1};
    return {std::stoi(m[1]), std::stoi(m[2])};
}

TEST(PromptReads, EachExpertAtMostOnceWithABudget) {
    expect_prompt_read_most(expect_prompt_reads_within_model({"--ram-gb", kBudgetGB}));
}

TEST(PromptReads, EachExpertAtMostOnceFromTheMappings) {
    expect_prompt_read_most(expect_prompt_reads_within_model({}));
}

// --preload without a budget brings every expert in at start: the prompt reads nothing.
TEST(PromptReads, PreloadBringsEveryExpertInAtStart) {
    const std::string err = expect_prompt_reads_within_model({"--preload"});
    const auto [preloaded, total] = preloaded_of(err);
    EXPECT_EQ(total, kExpertsInModel) << err;
    EXPECT_EQ(preloaded, kExpertsInModel) << err;
    EXPECT_FALSE(std::regex_search(err, kPromptLine)) << "the prompt read experts\n" << err;
}

// With a budget, --preload stops when the cache is full and the prompt reads the rest, each at most once.
TEST(PromptReads, PreloadStopsAtTheBudget) {
    const std::string err = expect_prompt_reads_within_model({"--preload", "--ram-gb", kBudgetGB});
    const auto [preloaded, total] = preloaded_of(err);
    EXPECT_EQ(total, kExpertsInModel) << err;
    EXPECT_GT(preloaded, 0) << err;
    EXPECT_LE(preloaded, kMaxExpertsInBudget) << err;
    EXPECT_TRUE(std::regex_search(err, kPromptLine)) << err;
}

}  // namespace
}  // namespace coli
