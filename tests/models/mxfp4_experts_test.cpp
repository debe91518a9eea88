// Routed experts stored as compressed-tensors MXFP4 (docs/models.md 9.3, Kimi K3): `<w>.weight_packed` U8
// [out, in/2] + `<w>.weight_scale` U8 [out, in/32], viewed in place as Format::mxfp4 through the expert
// store. Expected values come from the formula of docs/models.md 9.1, computed here:
// w[o, 2j] = E2M1[byte & 0xF], w[o, 2j+1] = E2M1[byte >> 4], times 2^(scale[o, i/32] - 127).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/moe.h"
#include "nn/weights.h"
#include "store/expert_store.h"

namespace coli {
namespace {

// OCP E2M1 codes 0-7 (docs/models.md 9.1); codes 8-15 are the same values negated.
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
constexpr int kE8m0Bias = 127;
constexpr int kBlock = 32;  // inputs per e8m0 scale

float e2m1_value(uint8_t code) {
    const float v = kE2m1[code & 7];
    return code & 8 ? -v : v;
}

// One MXFP4 matrix as compressed-tensors stores it, with its values computed from the formula.
struct PackedMatrix {
    int64_t rows = 0, cols = 0;
    std::vector<uint8_t> packed;  // [rows, cols/2]
    std::vector<uint8_t> scale;   // [rows, cols/32]
    std::vector<float> values;    // [rows, cols], the expected decode

    PackedMatrix(int64_t r, int64_t c, std::mt19937& rng) : rows(r), cols(c) {
        packed.resize(size_t(r * c / 2));
        scale.resize(size_t(r * c / kBlock));
        for (uint8_t& b : packed) b = uint8_t(rng());
        // Scales 2^-8 .. 2^7: every code times them is exact in f32.
        for (uint8_t& s : scale) s = uint8_t(kE8m0Bias - 8 + int(rng() % 16));
        values.resize(size_t(r * c));
        for (int64_t o = 0; o < r; ++o)
            for (int64_t i = 0; i < c; ++i) {
                const uint8_t byte = packed[size_t(o * (c / 2) + i / 2)];
                const uint8_t code = i % 2 == 0 ? byte & 0xF : byte >> 4;
                const int e = scale[size_t(o * (c / kBlock) + i / kBlock)];
                values[size_t(o * c + i)] = e2m1_value(code) * std::ldexp(1.0f, e - kE8m0Bias);
            }
    }
};

TensorInfo info(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    TensorInfo t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    return t;
}

void expect_decodes_to(const Weight& w, const PackedMatrix& m, const std::string& what) {
    ASSERT_EQ(w.format(), Format::mxfp4) << what;
    ASSERT_EQ(w.rows(), m.rows) << what;
    ASSERT_EQ(w.cols(), m.cols) << what;
    std::vector<float> row(size_t(m.cols));
    for (int64_t o = 0; o < m.rows; ++o) {
        weight_decode_row(w.host, o, row.data());
        for (int64_t i = 0; i < m.cols; ++i)
            ASSERT_EQ(row[size_t(i)], m.values[size_t(o * m.cols + i)])
                << what << " [" << o << ", " << i << "]";
    }
}

TEST(Mxfp4Weights, PackedCodesTimesE8m0Scales) {
    std::mt19937 rng(7);
    const PackedMatrix m(6, 96, rng);
    const TensorInfo w = info("e.w1.weight_packed", DType::u8, {6, 48});
    const TensorInfo s = info("e.w1.weight_scale", DType::u8, {6, 3});
    const Weight v = weight_view_of(w, m.packed, &s, m.scale);
    EXPECT_EQ(v.host.data, m.packed.data()) << "viewed in place, not copied";
    EXPECT_EQ(v.host.scales, m.scale.data());
    expect_decodes_to(v, m, "e.w1");
    EXPECT_EQ(packed_scale_name_of("x.experts.3.w2.weight_packed"), "x.experts.3.w2.weight_scale");
}

TEST(Mxfp4Weights, MismatchedPairsAreErrorsNamingTheTensor) {
    std::vector<uint8_t> bytes(4096, 0x11);
    const TensorInfo w = info("p.weight_packed", DType::u8, {4, 32});  // 64 inputs: 2 scales per row
    const TensorInfo narrow = info("p.weight_scale", DType::u8, {4, 1});
    EXPECT_COLI_ERROR(weight_view_of(w, bytes, &narrow, bytes),
                      "p.weight_scale: scales U8 [4x1], expected F8_E8M0 or U8 [4, 2]");
    const TensorInfo odd = info("q.weight_packed", DType::u8, {4, 17});  // 34 inputs: not whole blocks
    const TensorInfo odd_scale = info("q.weight_scale", DType::u8, {4, 1});
    EXPECT_COLI_ERROR(weight_view_of(odd, bytes, &odd_scale, bytes),
                      "q.weight_packed: U8 [4, 17] holds 34 inputs");
    const TensorInfo f32_scale = info("p.weight_scale", DType::f32, {4, 2});
    EXPECT_COLI_ERROR(weight_view_of(w, bytes, &f32_scale, bytes), "p.weight_scale: scales F32");
    EXPECT_COLI_ERROR(weight_view_of(w, bytes), "p.weight_packed is U8 without its MXFP4 e8m0 scales");
    const TensorInfo bf16 = info("r.weight_packed", DType::bf16, {4, 32});
    EXPECT_COLI_ERROR(weight_view_of(bf16, bytes, &narrow, bytes),
                      "tensor r.weight_packed (BF16) has scales");
    EXPECT_COLI_ERROR(packed_scale_name_of("r.weight"), "r.weight is not a packed weight");
}

// A Kimi-style checkpoint: layer 1 has three experts stored out of id order, each as w1/w3/w2 MXFP4 pairs
// except expert 1, whose gate is a plain BF16 `w1.weight` (the lookup takes whichever is there).
class Mxfp4Experts : public ::testing::Test {
protected:
    static constexpr int64_t kHidden = 64, kFfn = 32;
    static constexpr int kExperts = 3;
    static constexpr int kPlainGateExpert = 1;
    static constexpr int kDiskOrder[kExperts] = {2, 0, 1};

