// The byte-range index: which reads cover an expert, where each part lands, what the budget counts.
#include "store/expert_index.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "io/file.h"
#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

// One layer of four experts of two tensors each, placed to exercise every grouping rule:
// expert 0: adjacent (listed in reverse disk order), 1: a small gap, 2: a gap just over kMaxReadGap,
// 3: one tensor in each shard.
struct GroupingModel {
    TempDir tmp;
    std::vector<std::vector<uint8_t>> keep;  // tensor data alive until written

    GroupingModel() {
        std::vector<TensorWrite> shard1, shard2;
        auto add = [&](std::vector<TensorWrite>& shard, const char* name, int64_t n) {
            keep.emplace_back(static_cast<size_t>(n), uint8_t(keep.size()));
            shard.push_back({name, DType::u8, {n}, keep.back().data()});
        };
        keep.reserve(16);
        add(shard1, "a.0", 1000);
        add(shard1, "a.1", 2000);
        add(shard1, "b.0", 500);
        add(shard1, "gap.small", 1024);
        add(shard1, "b.1", 700);
        add(shard1, "c.0", 300);
        add(shard1, "gap.large", int64_t(kMaxReadGap) + 1);
        add(shard1, "c.1", 300);
        add(shard1, "d.0", 5000);
        add(shard2, "d.1", 4096);
        safetensors_write(tmp / "s1.safetensors", shard1);
        safetensors_write(tmp / "s2.safetensors", shard2);
        nlohmann::json map = nlohmann::json::object();
        for (auto& t : shard1) map[t.name] = "s1.safetensors";
        for (auto& t : shard2) map[t.name] = "s2.safetensors";
        write_bytes(tmp / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
        write_bytes(tmp / "config.json", "{}");
    }
    static ExpertLayout layout() {
        ExpertLayout l;
        l.n_layers = 1;
        l.n_experts = 4;
        l.top_k = 1;
        l.tensor_names = [](int, int e) -> std::vector<std::string> {
            switch (e) {
                case 0:
                    return {"a.1", "a.0"};
                case 1:
                    return {"b.0", "b.1"};
                case 2:
                    return {"c.0", "c.1"};
                default:
                    return {"d.0", "d.1"};
            }
        };
        return l;
    }
};

uint64_t aligned_buffer(uint64_t offset, uint64_t length) {
    return (offset % kDirectAlign + length + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
}

TEST(ExpertIndex, GroupsPartsIntoReads) {
    GroupingModel g;
    auto ckpt = Checkpoint::open(g.tmp.path());
    ExpertIndex index(*ckpt, GroupingModel::layout());
    auto off = [&](const char* name) { return ckpt->get(name).offset; };

    const ExpertLocation& a = index.at(0, 0);  // adjacent: one read, parts in layout order
    ASSERT_EQ(a.reads.size(), 1u);
    EXPECT_EQ(a.reads[0].offset, off("a.0"));
    EXPECT_EQ(a.reads[0].length, 3000u);
    EXPECT_EQ(a.parts[0].info->name, "a.1");
    EXPECT_EQ(a.parts[0].offset, 1000u);
    EXPECT_EQ(a.parts[1].offset, 0u);
    EXPECT_EQ(a.bytes, 3000u);
    EXPECT_EQ(a.buffer_bytes, aligned_buffer(off("a.0"), 3000));

    const ExpertLocation& b = index.at(0, 1);  // small gap: one read, the gap included
    ASSERT_EQ(b.reads.size(), 1u);
    EXPECT_EQ(b.reads[0].length, 500u + 1024 + 700);
    EXPECT_EQ(b.parts[1].offset, 500u + 1024);
    EXPECT_EQ(b.bytes, 1200u);

    const ExpertLocation& c = index.at(0, 2);  // gap over the limit: two reads
    ASSERT_EQ(c.reads.size(), 2u);
    EXPECT_EQ(c.reads[0].length, 300u);
    EXPECT_EQ(c.reads[1].offset, off("c.1"));
    EXPECT_EQ(c.parts[1].read, 1u);
    EXPECT_EQ(c.parts[1].offset, 0u);
    EXPECT_EQ(c.buffer_bytes, aligned_buffer(off("c.0"), 300) + aligned_buffer(off("c.1"), 300));

    const ExpertLocation& d = index.at(0, 3);  // two files: two reads, in file order
    ASSERT_EQ(d.reads.size(), 2u);
    EXPECT_NE(d.reads[0].file, d.reads[1].file);
    EXPECT_EQ(d.parts[0].info->name, "d.0");
    EXPECT_EQ(d.parts[1].info->name, "d.1");

    EXPECT_EQ(index.total_bytes(), 3000u + 1200 + 600 + 5000 + 4096);
    EXPECT_EQ(index.max_buffer_bytes(0),
              std::max({a.buffer_bytes, b.buffer_bytes, c.buffer_bytes, d.buffer_bytes}));
    EXPECT_EQ(index.files().size(), 2u);
}

TEST(ExpertIndex, MissingTensorIsNamed) {
    GroupingModel g;
    auto ckpt = Checkpoint::open(g.tmp.path());
    ExpertLayout layout = GroupingModel::layout();
    layout.tensor_names = [](int, int e) -> std::vector<std::string> {
        return {e == 2 ? "c.missing" : "a.0"};
    };
    const std::string msg = error_of([&] { ExpertIndex index(*ckpt, layout); });
    EXPECT_NE(msg.find("c.missing"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expert 2"), std::string::npos) << msg;
}

TEST(ExpertIndex, LayerMustNameAllOrNoExperts) {
    GroupingModel g;
    auto ckpt = Checkpoint::open(g.tmp.path());
    ExpertLayout layout = GroupingModel::layout();
    layout.tensor_names = [](int, int e) -> std::vector<std::string> {
        if (e == 3) return {};
        return {"a.0"};
    };
    EXPECT_NE(error_of([&] { ExpertIndex index(*ckpt, layout); }).find("expert 3"), std::string::npos);
}

TEST(ExpertIndex, FingerprintFollowsTheLayout) {
    TempDir a_dir, b_dir;
    SynthModel a = write_synth_model(a_dir.path(), 1);
    SynthModel a_again = write_synth_model(b_dir.path(), 1);  // the same model in another directory
    auto ca = a.open(), cb = a_again.open();
    EXPECT_EQ(ExpertIndex(*ca, a.layout()).fingerprint(), ExpertIndex(*cb, a.layout()).fingerprint());

    TempDir c_dir;
    SynthModel other = write_synth_model(c_dir.path(), 1, /*size_salt=*/8);
    auto cc = other.open();
    EXPECT_NE(ExpertIndex(*ca, a.layout()).fingerprint(), ExpertIndex(*cc, other.layout()).fingerprint());

    ExpertLayout fewer = a.layout();  // same files, other tensors per expert
    fewer.tensor_names = [](int l, int e) {
        std::vector<std::string> names;
        if (l > 0) names.push_back(SynthModel::tensor_name(l, e, 0));
        return names;
    };
    EXPECT_NE(ExpertIndex(*ca, a.layout()).fingerprint(), ExpertIndex(*ca, fewer).fingerprint());
}

}  // namespace
}  // namespace coli
