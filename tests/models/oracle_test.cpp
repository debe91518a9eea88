// Every family against transformers: tiny random-weight models made by tools/make_olmoe_oracles.py and
// tools/make_deepseek_oracles.py (fp32, eager attention). Tolerances are the foundation issue's.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/fixture.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace coli {
namespace {

constexpr double kLogitTolerance = 1e-3;  // max|diff| <= 1e-3 * max|logit| on the fp32 path

// The transformers fixtures, and the bundled demo model (trained, bf16; tools/train_demo_model.py).
const char* const kFixtures[] = {"olmoe_base",      "olmoe_gqa",    "olmoe_bf16",  "olmoe_sharded",
                                 "olmoe_clip",      "models/demo",  "deepseek_v3", "deepseek_v3_noq",
                                 "deepseek_v3_fp8", "deepseek_v32", "glm_moe_dsa", "kimi_linear", "kimi_k3"};

EngineOptions options_for(const test::Fixture& fx, int expert_cache) {
    EngineOptions o;
    o.model_dir = fx.dir;
    o.expert_cache = expert_cache;
    o.hot_set = "none";  // never write into the source tree
    return o;
}

// Every fixture, with an unlimited expert cache and with one slot per layer (cache invariance).
class Oracle : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(Oracle, LogitsMatchTransformers) {
    const auto [name, cache] = GetParam();
    const test::Fixture fx = test::fixture_load(name);
    Engine engine(options_for(fx, cache));
    Session session(engine.model());
    const std::vector<float> logits = session.forward(fx.input_ids, true);
    EXPECT_LE(test::max_rel_diff(logits, fx.logits), kLogitTolerance);
    EXPECT_EQ(test::argmax_rows(logits, fx.vocab), test::argmax_rows(fx.logits, fx.vocab));
}

TEST_P(Oracle, GreedyContinuationMatchesTransformers) {
    const auto [name, cache] = GetParam();
    const test::Fixture fx = test::fixture_load(name);
    Engine engine(options_for(fx, cache));
    Session session(engine.model());
    Sampler greedy(SamplerOptions{});
    const std::vector<int32_t> out =
        session.generate(fx.input_ids, static_cast<int>(fx.greedy.size()), greedy, {});
    EXPECT_EQ(out, fx.greedy);
}

// Feeding the prompt one token at a time through the KV cache gives the prefill's logits.
TEST_P(Oracle, IncrementalDecodeMatchesPrefill) {
    const auto [name, cache] = GetParam();
    const test::Fixture fx = test::fixture_load(name);
    Engine engine(options_for(fx, cache));
    Session session(engine.model());
    std::vector<float> stepwise;
    for (int32_t id : fx.input_ids) {
        const std::vector<float> l = session.forward(std::span<const int32_t>(&id, 1), true);
        stepwise.insert(stepwise.end(), l.begin(), l.end());
    }
    EXPECT_LE(test::max_rel_diff(stepwise, fx.logits), kLogitTolerance);
    EXPECT_EQ(test::argmax_rows(stepwise, fx.vocab), test::argmax_rows(fx.logits, fx.vocab));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Oracle,
                         ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::Values(0, 1)),
                         [](const auto& info) {
                             std::string name = std::get<0>(info.param);
                             std::replace(name.begin(), name.end(), '/', '_');
                             return name + (std::get<1>(info.param) ? "_cache1" : "_unlimited");
                         });

// Cache invariance is exact: one slot per layer and an unlimited cache give bit-identical logits.
TEST(OlmoeCache, OneSlotIsBitIdenticalToUnlimited) {
    const test::Fixture fx = test::fixture_load("olmoe_gqa");
    std::vector<float> results[2];
    for (int cache : {0, 1}) {
        Engine engine(options_for(fx, cache));
        Session session(engine.model());
        results[cache] = session.forward(fx.input_ids, true);
    }
    EXPECT_EQ(results[0], results[1]);
}

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
