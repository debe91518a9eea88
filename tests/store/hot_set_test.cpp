// The pinned hot set and the routing history file it is learned from.
#include "store/hot_set.h"

#include <gtest/gtest.h>

#include "store/expert_store.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

class HotSet : public ::testing::Test {
protected:
    void SetUp() override {
        model = write_synth_model(tmp.path());
        ckpt = model.open();
        cost = measure_costs(*ckpt, model);
        hot_file = tmp / "routing.json";
    }
    StoreOptions options(uint64_t budget_experts, bool with_hot_set = true) {
        StoreOptions opts;
        opts.ram_bytes = budget_experts * max_cost(cost);
        if (with_hot_set) opts.hot_set = hot_file;
        opts.hot_fraction = 0.5;
        return opts;
    }
    // Records a routing history: experts 5 and 6 of layer 1 a hundred times, 3 and 4 of layer 2 fifty.
    static void record_favourites(ExpertStore& store) {
        for (int t = 0; t < 100; ++t) store.routing_record(1, std::vector<int>{5, 6});
        for (int t = 0; t < 50; ++t) store.routing_record(2, std::vector<int>{3, 4});
    }
    // Fetches every expert of every layer in groups of max_resident, `rounds` times, within `budget`.
    void pressure(ExpertStore& store, int rounds, uint64_t budget) {
        for (int r = 0; r < rounds; ++r)
            for (int l = 1; l < kLayers; ++l) {
                const int g = store.max_resident(l);
                for (int e = 0; e < kExperts; e += g) {
                    std::vector<int> group;
                    for (int x = e; x < std::min(kExperts, e + g); ++x) group.push_back(x);
                    for (const auto& h : store.fetch(l, group)) expect_expert_bytes(model, h);
                    ASSERT_LE(store.stats().cached_bytes, budget);
                }
            }
    }
    // Whether fetching (layer, expert) now is a hit.
    static bool is_hit(ExpertStore& store, int layer, int expert) {
        const uint64_t before = store.stats().hits;
        store.fetch(layer, std::vector<int>{expert});
        return store.stats().hits == before + 1;
    }

    TempDir tmp;
    SynthModel model;
    std::unique_ptr<Checkpoint> ckpt;
    std::vector<std::vector<uint64_t>> cost;
    fs::path hot_file;
};

TEST_F(HotSet, PinnedExpertsSurviveEvictionPressureAcrossRuns) {
    {
        ExpertStore store(*ckpt, model.layout(), options(6));
        EXPECT_EQ(store.stats().pinned_experts, 0u);  // nothing learned yet
        record_favourites(store);
        store.hot_set_save();
    }
    const nlohmann::json saved = nlohmann::json::parse(read_bytes(hot_file));
    EXPECT_EQ(saved["format"], "colibri-hot-set");
    EXPECT_EQ(saved["version"], kHotSetFormatVersion);
    EXPECT_EQ(saved["fingerprint"].get<std::string>().size(), 16u);
    EXPECT_EQ(saved["counts"][1][5], 100);
    EXPECT_EQ(saved["counts"][2][4], 50);
    EXPECT_EQ(saved["counts"][3][0], 0);

    ExpertStore store(*ckpt, model.layout(), options(6));
    EXPECT_EQ(store.stats().pinned_experts, 4u);
    pressure(store, 2, options(6).ram_bytes);
    EXPECT_GT(store.stats().evictions, 0u);
    EXPECT_TRUE(is_hit(store, 1, 5));
    EXPECT_TRUE(is_hit(store, 1, 6));
    EXPECT_TRUE(is_hit(store, 2, 3));
    EXPECT_TRUE(is_hit(store, 2, 4));

    // Without the hot set, the same pressure evicts them.
    ExpertStore plain(*ckpt, model.layout(), options(6, false));
    pressure(plain, 2, options(6).ram_bytes);
    EXPECT_EQ(plain.stats().pinned_experts, 0u);
    EXPECT_FALSE(is_hit(plain, 1, 5));
}

TEST_F(HotSet, DestructorSaves) {
    {
        ExpertStore store(*ckpt, model.layout(), options(6));
        record_favourites(store);
    }
    ASSERT_TRUE(fs::exists(hot_file));
    ExpertStore store(*ckpt, model.layout(), options(6));
    EXPECT_EQ(store.stats().pinned_experts, 4u);
}

TEST_F(HotSet, RecomputedWhileRecording) {
    ExpertStore store(*ckpt, model.layout(), options(6));
    for (uint64_t i = 0; i + 1 < kHotSetRefreshRecords; ++i) store.routing_record(1, std::vector<int>{2});
    EXPECT_EQ(store.stats().pinned_experts, 0u);
    store.routing_record(1, std::vector<int>{2});
    EXPECT_EQ(store.stats().pinned_experts, 1u);
}

