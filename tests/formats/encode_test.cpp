// weight_encode / weight_decode_row: names and sizes, error bounds per format, the scale rules, zero and
// non-finite blocks, nibble order, and mxfp4 decode against the gpt-oss (HF) algorithm.
#include "core/error.h"
#include "formats/format.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace coli {
namespace {

using test::bits_of;
using test::decode_all;
using test::random_matrix;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

float scale_f32(const EncodedWeight& e, int64_t i) {
    float s;
    std::memcpy(&s, e.scales.data() + i * sizeof(float), sizeof(s));
    return s;
}

// ---- names, shapes, sizes ----

TEST(Format, NamesParseBack) {
    for (const Format f : test::kAllFormats) {
        const auto parsed = format_parse(format_name(f));
        ASSERT_TRUE(parsed.has_value()) << format_name(f);
        EXPECT_EQ(*parsed, f);
    }
    EXPECT_EQ(format_name(Format::int8_row), "int8");
    EXPECT_EQ(format_name(Format::int4_g64), "int4-g64");
    EXPECT_EQ(format_name(Format::fp8_e4m3_block), "fp8-e4m3-block");
    EXPECT_EQ(format_parse("int4_g64"), Format::int4_g64);
    EXPECT_FALSE(format_parse("int3").has_value());
    EXPECT_FALSE(format_is_quantized(Format::f32));
    EXPECT_FALSE(format_is_quantized(Format::bf16));
    EXPECT_FALSE(format_is_quantized(Format::f16));
    EXPECT_TRUE(format_is_quantized(Format::int8_row));
    EXPECT_TRUE(format_is_quantized(Format::int4_g64));
    EXPECT_TRUE(format_is_quantized(Format::mxfp4));
    EXPECT_TRUE(format_is_quantized(Format::fp8_e4m3_block));
}

TEST(Format, CheckShapeRejectsPartialGroups) {
    EXPECT_THROW(format_check_shape(Format::int4_g64, 4, 32), Error);
    EXPECT_THROW(format_check_shape(Format::int4_g64, 4, 100), Error);
    EXPECT_NO_THROW(format_check_shape(Format::int4_g64, 4, 128));
    EXPECT_THROW(format_check_shape(Format::mxfp4, 4, 16), Error);
    EXPECT_THROW(format_check_shape(Format::mxfp4, 4, 33), Error);
    EXPECT_NO_THROW(format_check_shape(Format::mxfp4, 3, 96));
    EXPECT_NO_THROW(format_check_shape(Format::fp8_e4m3_block, 3, 100));  // partial blocks allowed
    EXPECT_NO_THROW(format_check_shape(Format::int8_row, 3, 7));
    EXPECT_THROW(format_check_shape(Format::f32, -1, 4), Error);
    const std::vector<float> w(4 * 48, 1.0f);
    EXPECT_THROW(weight_encode(Format::int4_g64, w.data(), 4, 48), Error);
    EXPECT_THROW(weight_encode(Format::mxfp4, w.data(), 4, 48), Error);
    try {
        weight_encode(Format::int4_g64, w.data(), 4, 48);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("multiple of 64"), std::string::npos) << e.what();
    }
}

TEST(Format, ByteSizes) {
    const auto sizes = [](Format f, int64_t rows, int64_t cols) {
        const WeightView v{f, rows, cols, nullptr, nullptr};
        return std::pair{v.data_bytes(), v.scale_bytes()};
    };
    EXPECT_EQ(sizes(Format::f32, 3, 128), (std::pair<size_t, size_t>{3 * 128 * 4, 0}));
    EXPECT_EQ(sizes(Format::bf16, 3, 128), (std::pair<size_t, size_t>{3 * 128 * 2, 0}));
    EXPECT_EQ(sizes(Format::f16, 3, 128), (std::pair<size_t, size_t>{3 * 128 * 2, 0}));
    EXPECT_EQ(sizes(Format::int8_row, 3, 128), (std::pair<size_t, size_t>{3 * 128, 3 * 4}));
    EXPECT_EQ(sizes(Format::int4_g64, 3, 128), (std::pair<size_t, size_t>{3 * 64, 3 * 2 * 4}));
    EXPECT_EQ(sizes(Format::mxfp4, 3, 128), (std::pair<size_t, size_t>{3 * 64, 3 * 4}));
    EXPECT_EQ(sizes(Format::fp8_e4m3_block, 130, 260), (std::pair<size_t, size_t>{130 * 260, 2 * 3 * 4}));
    for (const Format f : test::kAllFormats) {
        const int64_t rows = 5, cols = 128;
        const auto w = random_matrix(rows, cols, 7);
        const EncodedWeight e = weight_encode(f, w.data(), rows, cols);
        EXPECT_EQ(e.data.size(), e.view().data_bytes()) << format_name(f);
        EXPECT_EQ(e.scales.size(), e.view().scale_bytes()) << format_name(f);
        EXPECT_EQ(e.view().scales == nullptr, e.scales.empty()) << format_name(f);
    }
}

