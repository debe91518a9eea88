// DeepSeek-V4: the compressors' windows, the CSA overlap and the sliding ring carried across calls split at
// every kind of boundary give the one-prefill logits; an expert cache of one slot gives the unlimited
// cache's logits bit for bit; the logits are finite; the summary names the layers and the cache.
// Two sets: on the transformers oracle fixtures (tests/fixtures/deepseek_v4*, from
// tools/make_deepseek_v4_oracles.py), and on a checkpoint that `coli synth --arch deepseek_v4` writes at test
// time (deepseek_v4_synth.h). Neither compares with transformers: the oracle test (oracle_test.cpp) does.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "common/fixture.h"
#include "common/test_util.h"
#include "deepseek_v4_synth.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace coli {
namespace {

constexpr const char* kV4Fixtures[] = {"deepseek_v4", "deepseek_v4_orig"};

// Logits of the prompt fed in calls that end at `cuts` (then the rest), on a fresh session.
std::vector<float> logits_in_calls(Engine& engine, std::span<const int32_t> ids,
                                   const std::vector<size_t>& cuts) {
    Session session(engine.model());
    std::vector<float> all;
    size_t begin = 0;
    for (size_t end : cuts) {
        const std::vector<float> part = session.forward(ids.subspan(begin, end - begin), true);
        all.insert(all.end(), part.begin(), part.end());
        begin = end;
    }
    const std::vector<float> rest = session.forward(ids.subspan(begin), true);
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
}

constexpr int64_t kCtx = 1024;  // enough for every prompt here; keeps the caches small

std::unique_ptr<Engine> engine_for(const std::filesystem::path& dir, int expert_cache = 0) {
    EngineOptions o;
    o.model_dir = dir;
    o.backend = "cpu";
    o.hot_set = "none";
    o.max_ctx = kCtx;
    o.expert_cache = expert_cache;
    return std::make_unique<Engine>(o);
}

// Cuts `ids` at every position of `cuts` and checks the logits against one prefill.
void expect_splits_match(Engine& engine, std::span<const int32_t> ids, int64_t vocab,
                         std::vector<std::vector<size_t>> splits, const std::string& name) {
    const std::vector<float> whole = logits_in_calls(engine, ids, {});
    splits.emplace_back();
    for (size_t i = 1; i < ids.size(); ++i) splits.back().push_back(i);  // token by token
    for (const auto& cuts : splits) {
        const std::vector<float> split = logits_in_calls(engine, ids, cuts);
        const double diff = test::max_rel_diff(split, whole);
        EXPECT_LE(diff, 1e-5) << name << " cut at " << fmt::format("{}", fmt::join(cuts, ","));
        EXPECT_EQ(test::argmax_rows(split, vocab), test::argmax_rows(whole, vocab)) << name;
    }
}

// The fixtures' windows: sliding 8, CSA 4, HCA 8. Cuts inside a window, at a CSA boundary only, at every
// boundary, one token then the rest, and a decode-sized tail: all must agree with one prefill, to rounding
// (a call's matmuls see different row counts, which never changes a row's bits; attention sums the same keys
// in the same order).
TEST(DeepseekV4, PromptSplitAnywhereMatchesOnePrefill) {
    const std::vector<std::vector<size_t>> splits = {{1}, {3}, {4}, {8}, {13}, {13, 27}, {5, 6, 7, 17, 33},
                                                     {39}};
    for (const char* name : kV4Fixtures) {
        const test::Fixture fx = test::fixture_load(name);
        const auto engine = engine_for(fx.dir);
        expect_splits_match(*engine, fx.input_ids, fx.vocab, splits, name);
    }
}

TEST(DeepseekV4, SummaryNamesLayersAndCache) {
    for (const char* name : kV4Fixtures) {
        const test::Fixture fx = test::fixture_load(name);
        const auto engine = engine_for(fx.dir);
        const ModelSummary& m = engine->model().summary();
        EXPECT_EQ(m.family, "deepseek_v4");
        EXPECT_NE(m.architecture.find("1 sliding, 2 CSA, 2 HCA; 2 hash-routed"), std::string::npos)
            << m.architecture;
        // Per token: a CSA entry (32 floats) and indexer key (16) every 4 tokens in 2 layers, an HCA entry
        // every 8 in 2 layers: 2 * 48 * 4 / 4 + 2 * 32 * 4 / 8 = 128 bytes.
        EXPECT_EQ(m.kv_bytes_per_token, 128u);
        EXPECT_GT(m.state_bytes, 0u);
        EXPECT_NE(m.kv_detail.find("CSA"), std::string::npos);
    }
}

// The synthesized checkpoint (original layout: FP8 + E8M0 dense, MXFP4 experts, window 128, CSA 4, HCA 128):
// cuts just before, at and after a CSA window's end, the sliding window's end and both HCA windows' ends,
// several at once, and token by token.
TEST(DeepseekV4Synth, PromptSplitAtWindowBoundariesMatchesOnePrefill) {
    const test::SynthModel& m = test::deepseek_v4_synth();
    const auto engine = engine_for(m.dir);
    constexpr size_t W = test::kV4SynthWindow, C = test::kV4SynthCsa, H = test::kV4SynthHca;
    const std::vector<std::vector<size_t>> splits = {{C - 1},
                                                     {C},
                                                     {C + 1},
                                                     {W - 1},
                                                     {W},
                                                     {W + 1},
                                                     {H - 1, H + 1},
                                                     {2 * H - 1},
                                                     {2 * H},
                                                     {1, C, 2 * C + 1, W, H + C, 2 * H}};
    expect_splits_match(*engine, m.input_ids, m.vocab, splits, "synth");
}

TEST(DeepseekV4Synth, OneExpertSlotEqualsUnlimitedBitForBit) {
    const test::SynthModel& m = test::deepseek_v4_synth();
    const auto unlimited = engine_for(m.dir, 0);
    const auto one_slot = engine_for(m.dir, 1);
    const std::vector<float> a = logits_in_calls(*unlimited, m.input_ids, {test::kV4SynthHca});
    const std::vector<float> b = logits_in_calls(*one_slot, m.input_ids, {test::kV4SynthHca});
    ASSERT_EQ(a.size(), b.size());
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    EXPECT_EQ(differ, 0u) << "of " << a.size() << " logits";
}

TEST(DeepseekV4Synth, LogitsFiniteAndSummary) {
    const test::SynthModel& m = test::deepseek_v4_synth();
    const auto engine = engine_for(m.dir);
    const std::vector<float> logits = logits_in_calls(*engine, m.input_ids, {});
    ASSERT_EQ(logits.size(), m.input_ids.size() * size_t(m.vocab));
    size_t bad = 0;
    for (float v : logits) bad += !std::isfinite(v);
    EXPECT_EQ(bad, 0u);
    const ModelSummary& s = engine->model().summary();
    EXPECT_EQ(s.family, "deepseek_v4");
    EXPECT_NE(s.architecture.find("2 sliding, 1 CSA, 1 HCA; 3 hash-routed"), std::string::npos)
        << s.architecture;
    EXPECT_NE(s.formats.find("F8_E4M3"), std::string::npos) << s.formats;
    EXPECT_NE(s.formats.find("MXFP4"), std::string::npos) << s.formats;
}

}  // namespace
}  // namespace coli
