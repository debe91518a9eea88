// The RAM cache: the budget is a hard limit on allocated buffers, slots limit each layer, handles keep
// their experts, prefetch fills what fits.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "store/buffer_meter.h"
#include "store/expert_index.h"
#include "store/expert_store.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

std::vector<int> iota_experts(int n) {
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
}

// The fixture: one synthetic model and the cost of each of its experts.
class Cache : public ::testing::Test {
protected:
    void SetUp() override {
        model = write_synth_model(tmp.path());
        ckpt = model.open();
        cost = measure_costs(*ckpt, model);
        ASSERT_EQ(buffer_meter_read().live_bytes, 0u) << "a store or handle leaked from another test";
    }
    ExpertStore open(StoreOptions opts, int only_layer = 0) {
        return ExpertStore(*ckpt, model.layout(only_layer), opts);
    }

    TempDir tmp;
    SynthModel model;
    std::unique_ptr<Checkpoint> ckpt;
    std::vector<std::vector<uint64_t>> cost;
};

// Random fetches and prefetches over all layers: the charged bytes and the bytes really allocated (the
// meter counts buffers where they are allocated and freed) never exceed the budget, reads in flight
// included, and every expert still has its bytes.
TEST_F(Cache, BudgetIsAHardLimit) {
    for (bool direct : {false, true}) {
        StoreOptions opts;
        opts.ram_bytes = 4 * max_cost(cost) + 1000;  // not a multiple of anything
        opts.direct_io = direct;
        opts.io_threads = 3;
        ExpertStore store(*ckpt, model.layout(), opts);
        buffer_meter_reset_peak();
        std::mt19937 rng(7);
        for (int i = 0; i < 300; ++i) {
            const int layer = 1 + int(rng() % (kLayers - 1));
            const int n = 1 + int(rng() % store.max_resident(layer));
            std::vector<int> all = iota_experts(kExperts);
            std::shuffle(all.begin(), all.end(), rng);
            std::vector<int> want(all.begin(), all.begin() + n);
            const int next = 1 + int(rng() % (kLayers - 1));
            std::vector<int> ahead(all.begin() + n, all.end());
            auto handles = store.fetch(layer, want);
            store.prefetch(next, ahead);  // competes with the handles held
            for (const auto& h : handles) expect_expert_bytes(model, h);
            const StoreStats s = store.stats();
            ASSERT_LE(s.cached_bytes, opts.ram_bytes);
            ASSERT_LE(buffer_meter_read().live_bytes, opts.ram_bytes);
        }
        EXPECT_LE(buffer_meter_read().peak_bytes, opts.ram_bytes);
        EXPECT_GT(store.stats().evictions, 0u);
        EXPECT_GT(store.stats().hits, 0u);
    }
    EXPECT_EQ(buffer_meter_read().live_bytes, 0u);  // the stores freed everything
}

TEST_F(Cache, OneSlotPerLayer) {
    StoreOptions opts;
    opts.slots_per_layer = 1;
    ExpertStore store = open(opts);
    for (int l = 1; l < kLayers; ++l) EXPECT_EQ(store.max_resident(l), 1);
    uint64_t one_per_layer = 0;
    for (int l = 1; l < kLayers; ++l) one_per_layer += max_cost(cost, l);
    for (int round = 0; round < 2; ++round)
        for (int e = 0; e < kExperts; ++e)
            for (int l = 1; l < kLayers; ++l) {
                expect_expert_bytes(model, store.fetch(l, std::vector<int>{e})[0]);
                EXPECT_LE(store.stats().cached_bytes, one_per_layer);
            }
    EXPECT_EQ(store.stats().hits, 0u);  // each fetch evicted the layer's previous expert
    EXPECT_EQ(store.stats().evictions, uint64_t(2 * kExperts * (kLayers - 1) - (kLayers - 1)));
    store.fetch(1, std::vector<int>{5});
    EXPECT_EQ(store.stats().hits, 0u);
    store.fetch(1, std::vector<int>{5});
    EXPECT_EQ(store.stats().hits, 1u);

    const std::string msg = error_of([&] { store.fetch(2, std::vector<int>{0, 1}); });
    EXPECT_NE(msg.find("slots"), std::string::npos) << msg;
}