// ---- round trips and error bounds ----

TEST(Encode, F32IsExact) {
    const auto w = random_matrix(3, 17, 1);
    const EncodedWeight e = weight_encode(Format::f32, w.data(), 3, 17);
    EXPECT_EQ(decode_all(e.view()), w);
}

TEST(Encode, Bf16AndF16RelativeError) {
    const int64_t rows = 9, cols = 77;
    const auto w = random_matrix(rows, cols, 2);
    const auto bf = decode_all(weight_encode(Format::bf16, w.data(), rows, cols).view());
    const auto hf = decode_all(weight_encode(Format::f16, w.data(), rows, cols).view());
    for (size_t i = 0; i < w.size(); ++i) {
        const double a = std::fabs(static_cast<double>(w[i]));
        EXPECT_LE(std::fabs(bf[i] - static_cast<double>(w[i])), std::ldexp(a, -8)) << i;
        // f16: 11 significant bits in the normal range, a 2^-25 absolute floor below it.
        EXPECT_LE(std::fabs(hf[i] - static_cast<double>(w[i])),
                  std::max(std::ldexp(a, -11), std::ldexp(1.0, -25)))
            << i;
    }
}

TEST(Encode, Int8RowWithinHalfAScale) {
    const int64_t rows = 13, cols = 301;
    const auto w = random_matrix(rows, cols, 3);
    const EncodedWeight e = weight_encode(Format::int8_row, w.data(), rows, cols);
    const auto d = decode_all(e.view());
    const auto* q = reinterpret_cast<const int8_t*>(e.data.data());
    for (int64_t r = 0; r < rows; ++r) {
        float absmax = 0;
        for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(w[r * cols + c]));
        const float s = scale_f32(e, r);
        EXPECT_EQ(s, absmax / 127.0f) << r;
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = r * cols + c;
            EXPECT_GE(q[i], -127);
            EXPECT_EQ(d[i], static_cast<float>(q[i]) * s);  // decode is code * scale
            // |w - q s| <= s/2, plus the rounding of the products q*s and w/s.
            EXPECT_LE(std::fabs(static_cast<double>(w[i]) - d[i]), s * (0.5 + 1e-5)) << r << "," << c;
        }
    }
}

TEST(Encode, Int4G64WithinHalfAScale) {
    const int64_t rows = 7, cols = 256;
    const auto w = random_matrix(rows, cols, 4);
    const EncodedWeight e = weight_encode(Format::int4_g64, w.data(), rows, cols);
    const auto d = decode_all(e.view());
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < cols / kInt4Group; ++g) {
            float absmax = 0;
            for (int j = 0; j < kInt4Group; ++j)
                absmax = std::max(absmax, std::fabs(w[r * cols + g * 64 + j]));
            const float s = scale_f32(e, r * (cols / kInt4Group) + g);
            EXPECT_EQ(s, absmax / 7.0f) << "scale = absmax / 7";
            for (int j = 0; j < kInt4Group; ++j) {
                const int64_t i = r * cols + g * kInt4Group + j;
                const uint8_t byte = e.data[i / 2];
                const int nib = (i & 1) ? byte >> 4 : byte & 0xf;
                EXPECT_GE(nib, 1) << "symmetric: q in [-7, 7]";
                EXPECT_EQ(d[i], static_cast<float>(nib - 8) * s);
                EXPECT_LE(std::fabs(static_cast<double>(w[i]) - d[i]), s * (0.5 + 1e-5)) << i;
            }
        }
    }
}

// The e2m1 grid magnitudes, for brute-force nearest checks.
constexpr float kE2m1Grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