    static std::string prefix(int e) {
        return fmt::format("language_model.model.layers.1.block_sparse_moe.experts.{}.", e);
    }

    void SetUp() override {
        std::mt19937 rng(11);
        for (int e = 0; e < kExperts; ++e) {
            gate_.emplace_back(kFfn, kHidden, rng);
            up_.emplace_back(kFfn, kHidden, rng);
            down_.emplace_back(kHidden, kFfn, rng);
        }
        plain_gate_.resize(size_t(kFfn * kHidden));
        for (uint16_t& h : plain_gate_) h = f32_to_bf16(float(int(rng() % 17) - 8) / 4);
        std::vector<TensorWrite> writes;
        auto add_packed = [&](int e, const char* proj, const PackedMatrix& m) {
            writes.push_back(
                {prefix(e) + proj + ".weight_packed", DType::u8, {m.rows, m.cols / 2}, m.packed.data()});
            writes.push_back(
                {prefix(e) + proj + ".weight_scale", DType::u8, {m.rows, m.cols / kBlock}, m.scale.data()});
        };
        for (int e : kDiskOrder) {
            if (e == kPlainGateExpert)
                writes.push_back({prefix(e) + "w1.weight", DType::bf16, {kFfn, kHidden}, plain_gate_.data()});
            else
                add_packed(e, "w1", gate_[e]);
            add_packed(e, "w2", down_[e]);
            add_packed(e, "w3", up_[e]);
        }
        safetensors_write(dir_ / "model.safetensors", writes);
        test::write_bytes(dir_ / "config.json", nlohmann::json{{"model_type", "kimi_k3"}}.dump());
        ckpt_ = Checkpoint::open(dir_.path());
    }

    ExpertLayout layout() const {
        return {2, kExperts, 1, [this](int layer, int e) {
                    return layer == 1 ? swiglu_expert_tensors(*ckpt_, prefix(e), kKimiExpertNames)
                                      : std::vector<std::string>{};
                }};
    }

