// weight_decode_row: the exact f32 value of every element, per format (layouts in format.h).
//
// Scaled formats multiply the code's value by its scale as one f32 multiply, w = value(code) * scale.
// That product is THE weight value: every matmul path uses exactly it (see kernels.h). For mxfp4 it is
// exact (a power-of-two scale); for int8/int4/fp8 it is rounded once.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/simd_clones.h"
#include "formats/format.h"
#include "formats/kernels.h"

namespace coli {

namespace formats_internal {

namespace {

constexpr int kNibbleBits = 4;
constexpr uint8_t kNibbleMask = 0x0f;
constexpr int kInt4Zero = 8;  // int4_g64 stores q + 8

// The 4-bit code of element c in a row of packed nibbles (element 2j in the low nibble of byte j).
inline uint8_t nibble_at(const uint8_t* row, int64_t c) {
    const uint8_t byte = row[c / 2];
    return (c & 1) ? static_cast<uint8_t>(byte >> kNibbleBits) : static_cast<uint8_t>(byte & kNibbleMask);
}

// e2m1_to_f32 of every code.
const std::array<float, 16> kE2m1Values = [] {
    std::array<float, 16> v{};
    for (int c = 0; c < 16; ++c) v[c] = e2m1_to_f32(static_cast<uint8_t>(c));
    return v;
}();

// out[i] = fp8_e4m3_to_f32(codes[i]) * scale for one block's codes, the same values, in a loop that
// vectorizes: each byte's bits placed as the matmul kernels place them (kernels.h, kFp8Shift: the value times
// 2^-120, exact), then times 2^120 and the scale. Where 2^120 folds into the scale without overflowing, the
// first multiply is by 1 and the second rounds the same real product once; else the first is exact.
inline void fp8_block_decode(const uint8_t* codes, int64_t n, float scale, float* out) {
    const bool fold = fp8_scale_foldable(scale);
    const float first = fold ? 1.0f : kFp8Rescale, second = fold ? scale * kFp8Rescale : scale;
    for (int64_t i = 0; i < n; ++i) {
        const auto placed =
            static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(codes[i])) << kFp8Shift) &
            kFp8KeepBits;
        const bool nan = (codes[i] & kFp8NanAbs) == kFp8NanAbs;
        out[i] = bits_to_f32(nan ? placed ^ kFp8NanFix : placed) * first * second;
    }
}

}  // namespace

COLI_SIMD_CLONES void weight_decode_span(const WeightView& w, int64_t r, int64_t c0, int64_t c1, float* out) {
    const int64_t cols = w.cols;
    const int64_t n = c1 - c0;
    switch (w.format) {
        case Format::f32: {
            std::memcpy(out, static_cast<const float*>(w.data) + r * cols + c0, n * sizeof(float));
            return;
        }
        case Format::bf16: {
            const auto* row = static_cast<const uint16_t*>(w.data) + r * cols;
            for (int64_t c = c0; c < c1; ++c) out[c - c0] = bf16_to_f32(row[c]);
            return;
        }
        case Format::f16: {
            const auto* row = static_cast<const uint16_t*>(w.data) + r * cols;
            for (int64_t c = c0; c < c1; ++c) out[c - c0] = f16_to_f32(row[c]);
            return;
        }
        case Format::int8_row: {
            const auto* row = static_cast<const int8_t*>(w.data) + r * cols;
            const float scale = float_load(w.scales, r);
            for (int64_t c = c0; c < c1; ++c) out[c - c0] = static_cast<float>(row[c]) * scale;
            return;
        }
        case Format::int4_g64: {
            const auto* row = static_cast<const uint8_t*>(w.data) + r * (cols / 2);
            const int64_t groups = cols / kInt4Group;
            for (int64_t c = c0; c < c1; ++c) {
                const float scale = float_load(w.scales, r * groups + c / kInt4Group);
                out[c - c0] = static_cast<float>(nibble_at(row, c) - kInt4Zero) * scale;
            }
            return;
        }
        case Format::mxfp4: {
            const auto* row = static_cast<const uint8_t*>(w.data) + r * (cols / 2);
            const auto* scales = static_cast<const uint8_t*>(w.scales) + r * (cols / kMxBlock);
            for (int64_t c = c0; c < c1; ++c)
                out[c - c0] = kE2m1Values[nibble_at(row, c)] * kE8m0Values[scales[c / kMxBlock]];
            return;
        }
        case Format::fp8_e4m3_block: {
            const auto* row = static_cast<const uint8_t*>(w.data) + r * cols;
            const int64_t scale_row = (r / kFp8Block) * fp8_scale_cols(cols);
            for (int64_t c = c0; c < c1;) {  // one block's scale at a time
                const int64_t end = std::min(c1, (c / kFp8Block + 1) * kFp8Block);
                fp8_block_decode(row + c, end - c, float_load(w.scales, scale_row + c / kFp8Block),
                                 out + (c - c0));
                c = end;
            }
            return;
        }
    }
    fail("weight_decode_row: unknown format code {}", static_cast<int>(w.format));
}

}  // namespace formats_internal

// (b & 0x7f) + 1 sets bit 7 only for a NaN code: one OR over every byte, which vectorizes.
COLI_SIMD_CLONES bool fp8_codes_nan_free(const uint8_t* codes, size_t n) {
    constexpr uint8_t kCarry = 0x80;
    uint8_t any = 0;
    for (size_t i = 0; i < n; ++i) any |= static_cast<uint8_t>((codes[i] & formats_internal::kFp8NanAbs) + 1);
    return (any & kCarry) == 0;
}

void weight_decode_row(const WeightView& w, int64_t r, float* out) {
    formats_internal::weight_view_check(w);
    check(r >= 0 && r < w.rows, "weight_decode_row: row {} is outside [0, {})", r, w.rows);
    formats_internal::weight_decode_span(w, r, 0, w.cols, out);
}

}  // namespace coli
