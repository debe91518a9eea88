// Every oracle fixture on every available backend other than the CPU (the CPU runs them in tests/models):
// logits within the oracle tolerance, the same argmax, and the same greedy continuation
// (docs/design.md rule 2). Where no such backend is available (CI), the test is skipped loudly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backend/registry.h"
#include "common/fixture.h"
#include "runtime/engine.h"
#include "runtime/session.h"

namespace coli {
namespace {

constexpr double kLogitTolerance = 1e-3;  // max|diff| <= 1e-3 * max|logit|, as on the CPU

const char* const kFixtures[] = {"olmoe_base",   "olmoe_gqa",   "olmoe_bf16",      "olmoe_sharded",
                                 "olmoe_clip",   "deepseek_v3", "deepseek_v3_noq", "deepseek_v3_fp8",
                                 "deepseek_v32", "glm_moe_dsa", "kimi_linear",     "kimi_k3"};

std::vector<std::string> device_backends() {
    std::vector<std::string> names;
    for (const BackendInfo& b : backend_list())
        if (b.available && b.name != "cpu") names.push_back(b.name);
    return names;
}

TEST(BackendOracle, EveryFixtureOnEveryDeviceBackend) {
    const std::vector<std::string> backends = device_backends();
    if (backends.empty()) {
        std::string why;
        for (const BackendInfo& b : backend_list())
            if (b.name != "cpu") why += fmt::format("\n  {}: {}", b.name, b.detail);
        GTEST_SKIP() << "SKIPPED: no device backend available here:" << why;
    }
    for (const std::string& backend : backends)
        for (const char* name : kFixtures)
            for (int cache : {0, 1}) {
                SCOPED_TRACE(fmt::format("{} on {}, expert cache {}", name, backend, cache));
                const test::Fixture fx = test::fixture_load(name);
                EngineOptions o;
                o.model_dir = fx.dir;
                o.backend = backend;
                o.expert_cache = cache;
                o.hot_set = "none";
                Engine engine(o);
                {
                    Session session(engine.model());
                    const std::vector<float> logits = session.forward(fx.input_ids, true);
                    const double diff = test::max_rel_diff(logits, fx.logits);
                    fmt::print("{} on {}, expert cache {}: max|logit diff| / max|logit| = {:.2e}\n", name,
                               backend, cache, diff);
                    EXPECT_LE(diff, kLogitTolerance);
                    EXPECT_EQ(test::argmax_rows(logits, fx.vocab), test::argmax_rows(fx.logits, fx.vocab));
                }
                Session session(engine.model());
                Sampler greedy(SamplerOptions{});
                EXPECT_EQ(session.generate(fx.input_ids, static_cast<int>(fx.greedy.size()), greedy, {}),
                          fx.greedy);
                EXPECT_EQ(engine.ops().counters().total_fallbacks(), 0u) << engine.ops().counters().summary();
            }
}

}  // namespace
}  // namespace coli
