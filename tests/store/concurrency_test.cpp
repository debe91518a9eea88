// The store as a model uses it: prefetch of the next layer while this layer's experts are fetched and
// used, with the I/O threads busy and another thread reading statistics. Correctness never depends on
// timing here: every interleaving must give the same bytes and respect the budget.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "store/buffer_meter.h"
#include "store/expert_store.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

TEST(Concurrency, PrefetchNextLayerWhileFetching) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    auto ckpt = m.open();
    const auto cost = measure_costs(*ckpt, m);
    StoreOptions opts;
    opts.ram_bytes = 5 * max_cost(cost);
    opts.io_threads = 4;
    opts.hot_set = tmp / "routing.json";
    ExpertStore store(*ckpt, m.layout(), opts);
    buffer_meter_reset_peak();

    std::atomic<bool> done{false};
    std::thread watcher([&] {  // stats() from another thread, as `coli serve` metrics would
        while (!done.load()) {
            const StoreStats s = store.stats();
            EXPECT_LE(s.cached_bytes, opts.ram_bytes);
            std::this_thread::yield();
        }
    });

    std::mt19937 rng(11);
    auto route = [&] {  // top_k distinct experts, skewed towards low ids so that there are hits
        std::vector<int> picked;
        while (picked.size() < size_t(kTopK)) {
            const int e = int(std::min(rng() % kExperts, rng() % kExperts));
            if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
        }
        return picked;
    };
    std::vector<int> next = route();
    for (int token = 0; token < 150; ++token) {
        for (int l = 1; l < kLayers; ++l) {
            const std::vector<int> now = next;
            next = route();
            store.routing_record(l, now);
            auto handles = store.fetch(l, now);
            // The router of the next layer has decided: its reads overlap this layer's compute.
            store.prefetch(l + 1 < kLayers ? l + 1 : 1, next);
            for (const auto& h : handles) expect_expert_bytes(m, h);
        }
    }
    done = true;
    watcher.join();

    const StoreStats s = store.stats();
    EXPECT_EQ(s.tokens_routed, 150u * (kLayers - 1));
    EXPECT_GT(s.hits, 0u);
    EXPECT_GT(s.misses, 0u);
    EXPECT_LE(s.cached_bytes, opts.ram_bytes);
    EXPECT_LE(buffer_meter_read().peak_bytes, opts.ram_bytes);
    EXPECT_GT(s.distinct_per_layer, 1.0);
}

}  // namespace
}  // namespace coli