TEST(Encode, Mxfp4FollowsOcpMxRules) {
    const int64_t rows = 11, cols = 320;
    const auto w = random_matrix(rows, cols, 5);
    const EncodedWeight e = weight_encode(Format::mxfp4, w.data(), rows, cols);
    const auto d = decode_all(e.view());
    const int64_t blocks = cols / kMxBlock;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < blocks; ++b) {
            const float* v = w.data() + r * cols + b * kMxBlock;
            float absmax = 0;
            for (int j = 0; j < kMxBlock; ++j) absmax = std::max(absmax, std::fabs(v[j]));
            int exp2;
            std::frexp(absmax, &exp2);  // absmax = m * 2^exp2, m in [0.5, 1): floor(log2) = exp2 - 1
            const int shared = (exp2 - 1) - 2;
            ASSERT_EQ(e.scales[r * blocks + b], shared + 127) << r << "," << b;
            const double x = std::ldexp(1.0, shared);
            for (int j = 0; j < kMxBlock; ++j) {
                const double target = std::min(std::fabs(v[j] / x), 6.0);  // saturation to +-6
                const double got = std::fabs(d[r * cols + b * kMxBlock + j] / x);
                for (const float g : kE2m1Grid)
                    ASSERT_LE(std::fabs(got - target), std::fabs(g - target) + 1e-12);
                if (d[r * cols + b * kMxBlock + j] != 0.0f) {
                    EXPECT_EQ(std::signbit(d[r * cols + b * kMxBlock + j]), std::signbit(v[j]));
                }
            }
        }
    }
}

TEST(Encode, Mxfp4SaturatesAtSix) {
    // absmax 7.9: floor(log2) = 2, X = 2^0 = 1, so 7.9 is above e2m1's max and saturates to 6 (OCP rule).
    std::vector<float> w(kMxBlock, 0.0f);
    w[0] = 7.9f;
    w[1] = -7.9f;
    w[2] = 5.1f;  // nearest is 6
    w[3] = 5.0f;  // tie between 4 and 6: the even code (4)
    const EncodedWeight e = weight_encode(Format::mxfp4, w.data(), 1, kMxBlock);
    EXPECT_EQ(e.scales[0], 127);
    std::vector<float> d(kMxBlock);
    weight_decode_row(e.view(), 0, d.data());
    EXPECT_EQ(d[0], 6.0f);
    EXPECT_EQ(d[1], -6.0f);
    EXPECT_EQ(d[2], 6.0f);
    EXPECT_EQ(d[3], 4.0f);
}

TEST(Encode, Fp8BlockScalesAndErrors) {
    const int64_t rows = 130, cols = 300;  // partial edge blocks in both directions
    const auto w = random_matrix(rows, cols, 6);
    const EncodedWeight e = weight_encode(Format::fp8_e4m3_block, w.data(), rows, cols);
    const auto d = decode_all(e.view());
    const int64_t block_cols = (cols + 127) / 128;
    ASSERT_EQ(e.scales.size(), 2 * 3 * sizeof(float));
    for (int64_t br = 0; br < 2; ++br) {
        for (int64_t bc = 0; bc < block_cols; ++bc) {
            float absmax = 0;
            for (int64_t r = br * 128; r < std::min<int64_t>(rows, br * 128 + 128); ++r)
                for (int64_t c = bc * 128; c < std::min<int64_t>(cols, bc * 128 + 128); ++c)
                    absmax = std::max(absmax, std::fabs(w[r * cols + c]));
            const float s = scale_f32(e, br * block_cols + bc);
            EXPECT_EQ(s, absmax / 448.0f) << br << "," << bc;
            for (int64_t r = br * 128; r < std::min<int64_t>(rows, br * 128 + 128); ++r) {
                for (int64_t c = bc * 128; c < std::min<int64_t>(cols, bc * 128 + 128); ++c) {
                    const int64_t i = r * cols + c;
                    EXPECT_EQ(d[i], fp8_e4m3_to_f32(e.data[i]) * s);
                    // e4m3 keeps 4 significant bits: relative error <= 2^-4 for normals (|w/s| >= 2^-6),
                    // absolute <= 2^-10 s in the subnormal range; a little slack for w/s and fp8*s.
                    const double err = std::fabs(static_cast<double>(w[i]) - d[i]);
                    const double bound = std::max(std::ldexp(std::fabs(static_cast<double>(w[i])), -4),
                                                  std::ldexp(static_cast<double>(s), -10));
                    EXPECT_LE(err, bound * (1 + 1e-5)) << r << "," << c;
                }
            }
        }
    }
}

// ---- zero and non-finite blocks ----

