// Routing statistics on known sequences.
#include "store/routing_stats.h"

#include <gtest/gtest.h>

#include "store/expert_store.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

TEST(RoutingStats, ConsecutiveTokensInOneLayer) {
    RoutingStats s(2, 4);
    s.record(1, std::vector<int>{0, 1});
    s.record(1, std::vector<int>{1, 2});
    EXPECT_DOUBLE_EQ(s.consecutive_shared(), 1.0);
    EXPECT_DOUBLE_EQ(s.distinct_per_layer(), 3.0);
    EXPECT_EQ(s.records(), 2u);
}

TEST(RoutingStats, LayersAreSeparateAndDuplicatesCountOnce) {
    RoutingStats s(3, 4);
    EXPECT_EQ(s.consecutive_shared(), 0);  // nothing yet
    EXPECT_EQ(s.distinct_per_layer(), 0);
    // Interleaved as a model calls it: token 0 in layers 1, 2, then token 1 in layers 1, 2, ...
    s.record(1, std::vector<int>{0, 1});
    s.record(2, std::vector<int>{3, 2});
    s.record(1, std::vector<int>{1, 2});
    s.record(2, std::vector<int>{2, 3, 3});
    s.record(1, std::vector<int>{3, 0});
    // Layer 1 pairs share 1 and 0; layer 2's pair shares 2. Distinct: layer 1 {0,1,2,3}, layer 2 {2,3}.
    EXPECT_DOUBLE_EQ(s.consecutive_shared(), (1.0 + 0.0 + 2.0) / 3);
    EXPECT_DOUBLE_EQ(s.distinct_per_layer(), (4.0 + 2.0) / 2);
    EXPECT_EQ(s.records(), 5u);
}

TEST(RoutingStats, ThroughTheStore) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    auto ckpt = m.open();
    ExpertStore store(*ckpt, m.layout(), {});
    store.routing_record(1, std::vector<int>{0, 1});
    store.routing_record(2, std::vector<int>{4, 5});
    store.routing_record(1, std::vector<int>{1, 2});
    store.routing_record(2, std::vector<int>{4, 5});
    const StoreStats s = store.stats();
    EXPECT_DOUBLE_EQ(s.consecutive_shared, 1.5);
    EXPECT_DOUBLE_EQ(s.distinct_per_layer, 2.5);
    EXPECT_EQ(s.tokens_routed, 4u);
    EXPECT_NE(error_of([&] { store.routing_record(0, std::vector<int>{0}); }).find("no routed experts"),
              std::string::npos);
}

}  // namespace
}  // namespace coli