    test::TempDir dir_{"mxfp4-experts"};
    std::unique_ptr<Checkpoint> ckpt_;
    std::vector<PackedMatrix> gate_, up_, down_;
    std::vector<uint16_t> plain_gate_;
};

TEST_F(Mxfp4Experts, TensorListFollowsTheStoredForm) {
    const std::string p = prefix(0);
    EXPECT_EQ(
        swiglu_expert_tensors(*ckpt_, p, kKimiExpertNames),
        (std::vector<std::string>{p + "w1.weight_packed", p + "w1.weight_scale", p + "w3.weight_packed",
                                  p + "w3.weight_scale", p + "w2.weight_packed", p + "w2.weight_scale"}));
    const std::string q = prefix(kPlainGateExpert);
    EXPECT_EQ(swiglu_expert_tensors(*ckpt_, q, kKimiExpertNames)[0], q + "w1.weight");
    // The default names (gate_proj, ...) are not in this checkpoint: listed as plain weights, which the
    // index then reports as missing.
    EXPECT_EQ(swiglu_expert_tensors(*ckpt_, p)[0], p + "gate_proj.weight");
    ExpertLayout default_names = layout();
    default_names.tensor_names = [this](int layer, int e) {
        return layer == 1 ? swiglu_expert_tensors(*ckpt_, prefix(e)) : std::vector<std::string>{};
    };
    EXPECT_COLI_ERROR(ExpertStore(*ckpt_, default_names, StoreOptions{}),
                      "gate_proj.weight of expert 0 in layer 1 is not in the checkpoint");
}

TEST_F(Mxfp4Experts, StoreHandlesViewTheReadBytesAsMxfp4) {
    ExpertStore store(*ckpt_, layout(), StoreOptions{});
    const std::vector<int> all = {0, 1, 2};
    const std::vector<ExpertHandle> handles = store.fetch(1, all);
    for (const ExpertHandle& h : handles) {
        const int e = h.expert();
        const ExpertWeights w = swiglu_expert_weights(h);
        EXPECT_EQ(w.id, e);
        EXPECT_EQ(w.down.host.data, h.part(h.part_count() - 2).data()) << "viewed in the read buffer";
        if (e == kPlainGateExpert) {
            ASSERT_EQ(w.gate.format(), Format::bf16);
            EXPECT_EQ(w.gate.host.data, h.part(0).data());
        } else {
            expect_decodes_to(w.gate, gate_[e], fmt::format("expert {} w1", e));
        }
        expect_decodes_to(w.up, up_[e], fmt::format("expert {} w3", e));
        expect_decodes_to(w.down, down_[e], fmt::format("expert {} w2", e));
    }
}

// DeepSeek-V4's routed experts (docs/models.md 9.6): `<w>.weight` I8 [out, in/2] with `<w>.scale` F8_E8M0
// [out, in/32], the same codes and scales, under the original names, read through the store in place.
TEST(Mxfp4Weights, DeepseekV4ExpertsAreI8WithE8m0Scales) {
    std::mt19937 rng(5);
    const PackedMatrix gate(32, 64, rng), up(32, 64, rng), down(64, 32, rng);
    const std::string p = "layers.0.ffn.experts.0.";
    std::vector<TensorWrite> writes;
    for (const auto& [proj, m] : {std::pair{"w1", &gate}, {"w3", &up}, {"w2", &down}}) {
        writes.push_back({p + proj + ".weight", DType::i8, {m->rows, m->cols / 2}, m->packed.data()});
        writes.push_back({p + proj + ".scale", DType::f8_e8m0, {m->rows, m->cols / kBlock}, m->scale.data()});
    }
    test::TempDir dir("v4-experts");
    safetensors_write(dir / "model.safetensors", writes);
    test::write_bytes(dir / "config.json", nlohmann::json{{"model_type", "deepseek_v4"}}.dump());
    const auto ckpt = Checkpoint::open(dir.path());
    EXPECT_EQ(swiglu_expert_tensors(*ckpt, p, kKimiExpertNames),
              (std::vector<std::string>{p + "w1.weight", p + "w1.scale", p + "w3.weight", p + "w3.scale",
                                        p + "w2.weight", p + "w2.scale"}));
    const ExpertLayout layout{1, 1, 1,
                              [&](int, int) { return swiglu_expert_tensors(*ckpt, p, kKimiExpertNames); }};
    ExpertStore store(*ckpt, layout, StoreOptions{});
    const std::vector<int> one = {0};
    const std::vector<ExpertHandle> handles = store.fetch(0, one);
    const ExpertWeights w = swiglu_expert_weights(handles[0]);
    EXPECT_EQ(w.gate.host.data, handles[0].part(0).data()) << "viewed in the read buffer";
    expect_decodes_to(w.gate, gate, "w1");
    expect_decodes_to(w.up, up, "w3");
    expect_decodes_to(w.down, down, "w2");
}

}  // namespace
}  // namespace coli