TEST(Encode, ZeroMatricesDecodeToExactZeros) {
    for (const Format f : test::kAllFormats) {
        const int64_t rows = 3, cols = 128;
        std::vector<float> w(rows * cols, 0.0f);
        w[5] = -0.0f;
        const auto d = decode_all(weight_encode(f, w.data(), rows, cols).view());
        for (const float v : d) ASSERT_EQ(v, 0.0f) << format_name(f);  // no NaN from 0/0
    }
}

TEST(Encode, NonFiniteInputsStayVisible) {
    const int64_t rows = 2, cols = 128;
    auto w = random_matrix(rows, cols, 8);
    w[3] = kNaN;          // row 0, first 32/64/128 block
    w[cols + 70] = kInf;  // row 1, second int4 group, third mxfp4 block
    for (const Format f : test::kAllFormats) {
        const auto d = decode_all(weight_encode(f, w.data(), rows, cols).view());
        EXPECT_TRUE(std::isnan(d[3])) << format_name(f);
        // Elements far from the NaN keep their values (the NaN is confined to its row/group/block).
        if (f != Format::int8_row) {
            EXPECT_FALSE(std::isnan(d[100])) << format_name(f);
        }
        EXPECT_FALSE(std::isnan(d[cols + 5])) << format_name(f);
    }
    // inf: kept by bf16/f16, saturated by the integer and fp8 formats, a NaN block for mxfp4.
    const auto inf_of = [&](Format f) {
        return decode_all(weight_encode(f, w.data(), rows, cols).view())[cols + 70];
    };
    EXPECT_EQ(inf_of(Format::bf16), kInf);
    EXPECT_EQ(inf_of(Format::f16), kInf);
    EXPECT_TRUE(std::isfinite(inf_of(Format::int8_row)));
    EXPECT_TRUE(std::isfinite(inf_of(Format::int4_g64)));
    EXPECT_TRUE(std::isfinite(inf_of(Format::fp8_e4m3_block)));
    EXPECT_TRUE(std::isnan(inf_of(Format::mxfp4)));
    // The saturated value is the largest magnitude of the row / group / block.
    float absmax = 0;
    for (int64_t c = 0; c < cols; ++c)
        if (c != 70) absmax = std::max(absmax, std::fabs(w[cols + c]));
    EXPECT_NEAR(inf_of(Format::int8_row), absmax, absmax * 1e-6);
}

// ---- nibble order and the gpt-oss layout ----

TEST(Encode, NibbleOrderIsElement2jLow) {
    std::vector<float> w(kInt4Group, 0.0f);
    w[0] = 1.0f;   // absmax 3 -> mxfp4 X = 2^(1-2) = 0.5: 1/X = 2 -> code 4; int4 s = 3/7: q = 2 (2.33)
    w[1] = -3.0f;  // mxfp4: -6 -> code 15; int4: q = -7 -> nib 1
    const EncodedWeight mx = weight_encode(Format::mxfp4, w.data(), 1, kInt4Group);
    EXPECT_EQ(mx.scales[0], 127 - 1);
    EXPECT_EQ(mx.data[0], 0xf4) << "element 0 in the low nibble";
    const EncodedWeight i4 = weight_encode(Format::int4_g64, w.data(), 1, kInt4Group);
    EXPECT_EQ(i4.data[0], (1 << 4) | (2 + 8));
    EXPECT_EQ(i4.data[1], 0x88);  // zeros are nib 8

    // And decode reads it the same way: byte 0x3a is element 0 = code 0xa (-1), element 1 = code 3 (1.5).
    std::vector<uint8_t> packed(kMxBlock / 2, 0);
    packed[0] = 0x3a;
    const uint8_t scale = 127;
    const WeightView v{Format::mxfp4, 1, kMxBlock, packed.data(), &scale};
    std::vector<float> d(kMxBlock);
    weight_decode_row(v, 0, d.data());
    EXPECT_EQ(d[0], -1.0f);
    EXPECT_EQ(d[1], 1.5f);
}

