// weight_encode: f32 -> each format. Rounding is to nearest, ties to even, everywhere.
//
// Scales (absmax = the largest finite |w| of the row / group / block):
//   int8_row        s = absmax / 127, q = clamp(rne(w / s), -127, 127)         (symmetric: -128 unused)
//   int4_g64        s = absmax / 7,   q = clamp(rne(w / s), -8, 7), nib = q+8   (absmax maps to +-7; we pick
//   /7
//                   over /8 so that the largest element is exact and the error stays <= s/2 everywhere)
//   mxfp4           OCP MX v1.0: X = 2^(floor(log2(absmax)) - 2) (2 = emax of e2m1), clamped to the e8m0
//                   range; code = e2m1 nearest to w / X, saturating to +-6
//   fp8_e4m3_block  s = absmax / 448 per 128x128 block (partial edge blocks too), code = e4m3(w / s)
//   bf16, f16       f32_to_bf16 / f32_to_f16 per element; f32 copied
// A block whose absmax is 0 (or so small that s underflows to 0) gets s = 0 (mxfp4: X = 1) and zero codes,
// so it decodes to exact zeros.
//
// Non-finite inputs:
//   NaN   fp8: the NaN code. mxfp4: the block's scale becomes NaN (0xff). int8/int4: the row's/group's
//         scale becomes NaN. In every case the NaN stays visible after decoding, never a silent number.
//   inf   saturates to the largest magnitude of its row/group/block (fp8: +-448 * s; int: +-127 s or +-7 s);
//         mxfp4 has no inf and no saturating scale choice, so inf makes the block's scale NaN like NaN does.
//         bf16/f16 keep inf.
#include "core/error.h"
#include "formats/format.h"
#include "formats/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace coli {

namespace {

constexpr float kInt8Max = 127.0f;
constexpr float kInt4Max = 7.0f;  // the scale maps absmax to +7
constexpr float kInt4Min = -8.0f;
constexpr int kInt4Zero = 8;
constexpr float kE4m3Max = 448.0f;
constexpr int kE2m1Emax = 2;  // e2m1's largest exponent: 6 = 1.5 * 2^2
constexpr int kE8m0Bias = 127;
constexpr int kE8m0MaxCode = 254;  // 255 is NaN
constexpr uint8_t kE8m0Nan = 0xff;
constexpr int kNibbleBits = 4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Largest finite |v| over v[0, n), and whether a NaN or an inf was seen.
struct AbsMax {
    float value = 0.0f;
    bool has_nan = false;
    bool has_inf = false;
};

AbsMax absmax_scan(const float* v, int64_t n) {
    AbsMax m;
    for (int64_t i = 0; i < n; ++i) {
        const float x = v[i];
        if (std::isnan(x)) {
            m.has_nan = true;
        } else if (std::isinf(x)) {
            m.has_inf = true;
        } else {
            m.value = std::max(m.value, std::fabs(x));
        }
    }
    return m;
}

// Symmetric integer quantization: the scale for a row/group, and the code of one value under it.
float int_scale(const AbsMax& m, float qmax) {
    if (m.has_nan) return kNaN;
    return m.value / qmax;  // 0 for an all-zero row (then every code is 0)
}

int int_code(float w, float scale, float qmin, float qmax) {
    if (!(scale > 0.0f) || std::isnan(w)) return 0;  // zero / underflowed / NaN scale: codes are 0
    const float q = std::nearbyint(w / scale);       // inf / s = inf, clamped below
    return static_cast<int>(std::clamp(q, qmin, qmax));
}

// e2m1 code nearest to v (ties to the even code), saturating to +-6. The midpoints between the
// magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 decide; at a tie the even code wins, hence <= vs <.
uint8_t f32_to_e2m1(float v) {
    constexpr uint8_t kSignBit = 0x08;
    const uint8_t sign = std::signbit(v) ? kSignBit : 0;
    const float a = std::fabs(v);
    uint8_t code;
    if (a <= 0.25f)
        code = 0;
    else if (a < 0.75f)
        code = 1;
    else if (a <= 1.25f)
        code = 2;
    else if (a < 1.75f)
        code = 3;
    else if (a <= 2.5f)
        code = 4;
    else if (a < 3.5f)
        code = 5;
    else if (a <= 5.0f)
        code = 6;
    else
        code = 7;
    return sign | code;
}

// OCP MX v1.0 shared scale of a block: e8m0 code of 2^(floor(log2(absmax)) - emax_e2m1).
uint8_t mx_scale_code(const AbsMax& m) {
    if (m.has_nan || m.has_inf) return kE8m0Nan;
    if (m.value == 0.0f) return kE8m0Bias;            // X = 1; all codes are +-0
    const int exp = std::ilogb(m.value) - kE2m1Emax;  // ilogb is floor(log2) for subnormals too
    return static_cast<uint8_t>(std::clamp(exp + kE8m0Bias, 0, kE8m0MaxCode));
}

void encode_int8_row(const float* w, int64_t rows, int64_t cols, EncodedWeight& e) {
    auto* codes = reinterpret_cast<int8_t*>(e.data.data());
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = w + r * cols;
        const float scale = int_scale(absmax_scan(row, cols), kInt8Max);
        std::memcpy(e.scales.data() + r * sizeof(float), &scale, sizeof(float));
        for (int64_t c = 0; c < cols; ++c)
            codes[r * cols + c] = static_cast<int8_t>(int_code(row[c], scale, -kInt8Max, kInt8Max));
    }
}

