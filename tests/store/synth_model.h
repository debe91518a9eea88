// Helpers for the store tests: a small synthetic MoE checkpoint written with
// safetensors_write in the transformers layout (two shards and an index, config.json), with experts stored
// out of id order and each expert's tensors in a different order on disk than in the layout.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "store/expert_store.h"

namespace coli::store_test {

namespace fs = std::filesystem;

using test::error_of;
using test::read_bytes;
using test::TempDir;
using test::write_bytes;

// Shape of the synthetic model. Layer 0 is dense (no routed experts), like DeepSeek's first layers.
inline constexpr int kLayers = 4;
inline constexpr int kExperts = 8;
inline constexpr int kTopK = 2;
inline constexpr int kHidden = 64;
inline constexpr const char* kPartNames[] = {"gate_proj", "up_proj", "down_proj"};
inline constexpr int kParts = 3;
// Dense filler tensors between the experts of layer 3 are larger than the read gap the index merges, so
// that some experts there take several reads.
inline constexpr int64_t kBigFillerBytes = 96 * 1024;

struct SynthModel {
    fs::path dir;
    std::map<std::string, std::vector<uint8_t>> data;  // every tensor's bytes, by name

    static std::string tensor_name(int layer, int expert, int part) {
        return fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", layer, expert, kPartNames[part]);
    }
    static bool is_moe_layer(int layer) { return layer > 0; }

    // The model's layout; `only_layer` > 0 treats every other layer as dense (for tests that count
    // experts of one layer against a budget that the larger experts of other layers would not fit).
    ExpertLayout layout(int only_layer = 0) const {
        ExpertLayout l;
        l.n_layers = kLayers;
        l.n_experts = kExperts;
        l.top_k = kTopK;
        l.tensor_names = [only_layer](int layer, int expert) {
            std::vector<std::string> names;
            if (is_moe_layer(layer) && (only_layer == 0 || layer == only_layer))
                for (int p = 0; p < kParts; ++p) names.push_back(tensor_name(layer, expert, p));
            return names;
        };
        return l;
    }
    std::unique_ptr<Checkpoint> open() const { return Checkpoint::open(dir); }

