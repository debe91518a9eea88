// Continuous batching on the CPU: for every oracle fixture (each family and layout), sequences that share a
// batch get, bit for bit, the logits they get alone (tests/common/batch_check.h); with an expert cache of one
// slot too, where the batch's union of experts cycles through the cache.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "common/batch_check.h"
#include "common/fixture.h"
#include "runtime/engine.h"

namespace coli {
namespace {

constexpr int64_t kCtx = 128;  // enough for every sequence here (the fixtures allow 256 at most)

TEST(Batching, EverySequenceGetsItsAloneLogitsBitForBit) {
    for (const char* name : test::kOracleFixtures) {
        const test::Fixture f = test::fixture_load(name);
        for (int cache : {0, 1}) {
            SCOPED_TRACE(fmt::format("{}, expert cache {}", name, cache));
            EngineOptions o;
            o.model_dir = f.dir;
            o.backend = "cpu";
            o.hot_set = "none";
            o.max_ctx = kCtx;
            o.expert_cache = cache;
            Engine engine(o);
            const test::BatchComparison c = test::batch_compare(engine.model(), f.input_ids, f.vocab);
            EXPECT_TRUE(c.same_inputs);
            EXPECT_TRUE(c.bitwise) << "max relative difference " << c.max_rel_diff;
        }
    }
}

}  // namespace
}  // namespace coli