// Pins take at most their share of the budget and of the slots, so groups of max_resident still fit.
TEST_F(HotSet, PinsNeverMakeANormalFetchFail) {
    for (int slots : {0, 4}) {
        fs::remove(hot_file);
        StoreOptions opts = options(4);
        opts.slots_per_layer = slots;
        {
            ExpertStore store(*ckpt, model.layout(), opts);
            for (int l = 1; l < kLayers; ++l)
                for (int e = 0; e < kExperts; ++e)
                    for (int t = 0; t <= e; ++t) store.routing_record(l, std::vector<int>{e});
        }
        ExpertStore store(*ckpt, model.layout(), opts);
        EXPECT_GT(store.stats().pinned_experts, 0u);
        if (slots) {
            EXPECT_EQ(store.max_resident(1), 2);
        }
        pressure(store, 3, opts.ram_bytes);
        // The most used expert (7 of layer 1, first among equals) is pinned first: it always fits.
        EXPECT_TRUE(is_hit(store, 1, 7));
    }
}

TEST_F(HotSet, ForeignHistoryIsIgnoredAndKept) {
    {
        ExpertStore store(*ckpt, model.layout(), options(6));
        record_favourites(store);
    }
    const std::string before = read_bytes(hot_file);

    TempDir other_dir;
    SynthModel other = write_synth_model(other_dir.path(), 2, /*size_salt=*/8);
    auto other_ckpt = other.open();
    testing::internal::CaptureStderr();
    {
        StoreOptions opts;
        opts.hot_set = hot_file;
        ExpertStore store(*other_ckpt, other.layout(), opts);
        EXPECT_EQ(store.stats().pinned_experts, 0u);
        store.fetch(1, std::vector<int>{5});
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning: "), std::string::npos) << err;
    EXPECT_NE(err.find("another model"), std::string::npos) << err;
    EXPECT_EQ(read_bytes(hot_file), before);  // neither deleted nor overwritten

    ExpertStore store(*ckpt, model.layout(), options(6));  // still good for its own model
    EXPECT_EQ(store.stats().pinned_experts, 4u);
}

TEST_F(HotSet, MalformedFilesAreIgnoredWithAWarning) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{not json", "bad JSON"},
        {"[1, 2]", "not a JSON object"},
        {R"({"format": "colibri-hot-set", "version": 99})", "version 99"},
        {R"({"format": "colibri-hot-set", "version": "1"})", "no format version"},
        {R"({"something": "else"})", "not a colibri hot-set file"},
    };
    std::string fingerprint;
    {
        ExpertStore store(*ckpt, model.layout(), options(6));
        record_favourites(store);
    }
    fingerprint = nlohmann::json::parse(read_bytes(hot_file))["fingerprint"];
    // Right model, wrong contents.
    nlohmann::json bad_counts = nlohmann::json::parse(read_bytes(hot_file));
    bad_counts["counts"][1][2] = -3;
    nlohmann::json bad_types = nlohmann::json::parse(read_bytes(hot_file));
    bad_types["n_layers"] = "four";
    std::vector<std::pair<std::string, std::string>> all = cases;
    all.emplace_back(bad_counts.dump(), "malformed counts");
    all.emplace_back(bad_types.dump(), "malformed");

    for (const auto& [text, why] : all) {
        write_bytes(hot_file, text);
        testing::internal::CaptureStderr();
        {
            ExpertStore store(*ckpt, model.layout(), options(6));
            EXPECT_EQ(store.stats().pinned_experts, 0u) << text;
        }
        const std::string err = testing::internal::GetCapturedStderr();
        EXPECT_NE(err.find("warning: "), std::string::npos) << text;
        EXPECT_NE(err.find(why), std::string::npos) << text << " -> " << err;
        EXPECT_EQ(read_bytes(hot_file), text);  // left alone
    }
}

TEST_F(HotSet, UnwritablePlaceIsOneWarning) {
    write_bytes(tmp / "a-file", "x");
    StoreOptions opts = options(6);
    opts.hot_set = tmp / "a-file" / "routing.json";  // a directory that cannot exist, even for root
    testing::internal::CaptureStderr();
    {
        ExpertStore store(*ckpt, model.layout(), opts);
        record_favourites(store);
        EXPECT_NO_THROW(store.hot_set_save());
    }  // the destructor tries again, and says nothing more
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning: the routing history is not kept: cannot write"), std::string::npos) << err;
    EXPECT_EQ(err.find("warning:"), err.rfind("warning:")) << "one warning:\n" << err;
}

TEST(RoutingHistory, SelectTakesTheMostUsedWithinTheCaps) {
    RoutingHistory h(2, 4, "fp");
    for (int i = 0; i < 5; ++i) h.record(0, std::vector<int>{1});
    for (int i = 0; i < 4; ++i) h.record(1, std::vector<int>{2});
    for (int i = 0; i < 3; ++i) h.record(0, std::vector<int>{3});
    h.record(1, std::vector<int>{0});
    // Expert (0,3) costs 10: skipped when it does not fit, and the cheaper (1,0) taken instead.
    auto cost = [](int l, int e) -> uint64_t { return l == 0 && e == 3 ? 10 : 1; };
    auto hot = h.select(cost, 3, 10);
    EXPECT_EQ(hot, (std::vector<char>{0, 1, 0, 0, 1, 0, 1, 0}));
    hot = h.select(cost, 100, 1);  // one per layer: the most used of each
    EXPECT_EQ(hot, (std::vector<char>{0, 1, 0, 0, 0, 0, 1, 0}));
    EXPECT_EQ(h.select(cost, 0, 10), std::vector<char>(8, 0));
}

}  // namespace
}  // namespace coli
