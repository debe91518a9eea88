// A prompt needs each routed expert at most once: whatever the cache holds, the expert bytes a prompt
// reads stay within the model's expert bytes, which `coli run` prints beside them. The budget here is a
// quarter of the experts, so a store that evicted experts the prompt still needs, or read the next
// layer's guesses over them, would read some twice and go over.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "cli/coli_exec.h"

namespace coli {
namespace {

// OLMoE at --scale 4, 3 layers of 64 experts top-8: 151 MB of routed experts (see ram_budget_test.cpp).
const std::vector<std::string> kModelFlags = {"--scale", "4", "--layers", "3"};
constexpr const char* kBudgetGB = "0.04";  // about a quarter of the experts
constexpr int kPromptTokens = 48;          // x 8 experts each: nearly every expert of every layer

// The bytes of a figure printed by bytes_human ("151.00 MB", "786 B").
double bytes_of(const std::string& value, const std::string& unit) {
    const double v = std::stod(value);
    if (unit == "KB") return v * 1e3;
    if (unit == "MB") return v * 1e6;
    if (unit == "GB") return v * 1e9;
    return v;
}

void expect_prompt_reads_within_model(const std::vector<std::string>& extra) {
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
    ASSERT_EQ(r.exit_code, 0) << r.err;

    const std::regex line(
        R"(prompt: ([\d.]+) (B|KB|MB|GB) of experts read, of the model's ([\d.]+) (B|KB|MB|GB))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.err, m, line)) << r.err;
    const double read = bytes_of(m[1], m[2]), model = bytes_of(m[3], m[4]);
    EXPECT_GT(model, 100e6) << r.err;       // the synthetic model's experts, as the store indexed them
    EXPECT_GT(read, 0.5 * model) << r.err;  // the prompt did route to most experts
    EXPECT_LE(read, model) << r.err;
}

TEST(PromptReads, EachExpertAtMostOnceWithABudget) {
    expect_prompt_reads_within_model({"--ram-gb", kBudgetGB});
}

TEST(PromptReads, EachExpertAtMostOnceFromTheMappings) {
    expect_prompt_reads_within_model({});
}

}  // namespace
}  // namespace coli