    uint64_t expert_bytes(int layer, int expert) const {
        uint64_t n = 0;
        for (int p = 0; p < kParts; ++p) n += data.at(tensor_name(layer, expert, p)).size();
        return n;
    }
};

// Rows of an expert's matrices: every expert of layer 1 has the same size (so that tests can count
// experts in bytes); layers 2 and 3 vary by expert (so that max_resident must use the largest).
inline int64_t expert_rows(int layer, int expert, int size_salt) {
    if (layer == 1) return 72 + size_salt;
    return 64 + 16 * layer + 8 * (expert % 4) + size_salt;
}

// Writes the model into `dir`. `seed` picks the bytes and the on-disk order; `size_salt` changes every
// expert's size (another model with the same names).
inline SynthModel write_synth_model(const fs::path& dir, uint32_t seed = 1, int size_salt = 0) {
    SynthModel m;
    m.dir = dir;
    std::mt19937 rng(seed);
    struct Planned {
        std::string name;
        DType dtype;
        std::vector<int64_t> shape;
    };
    auto add = [&](std::vector<Planned>& shard, std::string name, DType dtype, std::vector<int64_t> shape) {
        int64_t n = int64_t(dtype_size(dtype));
        for (int64_t d : shape) n *= d;
        std::vector<uint8_t> bytes(static_cast<size_t>(n));
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
        m.data[name] = std::move(bytes);
        shard.push_back({std::move(name), dtype, std::move(shape)});
    };
    auto add_expert_part = [&](std::vector<Planned>& shard, int l, int e, int p) {
        const int64_t rows = expert_rows(l, e, size_salt);
        // down_proj is u8 with an odd row length, so that offsets are not even 8-byte aligned.
        if (p == 2)
            add(shard, SynthModel::tensor_name(l, e, p), DType::u8, {rows + 3, kHidden - 3});
        else
            add(shard, SynthModel::tensor_name(l, e, p), DType::bf16, {rows, kHidden});
    };

    // Shard 1: dense tensors, then layers 1 and 2 with each expert's tensors adjacent, experts shuffled,
    // parts in a shuffled order per expert.
    std::vector<Planned> shard1, shard2;
    add(shard1, "model.embed_tokens.weight", DType::bf16, {37, kHidden});
    add(shard1, "model.layers.0.mlp.down_proj.weight", DType::bf16, {kHidden, 40});
    for (int l = 1; l <= 2; ++l) {
        std::vector<int> experts(kExperts);
        std::iota(experts.begin(), experts.end(), 0);
        std::shuffle(experts.begin(), experts.end(), rng);
        for (int e : experts) {
            std::vector<int> parts = {0, 1, 2};
            std::shuffle(parts.begin(), parts.end(), rng);
            for (int p : parts) add_expert_part(shard1, l, e, p);
        }
        add(shard1, fmt::format("model.layers.{}.mlp.gate.weight", l), DType::f32, {kExperts, kHidden});
    }
    // Shard 2: layer 3's tensors fully shuffled among small and large dense fillers.
    std::vector<std::pair<int, int>> parts;  // (expert, part); expert -1 = filler
    for (int e = 0; e < kExperts; ++e)
        for (int p = 0; p < kParts; ++p) parts.emplace_back(e, p);
    for (int f = 0; f < 6; ++f) parts.emplace_back(-1, f);
    std::shuffle(parts.begin(), parts.end(), rng);
    for (auto [e, p] : parts) {
        if (e >= 0)
            add_expert_part(shard2, 3, e, p);
        else if (p % 2 == 0)
            add(shard2, fmt::format("model.layers.3.filler.{}", p), DType::u8, {kBigFillerBytes});
        else
            add(shard2, fmt::format("model.layers.3.filler.{}", p), DType::u8, {1000 + p});
    }

    nlohmann::json weight_map = nlohmann::json::object();
    auto write_shard = [&](const std::string& file, const std::vector<Planned>& shard) {
        std::vector<TensorWrite> writes;
        for (const Planned& t : shard) {
            writes.push_back({t.name, t.dtype, t.shape, m.data[t.name].data()});
            weight_map[t.name] = file;
        }
        safetensors_write(dir / file, writes);
    };
    write_shard("model-00001-of-00002.safetensors", shard1);
    write_shard("model-00002-of-00002.safetensors", shard2);
    write_bytes(dir / "model.safetensors.index.json",
                nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(1));
    write_bytes(dir / "config.json", nlohmann::json{{"model_type", "synth_moe"},
                                                    {"num_hidden_layers", kLayers},
                                                    {"n_routed_experts", kExperts},
                                                    {"num_experts_per_tok", kTopK}}
                                         .dump(1));
    return m;
}

// Checks that the handle's parts are the bytes written for its expert, in layout order.
inline void expect_expert_bytes(const SynthModel& m, const ExpertHandle& h) {
    ASSERT_EQ(h.part_count(), size_t(kParts));
    for (int p = 0; p < kParts; ++p) {
        const std::string name = SynthModel::tensor_name(h.layer(), h.expert(), p);
        const std::vector<uint8_t>& want = m.data.at(name);
        EXPECT_EQ(h.part_info(p).name, name);
        auto got = h.part(p);
        ASSERT_EQ(got.size(), want.size()) << name;
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << name << ": bytes differ";
    }
}

// What caching each expert costs the budget, measured through an unlimited store: [layer][expert].
inline std::vector<std::vector<uint64_t>> measure_costs(const Checkpoint& ckpt, const SynthModel& m) {
    std::vector<std::vector<uint64_t>> cost(kLayers, std::vector<uint64_t>(kExperts, 0));
    StoreOptions opts;
    ExpertStore store(ckpt, m.layout(), opts);
    for (int l = 1; l < kLayers; ++l)
        for (int e = 0; e < kExperts; ++e) {
            const uint64_t before = store.stats().cached_bytes;
            store.fetch(l, std::vector<int>{e});
            cost[l][e] = store.stats().cached_bytes - before;
        }
    return cost;
}

inline uint64_t max_cost(const std::vector<std::vector<uint64_t>>& cost, int layer) {
    return *std::max_element(cost[layer].begin(), cost[layer].end());
}
inline uint64_t max_cost(const std::vector<std::vector<uint64_t>>& cost) {
    uint64_t m = 0;
    for (const auto& row : cost) m = std::max(m, *std::max_element(row.begin(), row.end()));
    return m;
}

}  // namespace coli::store_test
