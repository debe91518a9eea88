// ExpertHandle::part_nan_free: the store checks each F8_E4M3 part for NaN codes as its read lands, so that
// the CPU matmul of a cached expert may leave out its NaN fix. A part with one NaN code anywhere, in either
// of the two reads an expert may take, must not be marked; other dtypes never are.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "synth_model.h"

namespace coli {
namespace {

using namespace store_test;

constexpr int64_t kRows = 4, kCols = 48;  // an F8_E4M3 part of 192 codes
constexpr uint8_t kNanCodes[] = {0x7f, 0xff};

TEST(StoreNanCheck, Fp8PartsWithoutNanCodesAreMarked) {
    TempDir tmp;
    // Expert e: an fp8 "w" and an f32 "s"; experts 1 and 2 hold one NaN code each (positive, negative),
    // expert 3's fp8 part lies in the second shard (its own read).
    std::vector<std::vector<uint8_t>> codes(4, std::vector<uint8_t>(kRows * kCols));
    for (auto& c : codes)
        for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>((i * 53) % 0x7f);  // no NaN
    codes[1][kRows * kCols - 1] = kNanCodes[0];
    codes[2][7] = kNanCodes[1];
    const std::vector<float> scales(kRows * kCols, 1.0f);
    std::vector<TensorWrite> shard1, shard2;
    nlohmann::json map = nlohmann::json::object();
    for (int e = 0; e < 4; ++e) {
        auto& shard = e == 3 ? shard2 : shard1;
        shard.push_back({fmt::format("e{}.w", e), DType::f8_e4m3, {kRows, kCols}, codes[e].data()});
        shard.push_back({fmt::format("e{}.s", e), DType::f32, {kRows, kCols}, scales.data()});
    }
    safetensors_write(tmp / "s1.safetensors", shard1);
    safetensors_write(tmp / "s2.safetensors", shard2);
    for (auto& t : shard1) map[t.name] = "s1.safetensors";
    for (auto& t : shard2) map[t.name] = "s2.safetensors";
    write_bytes(tmp / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
    write_bytes(tmp / "config.json", "{}");

    ExpertLayout l;
    l.n_layers = 1;
    l.n_experts = 4;
    l.top_k = 1;
    l.tensor_names = [](int, int e) -> std::vector<std::string> {
        return {fmt::format("e{}.s", e), fmt::format("e{}.w", e)};
    };
    auto ckpt = Checkpoint::open(tmp.path());
    ExpertStore store(*ckpt, l, StoreOptions{});
    const bool want[] = {true, false, false, true};
    for (int e = 0; e < 4; ++e) {
        const auto h = store.fetch(0, std::vector<int>{e});
        ASSERT_EQ(h[0].part_count(), 2u);
        EXPECT_FALSE(h[0].part_nan_free(0)) << "an F32 part is never marked";
        EXPECT_EQ(h[0].part_nan_free(1), want[e]) << "expert " << e;
    }
}

}  // namespace
}  // namespace coli