void encode_int4_g64(const float* w, int64_t rows, int64_t cols, EncodedWeight& e) {
    const int64_t groups = cols / kInt4Group;
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* out = e.data.data() + r * (cols / 2);
        for (int64_t g = 0; g < groups; ++g) {
            const float* v = w + r * cols + g * kInt4Group;
            const float scale = int_scale(absmax_scan(v, kInt4Group), kInt4Max);
            std::memcpy(e.scales.data() + (r * groups + g) * sizeof(float), &scale, sizeof(float));
            for (int j = 0; j < kInt4Group; j += 2) {
                const int lo = int_code(v[j], scale, kInt4Min, kInt4Max) + kInt4Zero;
                const int hi = int_code(v[j + 1], scale, kInt4Min, kInt4Max) + kInt4Zero;
                out[(g * kInt4Group + j) / 2] = static_cast<uint8_t>(lo | (hi << kNibbleBits));
            }
        }
    }
}

void encode_mxfp4(const float* w, int64_t rows, int64_t cols, EncodedWeight& e) {
    const int64_t blocks = cols / kMxBlock;
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* out = e.data.data() + r * (cols / 2);
        for (int64_t b = 0; b < blocks; ++b) {
            const float* v = w + r * cols + b * kMxBlock;
            const uint8_t scale = mx_scale_code(absmax_scan(v, kMxBlock));
            e.scales[r * blocks + b] = scale;
            // w / X as an exact power-of-two scaling (X = 2^(scale - 127)); NaN blocks store zero codes.
            const int exp = static_cast<int>(scale) - kE8m0Bias;
            for (int j = 0; j < kMxBlock; j += 2) {
                uint8_t lo = 0, hi = 0;
                if (scale != kE8m0Nan) {
                    lo = f32_to_e2m1(std::ldexp(v[j], -exp));
                    hi = f32_to_e2m1(std::ldexp(v[j + 1], -exp));
                }
                out[(b * kMxBlock + j) / 2] = static_cast<uint8_t>(lo | (hi << kNibbleBits));
            }
        }
    }
}

void encode_fp8_e4m3_block(const float* w, int64_t rows, int64_t cols, EncodedWeight& e) {
    const int64_t block_cols = formats_internal::fp8_scale_cols(cols);
    const int64_t block_rows = (rows + kFp8Block - 1) / kFp8Block;
    for (int64_t br = 0; br < block_rows; ++br) {
        const int64_t r0 = br * kFp8Block, r1 = std::min(rows, r0 + kFp8Block);
        for (int64_t bc = 0; bc < block_cols; ++bc) {
            const int64_t c0 = bc * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
            AbsMax m;
            for (int64_t r = r0; r < r1; ++r) {
                const AbsMax row = absmax_scan(w + r * cols + c0, c1 - c0);
                m.value = std::max(m.value, row.value);
            }
            const float scale = m.value / kE4m3Max;  // 0 for an all-zero block
            std::memcpy(e.scales.data() + (br * block_cols + bc) * sizeof(float), &scale, sizeof(float));
            for (int64_t r = r0; r < r1; ++r) {
                for (int64_t c = c0; c < c1; ++c) {
                    const float v = w[r * cols + c];
                    // A zero scale (all-zero block, or absmax so small that /448 underflows) keeps only
                    // the NaN codes; everything else becomes 0.
                    const float scaled = scale > 0.0f ? v / scale : (std::isnan(v) ? v : 0.0f);
                    e.data[r * cols + c] = f32_to_fp8_e4m3(scaled);
                }
            }
        }
    }
}

}  // namespace

EncodedWeight weight_encode(Format f, const float* w, int64_t rows, int64_t cols) {
    format_check_shape(f, rows, cols);
    EncodedWeight e;
    e.format = f;
    e.rows = rows;
    e.cols = cols;
    const WeightView shape{f, rows, cols, nullptr, nullptr};
    e.data.resize(shape.data_bytes());
    e.scales.resize(shape.scale_bytes());
    const int64_t n = rows * cols;
    switch (f) {
        case Format::f32: {
            if (n > 0) std::memcpy(e.data.data(), w, n * sizeof(float));
            break;
        }
        case Format::bf16: {
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_bf16(w[i]);
                std::memcpy(e.data.data() + i * sizeof(uint16_t), &h, sizeof(h));
            }
            break;
        }
        case Format::f16: {
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_f16(w[i]);
                std::memcpy(e.data.data() + i * sizeof(uint16_t), &h, sizeof(h));
            }
            break;
        }
        case Format::int8_row:
            encode_int8_row(w, rows, cols, e);
            break;
        case Format::int4_g64:
            encode_int4_g64(w, rows, cols, e);
            break;
        case Format::mxfp4:
            encode_mxfp4(w, rows, cols, e);
            break;
        case Format::fp8_e4m3_block:
            encode_fp8_e4m3_block(w, rows, cols, e);
            break;
    }
    return e;
}

}  // namespace coli