// HF transformers convert_moe_packed_tensors (docs/models.md 9.2), written out independently:
// blocks [rows, G, 16], scales [rows, G]; row[2j] = LUT[byte & 0xF], row[2j+1] = LUT[byte >> 4], then
// ldexp(row, scale - 127).
std::vector<float> gpt_oss_decode(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales,
                                  int64_t rows, int64_t groups) {
    static const float kLut[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    constexpr int kBytesPerBlock = 16;
    std::vector<float> out(rows * groups * kBytesPerBlock * 2);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
            const int exp = static_cast<int>(scales[r * groups + g]) - 127;
            for (int k = 0; k < kBytesPerBlock; ++k) {
                const uint8_t byte = blocks[(r * groups + g) * kBytesPerBlock + k];
                const int64_t j = (g * kBytesPerBlock + k);  // byte index within the row
                out[r * groups * 32 + 2 * j] = std::ldexp(kLut[byte & 0x0f], exp);
                out[r * groups * 32 + 2 * j + 1] = std::ldexp(kLut[byte >> 4], exp);
            }
        }
    }
    return out;
}

TEST(Decode, Mxfp4MatchesTheGptOssAlgorithmBitForBit) {
    const int64_t rows = 6, groups = 5, cols = groups * kMxBlock;
    std::mt19937 rng(9);
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<uint8_t> blocks(rows * cols / 2), scales(rows * groups);
    for (auto& b : blocks) b = static_cast<uint8_t>(byte(rng));
    for (size_t i = 0; i < scales.size(); ++i)  // the whole e8m0 range, 0 (2^-127) and 254 included
        scales[i] = static_cast<uint8_t>(i == 0 ? 0 : i == 1 ? 254 : byte(rng) % 255);
    const WeightView v{Format::mxfp4, rows, cols, blocks.data(), scales.data()};
    const auto want = gpt_oss_decode(blocks, scales, rows, groups);
    const auto got = decode_all(v);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(bits_of(got[i]), bits_of(want[i])) << i;
}

TEST(Decode, Fp8UsesTheBlockOfTheElement) {
    const int64_t rows = 257, cols = 300;
    std::vector<uint8_t> data(rows * cols);
    std::mt19937 rng(10);
    for (auto& b : data) b = static_cast<uint8_t>(rng() % 0x7e);  // no NaN codes
    const int64_t br = 3, bc = 3;
    std::vector<float> scales(br * bc);
    for (int64_t i = 0; i < br * bc; ++i) scales[i] = static_cast<float>(i + 1) * 0.25f;
    const WeightView v{Format::fp8_e4m3_block, rows, cols, data.data(), scales.data()};
    const auto d = decode_all(v);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(d[r * cols + c],
                      fp8_e4m3_to_f32(data[r * cols + c]) * scales[(r / 128) * bc + c / 128]);
}

TEST(Decode, Fp8EveryCodeTimesEveryKindOfScaleIsTheScalarProduct) {
    // Block scales where 2^120 folds in, where it would overflow, subnormal, negative and not finite; each
    // block row has two of them, and each half of a row holds every code once.
    const std::vector<float> kinds = {1.0f, 0.37f, 3.7e-5f, -2.25f, 1e30f, 3.0e38f, 5e-39f, INFINITY, NAN};
    const int64_t block_rows = static_cast<int64_t>(kinds.size()), rows = block_rows * kFp8Block;
    const int64_t codes = 256, cols = 2 * codes, bc = cols / kFp8Block;
    std::vector<uint8_t> data(rows * cols);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i % codes);
    std::vector<float> scales(block_rows * bc);
    for (int64_t br = 0; br < block_rows; ++br)
        for (int64_t c = 0; c < bc; ++c) scales[br * bc + c] = kinds[(br + c / 2) % kinds.size()];
    const WeightView v{Format::fp8_e4m3_block, rows, cols, data.data(), scales.data()};
    const auto d = decode_all(v);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float want =
                fp8_e4m3_to_f32(data[r * cols + c]) * scales[(r / kFp8Block) * bc + c / kFp8Block];
            const float got = d[r * cols + c];
            if (std::isnan(want))
                ASSERT_TRUE(std::isnan(got)) << r << ", " << c;
            else
                ASSERT_EQ(bits_of(got), bits_of(want)) << r << ", " << c;
        }
}

TEST(Decode, RejectsBadRowsAndViews) {
    const auto w = random_matrix(2, 64, 11);
    const EncodedWeight e = weight_encode(Format::int4_g64, w.data(), 2, 64);
    std::vector<float> out(64);
    EXPECT_THROW(weight_decode_row(e.view(), 2, out.data()), Error);
    EXPECT_THROW(weight_decode_row(e.view(), -1, out.data()), Error);
    WeightView no_scales = e.view();
    no_scales.scales = nullptr;
    EXPECT_THROW(weight_decode_row(no_scales, 0, out.data()), Error);
}

}  // namespace
}  // namespace coli