// Every expert of layer 1 costs the same, and two of them fit in the budget but three do not.
TEST_F(Cache, HandlesKeepTheirExperts) {
    const uint64_t c = max_cost(cost, 1);
    ASSERT_GT(3 * *std::min_element(cost[1].begin(), cost[1].end()), 2 * c);
    StoreOptions opts;
    opts.ram_bytes = 2 * c;
    ExpertStore store = open(opts, /*only_layer=*/1);
    EXPECT_EQ(store.max_resident(1), 2);

    std::optional<ExpertHandle> a = store.fetch(1, std::vector<int>{0})[0];
    store.fetch(1, std::vector<int>{1});  // handle dropped at once
    store.fetch(1, std::vector<int>{2});  // evicts 1, not the referenced 0
    EXPECT_EQ(store.stats().evictions, 1u);
    expect_expert_bytes(model, *a);
    store.fetch(1, std::vector<int>{0});
    EXPECT_EQ(store.stats().hits, 1u);

    // With 0 held, only one more fits at once.
    const std::string msg = error_of([&] { store.fetch(1, std::vector<int>{3, 4}); });
    EXPECT_NE(msg.find("--ram-gb"), std::string::npos) << msg;
    auto b = store.fetch(1, std::vector<int>{3});
    EXPECT_NE(error_of([&] { store.fetch(1, std::vector<int>{4}); }).find("held by pinned or in-use"),
              std::string::npos);
    expect_expert_bytes(model, *a);
    expect_expert_bytes(model, b[0]);
    EXPECT_LE(store.stats().cached_bytes, opts.ram_bytes);

    a.reset();
    b.clear();
    for (const auto& h : store.fetch(1, std::vector<int>{4, 5})) expect_expert_bytes(model, h);
}

// Once the cache is full it evicts about one expert per expert it reads; the reads take the evicted
// experts' buffers instead of allocating (fresh memory is slow on some machines, see buffer_pool.h).
TEST_F(Cache, FullCacheReusesBuffers) {
    const ExpertIndex index(*ckpt, model.layout(1));
    std::map<std::vector<uint64_t>, std::vector<int>> by_sizes;  // experts by their reads' buffer sizes
    for (int e = 0; e < kExperts; ++e) {
        std::vector<uint64_t> sizes;
        for (const ReadRange& r : index.at(1, e).reads) sizes.push_back(r.buffer_bytes);
        by_sizes[sizes].push_back(e);
    }
    std::vector<int> same;
    for (const auto& [sizes, experts] : by_sizes)
        if (experts.size() > same.size()) same = experts;
    ASSERT_GE(same.size(), 3u);
    StoreOptions opts;
    opts.ram_bytes = 2 * index.at(1, same[0]).buffer_bytes;
    ExpertStore store = open(opts, /*only_layer=*/1);
    store.fetch(1, std::vector<int>{same[0]});
    store.fetch(1, std::vector<int>{same[1]});
    const uint64_t allocations = buffer_meter_read().allocations;
    for (int round = 0; round < 3; ++round)
        for (int e : same) expect_expert_bytes(model, store.fetch(1, std::vector<int>{e})[0]);
    EXPECT_GT(store.stats().evictions, 0u);
    EXPECT_EQ(buffer_meter_read().allocations, allocations);
    EXPECT_LE(buffer_meter_read().live_bytes, opts.ram_bytes);
}

TEST_F(Cache, HandleOutlivesTheStore) {
    std::optional<ExpertHandle> h;
    {
        ExpertStore store = open({});
        h = store.fetch(2, std::vector<int>{6})[0];
    }
    expect_expert_bytes(model, *h);
    h.reset();
    EXPECT_EQ(buffer_meter_read().live_bytes, 0u);
}

