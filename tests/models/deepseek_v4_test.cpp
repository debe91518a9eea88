// DeepSeek-V4 beyond the common oracle tests (oracle_test.cpp): the compressors' windows, the CSA overlap
// and the sliding ring carried across calls split at every kind of boundary give the one-prefill logits;
// the two checkpoint layouts load; the summary names the layers, the cache and the skipped MTP layer.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <span>
#include <vector>

#include "common/fixture.h"
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

std::unique_ptr<Engine> engine_for(const test::Fixture& fx) {
    EngineOptions o;
    o.model_dir = fx.dir;
    o.backend = "cpu";
    o.hot_set = "none";
    return std::make_unique<Engine>(o);
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
        const auto engine = engine_for(fx);
        const std::span<const int32_t> ids(fx.input_ids);
        const std::vector<float> whole = logits_in_calls(*engine, ids, {});
        std::vector<std::vector<size_t>> all = splits;
        all.emplace_back();
        for (size_t i = 1; i < ids.size(); ++i) all.back().push_back(i);  // token by token
        for (const auto& cuts : all) {
            const std::vector<float> split = logits_in_calls(*engine, ids, cuts);
            const double diff = test::max_rel_diff(split, whole);
            EXPECT_LE(diff, 1e-5) << name << " cut at " << fmt::format("{}", fmt::join(cuts, ","));
            EXPECT_EQ(test::argmax_rows(split, fx.vocab), test::argmax_rows(whole, fx.vocab)) << name;
        }
    }
}

TEST(DeepseekV4, SummaryNamesLayersAndCache) {
    for (const char* name : kV4Fixtures) {
        const test::Fixture fx = test::fixture_load(name);
        const auto engine = engine_for(fx);
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

}  // namespace
}  // namespace coli
