// Block-FP8 weights as DeepSeek/GLM checkpoints store them (docs/models.md 9.4): F8_E4M3 codes plus an F32
// `<name>_scale_inv` per 128 x 128 block, read in place as fp8_e4m3_block; w = fp8 * scale.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/test_util.h"
#include "nn/weights.h"

namespace coli {
namespace {

TensorInfo info(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    TensorInfo t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    return t;
}

std::span<const uint8_t> bytes_of(const void* p, size_t n) {
    return {static_cast<const uint8_t*>(p), n};
}

TEST(Fp8Weights, CodesTimesTheirBlockScale) {
    // [2, 130]: two column blocks. e4m3 0x38 = 1.0, 0x40 = 2.0, 0xC0 = -2.0 (OCP e4m3fn).
    constexpr int64_t kRows = 2, kCols = 130;
    std::vector<uint8_t> codes(kRows * kCols, 0x38);
    codes[1] = 0x40;
    codes[kCols + 129] = 0xC0;
    const std::vector<float> scales = {0.5f, 4.0f};  // [1, 2] blocks
    const TensorInfo w = info("w.weight", DType::f8_e4m3, {kRows, kCols});
    const TensorInfo s = info("w.weight_scale_inv", DType::f32, {1, 2});
    const Weight v = weight_view_of(w, codes, &s, bytes_of(scales.data(), scales.size() * sizeof(float)));
    ASSERT_EQ(v.format(), Format::fp8_e4m3_block);
    std::vector<float> row(kCols);
    weight_decode_row(v.host, 0, row.data());
    EXPECT_EQ(row[0], 0.5f);    // 1.0 * 0.5
    EXPECT_EQ(row[1], 1.0f);    // 2.0 * 0.5
    EXPECT_EQ(row[128], 4.0f);  // second column block
    weight_decode_row(v.host, 1, row.data());
    EXPECT_EQ(row[129], -8.0f);
    EXPECT_EQ(scale_name_of("model.layers.0.mlp.down_proj.weight"),
              "model.layers.0.mlp.down_proj.weight_scale_inv");
}

// DeepSeek-V4 (docs/models.md 9.6): `<w>.scale` holds one E8M0 byte per block, 2^(b - 127).
TEST(Fp8Weights, E8m0BlockScalesAreDecodedPowersOfTwo) {
    constexpr int64_t kRows = 2, kCols = 130;
    std::vector<uint8_t> codes(kRows * kCols, 0x38);  // 1.0
    codes[kCols + 129] = 0xC0;                        // -2.0
    const std::vector<uint8_t> scales = {126, 129};   // 0.5, 4
    for (DType sd : {DType::f8_e8m0, DType::u8}) {
        const TensorInfo w = info("layers.0.attn.wq_a.weight", DType::f8_e4m3, {kRows, kCols});
        const TensorInfo s = info("layers.0.attn.wq_a.scale", sd, {1, 2});
        const Weight v = weight_view_of(w, codes, &s, scales);
        ASSERT_EQ(v.format(), Format::fp8_e4m3_block);
        EXPECT_EQ(v.host.data, codes.data());  // the codes stay in place
        std::vector<float> row(kCols);
        weight_decode_row(v.host, 0, row.data());
        EXPECT_EQ(row[0], 0.5f);
        EXPECT_EQ(row[128], 4.0f);
        weight_decode_row(v.host, 1, row.data());
        EXPECT_EQ(row[129], -8.0f);
    }
    EXPECT_EQ(dot_scale_name_of("layers.0.attn.wq_a.weight"), "layers.0.attn.wq_a.scale");
    EXPECT_EQ(dot_scale_name_of("layers.0.attn.attn_sink"), "");
    EXPECT_TRUE(is_scales_name_of("a.scale", "a.weight"));
    EXPECT_TRUE(is_scales_name_of("a.weight_scale_inv", "a.weight"));
    EXPECT_FALSE(is_scales_name_of("b.scale", "a.weight"));
}

TEST(Fp8Weights, MissingOrMisshapenScalesAreErrors) {
    std::vector<uint8_t> codes(4 * 300, 0x38);
    const TensorInfo w = info("x.weight", DType::f8_e4m3, {4, 300});
    EXPECT_COLI_ERROR(weight_view_of(w, codes), "F8_E4M3 without its x.weight_scale_inv");
    const std::vector<float> scales(2, 1.0f);
    const TensorInfo s = info("x.weight_scale_inv", DType::f32, {1, 2});  // 300 columns need 3 blocks
    EXPECT_COLI_ERROR(weight_view_of(w, codes, &s, bytes_of(scales.data(), 8)),
                      "expected F32, F8_E8M0 or U8 [1, 3]");
    const std::vector<float> f(4, 1.0f);
    const TensorInfo plain = info("y.weight", DType::f32, {2, 2});
    EXPECT_COLI_ERROR(weight_view_of(plain, bytes_of(f.data(), 16), &s, bytes_of(scales.data(), 8)),
                      "only F8_E4M3 weights take");
}

}  // namespace
}  // namespace coli