TEST_F(Cache, BudgetTooSmallSaysWhatIsNeeded) {
    ASSERT_EQ(max_cost(cost), max_cost(cost, 3));  // layer 3 holds the largest expert
    StoreOptions opts;
    opts.ram_bytes = max_cost(cost) - 1;  // less than the largest expert: useless, refused at open
    std::string msg = error_of([&] { open(opts); });
    EXPECT_NE(msg.find("--ram-gb"), std::string::npos) << msg;
    EXPECT_NE(msg.find("smaller than one expert"), std::string::npos) << msg;

    opts.ram_bytes = max_cost(cost) + max_cost(cost) / 2;  // one and a half experts
    ExpertStore store = open(opts);
    EXPECT_EQ(store.max_resident(3), 1);
    msg = error_of([&] { store.fetch(3, iota_experts(kExperts)); });
    EXPECT_NE(msg.find("--ram-gb"), std::string::npos) << msg;
    EXPECT_NE(msg.find("8 experts at once"), std::string::npos) << msg;
    EXPECT_NE(msg.find("budget"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    // One at a time works, and the failed request left the budget intact.
    for (int e = 0; e < kExperts; ++e) expect_expert_bytes(model, store.fetch(3, std::vector<int>{e})[0]);
    EXPECT_LE(store.stats().cached_bytes, opts.ram_bytes);
}

TEST_F(Cache, MaxResidentUsesTheLargestExpertOfTheLayer) {
    {
        ExpertStore store = open({});
        for (int l = 1; l < kLayers; ++l) EXPECT_EQ(store.max_resident(l), kExperts);
        EXPECT_EQ(store.max_resident(0), 1);  // dense layer: nothing to hold, still >= 1
    }
    StoreOptions opts;
    opts.ram_bytes = 3 * max_cost(cost, 3);
    ExpertStore store = open(opts);
    for (int l = 1; l < kLayers; ++l) {
        const int expected = std::min<int>(kExperts, int(opts.ram_bytes / max_cost(cost, l)));
        EXPECT_EQ(store.max_resident(l), expected) << "layer " << l;
    }
    EXPECT_EQ(store.max_resident(3), 3);
    // Groups of max_resident never fail, whatever the order.
    std::mt19937 rng(3);
    for (int round = 0; round < 20; ++round)
        for (int l = 1; l < kLayers; ++l) {
            std::vector<int> all = iota_experts(kExperts);
            std::shuffle(all.begin(), all.end(), rng);
            const size_t g = size_t(store.max_resident(l));
            for (size_t i = 0; i < all.size(); i += g) {
                std::vector<int> group(all.begin() + i, all.begin() + std::min(all.size(), i + g));
                for (const auto& h : store.fetch(l, group)) expect_expert_bytes(model, h);
            }
        }

    opts.slots_per_layer = 2;
    ExpertStore slotted = open(opts);
    for (int l = 1; l < kLayers; ++l) EXPECT_EQ(slotted.max_resident(l), 2);
}

TEST_F(Cache, PrefetchThenFetchIsAHit) {
    ExpertStore store = open({});
    store.prefetch(2, std::vector<int>{2, 5});
    auto h = store.fetch(2, std::vector<int>{5, 2});
    expect_expert_bytes(model, h[0]);
    expect_expert_bytes(model, h[1]);
    StoreStats s = store.stats();
    EXPECT_EQ(s.hits, 2u);
    EXPECT_EQ(s.misses, 0u);
    store.prefetch(2, std::vector<int>{2, 5});  // already cached: no read
    EXPECT_EQ(store.stats().bytes_read, s.bytes_read);
}

// A layer is held once each of its experts is cached or being read (a prefetch would read nothing).
TEST_F(Cache, LayerHeldOnceEveryExpertIsCachedOrRead) {
    ExpertStore store = open({});
    EXPECT_FALSE(store.layer_held(2));
    std::vector<int> all_but_last = iota_experts(kExperts - 1);
    store.fetch(2, all_but_last);
    EXPECT_FALSE(store.layer_held(2));
    store.prefetch(2, std::vector<int>{kExperts - 1});
    EXPECT_TRUE(store.layer_held(2));
    EXPECT_FALSE(store.layer_held(1));
    store.fetch(2, iota_experts(kExperts));
    EXPECT_TRUE(store.layer_held(2));
    EXPECT_EQ(store.stats().misses, uint64_t(kExperts - 1));
}

// Prefetch takes only what fits without touching referenced entries; fetch then waits for the prefetched
// reads to land so that it can evict them.
TEST_F(Cache, PrefetchStaysWithinTheBudget) {
    const uint64_t c = max_cost(cost, 1);
    StoreOptions opts;
    opts.ram_bytes = 3 * c;
    ExpertStore store = open(opts, /*only_layer=*/1);
    auto held = store.fetch(1, std::vector<int>{0});
    buffer_meter_reset_peak();
    store.prefetch(1, iota_experts(kExperts));  // room for two more
    EXPECT_LE(store.stats().cached_bytes, opts.ram_bytes);
    auto h = store.fetch(1, std::vector<int>{6, 7});  // not prefetched: must evict the prefetched two
    EXPECT_EQ(store.stats().misses, 3u);
    EXPECT_EQ(store.stats().evictions, 2u);
    expect_expert_bytes(model, held[0]);
    expect_expert_bytes(model, h[0]);
    expect_expert_bytes(model, h[1]);
    EXPECT_LE(buffer_meter_read().peak_bytes, opts.ram_bytes);
    h.clear();
    // The prefetched 1 and 2 were evicted; what is cached now is 0, 6, 7.
    store.fetch(1, std::vector<int>{6});
    store.fetch(1, std::vector<int>{7});
    EXPECT_EQ(store.stats().hits, 2u);
}

}  // namespace
}  // namespace coli
