// Every family against transformers on the CPU: tiny random-weight models made by tools/make_*_oracles.py
// (fp32, eager attention), each with an unlimited expert cache and with one slot per layer, which must give
// the same bits. What holds per backend: tests/fixtures/README.md.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <span>
#include <type_traits>

#include "common/fixture.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace coli {
namespace {

// The transformers fixtures, and the bundled demo model (trained, bf16; tools/train_demo_model.py).
std::vector<const char*> fixtures() {
    std::vector<const char*> all(std::begin(test::kOracleFixtures), std::end(test::kOracleFixtures));
    all.push_back("models/demo");
    return all;
}

EngineOptions options_for(const test::Fixture& fx, int expert_cache) {
    EngineOptions o;
    o.backend = "cpu";  // the CPU's oracle tests (tests/backend runs every backend)
    o.model_dir = fx.dir;
    o.expert_cache = expert_cache;
    o.hot_set = "none";  // never write into the source tree
    return o;
}

// A fixture folder missing from kOracleFixtures would go untested.
TEST(OracleFixtures, EveryFixtureIsListed) {
    const auto& listed = test::kOracleFixtures;
    for (const auto& entry : std::filesystem::directory_iterator(test::fixtures_dir())) {
        if (!entry.is_directory()) continue;
        EXPECT_NE(std::find_if(std::begin(listed), std::end(listed),
                               [&](const char* f) { return entry.path().filename() == f; }),
                  std::end(listed))
            << entry.path().filename() << " is not in kOracleFixtures";
    }
}

// What a test computes from a fresh session: logits [T, vocab] or token ids.
template <class Run>
using RunResult = std::invoke_result_t<Run, Session&>;

// Runs `run` on a session with an unlimited expert cache and on one with a single slot per layer, and
// expects the same bits (cache invariance: which experts are resident never changes a result, so every
// expert is fetched again and again with one slot); returns the first.
template <class Run>
RunResult<Run> cache_invariant(const test::Fixture& fx, Run run) {
    constexpr int kUnlimited = 0, kOneSlot = 1;
    RunResult<Run> results[2];
    for (int cache : {kUnlimited, kOneSlot}) {
        Engine engine(options_for(fx, cache));
        Session session(engine.model());
        results[cache] = run(session);
    }
    const auto& a = results[kUnlimited];
    const auto& b = results[kOneSlot];
    EXPECT_TRUE(a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0)
        << "one expert slot per layer changed the result";
    return std::move(results[kUnlimited]);
}

// The error of logits against the fixture's, printed (the measured basis of test::kCpuLogitTolerance), and
// checked.
void expect_oracle_logits(const char* what, const std::string& name, const std::vector<float>& logits,
                          const test::Fixture& fx) {
    const double diff = test::max_rel_diff(logits, fx.logits);
    fmt::print("{} on cpu ({}): max|logit diff| / max|logit| = {:.2e}\n", name, what, diff);
    EXPECT_LE(diff, test::kCpuLogitTolerance);
    EXPECT_EQ(test::argmax_rows(logits, fx.vocab), test::argmax_rows(fx.logits, fx.vocab));
}

// Every fixture; each test with both expert caches (cache_invariant).
class Oracle : public ::testing::TestWithParam<const char*> {};

TEST_P(Oracle, LogitsMatchTransformers) {
    const test::Fixture fx = test::fixture_load(GetParam());
    const std::vector<float> logits =
        cache_invariant(fx, [&](Session& session) { return session.forward(fx.input_ids, true); });
    expect_oracle_logits("prefill", GetParam(), logits, fx);
}

// The prompt in two prefills (the second continuing from the first's caches and recurrent states, as a
// chat turn does) gives the one-prefill logits.
TEST_P(Oracle, SplitPrefillMatchesPrefill) {
    const test::Fixture fx = test::fixture_load(GetParam());
    const std::vector<float> logits = cache_invariant(fx, [&](Session& session) {
        const std::span<const int32_t> ids(fx.input_ids);
        const size_t half = ids.size() / 2;
        std::vector<float> all = session.forward(ids.first(half), true);
        const std::vector<float> rest = session.forward(ids.subspan(half), true);
        all.insert(all.end(), rest.begin(), rest.end());
        return all;
    });
    expect_oracle_logits("two prefills", GetParam(), logits, fx);
}

TEST_P(Oracle, GreedyContinuationMatchesTransformers) {
    const test::Fixture fx = test::fixture_load(GetParam());
    const std::vector<int32_t> out = cache_invariant(fx, [&](Session& session) {
        Sampler greedy(SamplerOptions{});
        return session.generate(fx.input_ids, static_cast<int>(fx.greedy.size()), greedy, {});
    });
    EXPECT_EQ(out, fx.greedy);
}

// Feeding the prompt one token at a time through the KV cache gives the prefill's logits.
TEST_P(Oracle, IncrementalDecodeMatchesPrefill) {
    const test::Fixture fx = test::fixture_load(GetParam());
    const std::vector<float> stepwise = cache_invariant(fx, [&](Session& session) {
        std::vector<float> all;
        for (int32_t id : fx.input_ids) {
            const std::vector<float> l = session.forward(std::span<const int32_t>(&id, 1), true);
            all.insert(all.end(), l.begin(), l.end());
        }
        return all;
    });
    expect_oracle_logits("token by token", GetParam(), stepwise, fx);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Oracle, ::testing::ValuesIn(fixtures()), [](const auto& info) {
    std::string name = info.param;
    std::replace(name.begin(), name.end(), '/', '_');
    return name;
});

// --dense-bits quantizes resident matrices (lossy, as asked): still close to the oracle.
TEST(OlmoeDenseBits, Int8StaysCloseToTheOracle) {
    const test::Fixture fx = test::fixture_load("olmoe_base");
    EngineOptions o = options_for(fx, 0);
    o.dense_bits = 8;
    Engine engine(o);
    Session session(engine.model());
    const std::vector<float> logits = session.forward(fx.input_ids, true);
    EXPECT_LE(test::max_rel_diff(logits, fx.logits), 0.05);  // int8 per-row: about 1% per matmul
}

}  // namespace
}  // namespace coli
