// Experts used in place from the checkpoint's file mappings (ExpertSource::mapped): the same bytes as the
// reads give, pointing into the mapping, no buffer allocated, and the options that need a cache refused.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "store/buffer_meter.h"
#include "store/expert_store.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

StoreOptions mapped_options() {
    StoreOptions o;
    o.source = ExpertSource::mapped;
    return o;
}

TEST(Mapped, EveryExpertHasItsBytesInsideTheMapping) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    auto ckpt = m.open();
    const uint64_t live_before = buffer_meter_read().live_bytes;
    ExpertStore store(*ckpt, m.layout(), mapped_options());
    std::vector<int> all(kExperts);
    std::iota(all.begin(), all.end(), 0);
    uint64_t total = 0;
    for (int l = 1; l < kLayers; ++l) {
        store.prefetch(l, std::vector<int>{0, 1});  // brought in ahead, then fetched with the rest
        for (const ExpertHandle& h : store.fetch(l, all)) {
            expect_expert_bytes(m, h);
            for (size_t p = 0; p < h.part_count(); ++p) {
                const std::span<const uint8_t> file = ckpt->map_file(h.part_info(p).file);
                EXPECT_EQ(h.part(p).data(), file.data() + h.part_info(p).offset);
            }
        }
        for (int e = 0; e < kExperts; ++e) total += m.expert_bytes(l, e);
    }
    const StoreStats s = store.stats();
    EXPECT_TRUE(s.mapped);
    EXPECT_EQ(s.hits + s.misses, uint64_t((kLayers - 1) * kExperts));
    EXPECT_EQ(s.evictions, 0u);
    EXPECT_GE(s.bytes_read, total);
    EXPECT_EQ(s.kept_bytes, 0u);
    EXPECT_EQ(buffer_meter_read().live_bytes, live_before);  // nothing copied
}

TEST(Mapped, RefusesABudgetOrASlotLimit) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    auto ckpt = m.open();
    StoreOptions budget = mapped_options();
    budget.ram_bytes = 1 << 30;
    EXPECT_NE(error_of([&] { ExpertStore s(*ckpt, m.layout(), budget); }).find("no RAM budget"),
              std::string::npos);
    StoreOptions slots = mapped_options();
    slots.slots_per_layer = 2;
    EXPECT_NE(error_of([&] { ExpertStore s(*ckpt, m.layout(), slots); }).find("no RAM budget"),
              std::string::npos);
}

TEST(Mapped, ATruncatedShardIsAnErrorNotACrash) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    auto ckpt = m.open();
    // Cut the second shard (layer 3) before anything maps it: the mapping then fails to open, by name.
    fs::resize_file(tmp / "model-00002-of-00002.safetensors", 4096);
    ExpertStore store(*ckpt, m.layout(), mapped_options());
    const std::string msg = error_of([&] { store.fetch(3, std::vector<int>{0}); });
    EXPECT_NE(msg.find("changed since it was opened"), std::string::npos) << msg;
    for (const auto& h : store.fetch(1, std::vector<int>{0, 1})) expect_expert_bytes(m, h);
}

TEST(Mapped, AFileWrittenToAfterItWasMappedIsRefusedAtTheNextRead) {
    TempDir tmp;
    SynthModel m = write_synth_model(tmp.path());
    auto ckpt = m.open();
    ExpertStore store(*ckpt, m.layout(), mapped_options());
    expect_expert_bytes(m, store.fetch(3, std::vector<int>{0})[0]);  // the second shard, now mapped
    const fs::path shard = tmp / "model-00002-of-00002.safetensors";
    fs::last_write_time(shard, fs::last_write_time(shard) + std::chrono::hours(1));  // as a write does
    const std::string msg = error_of([&] { store.fetch(3, std::vector<int>{1}); });
    EXPECT_NE(msg.find("model-00002-of-00002.safetensors: changed since it was opened"), std::string::npos)
        << msg;
    for (const auto& h : store.fetch(1, std::vector<int>{0, 1})) expect_expert_bytes(m, h);
}

}  // namespace
}  // namespace coli
