// Internal to src/formats: the pieces the matmul paths share. Not part of the public API (format.h).
//
// The canonical dot product (every matmul path implements exactly this; see matmul_ref.cpp):
//   lanes[0..16) = +0
//   for c in [0, cols):  lanes[c % 16] = fma(x[c], w[c], lanes[c % 16])      (w[c] = weight_decode_row value)
//   result = pairwise tree over the 16 lanes: 16 -> 8 (l[i] + l[i+8]) -> 4 (+4) -> 2 (+2) -> 1 (+1)
// The tail (cols % 16 elements) follows the same rule; SIMD paths zero-pad it, which adds exact zeros and
// leaves every lane unchanged (a lane starts at +0 and round-to-nearest never produces -0 from it).
// SIMD paths may keep the 16 lanes in another order (see kNibblePerm) as long as each lane accumulates the
// same elements in the same order and the lanes are put back before the reduction.
#pragma once

#include "formats/format.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace coli::formats_internal {

inline constexpr int kLanes = 16;      // accumulator lanes of the canonical dot product
inline constexpr int kTokenGroup = 4;  // tokens that share one pass over a weight row

// Element i of a float array that may be unaligned (scales inside a mapped checkpoint file).
inline float float_load(const void* p, int64_t i) {
    float f;
    std::memcpy(&f, static_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(float)), sizeof(f));
    return f;
}

// fp8_e4m3_block: number of 128-wide scale blocks along a row, ceil(cols / 128).
inline int64_t fp8_scale_cols(int64_t cols) {
    return (cols + kFp8Block - 1) / kFp8Block;
}

// The float bits of the e8m0 scale 2^(e-127), built without ldexpf. Equal to e8m0_to_f32 for all 256
// codes (tested): e = 0 is the float subnormal 2^-127, 0xff the quiet NaN.
constexpr uint32_t e8m0_bits(uint8_t e) {
    constexpr uint8_t kNanCode = 0xff;
    constexpr uint32_t kQuietNan = 0x7fc00000u;
    constexpr uint32_t kTwoPowMinus127 = 0x00400000u;  // subnormal: mantissa bit 22 set
    if (e == kNanCode) return kQuietNan;
    if (e == 0) return kTwoPowMinus127;
    return static_cast<uint32_t>(e) << 23;
}

// e8m0_to_f32 as a table, for the kernels' per-block setup (one load instead of branches).
inline constexpr std::array<float, 256> kE8m0Values = [] {
    std::array<float, 256> v{};
    for (int e = 0; e < 256; ++e) v[e] = std::bit_cast<float>(e8m0_bits(static_cast<uint8_t>(e)));
    return v;
}();

inline float bits_to_f32(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
}

inline uint32_t f32_to_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof(b));
    return b;
}

// fp8 in the kernels: a byte sign-extended to 32 bits and shifted left by kFp8Shift has the sign in bit 31
// (with copies in bits 27-30, which kFp8KeepBits clears) and the 7 magnitude bits in bits 20-26; as a f32
// that is the e4m3 value times 2^-120, normals and subnormals alike. Multiplying by 2^120 is exact, and so
// is folding 2^120 into the block scale (one multiply by s * 2^120 instead of two) as long as s * 2^120
// does not overflow: the product is the same real number v * s, rounded once.
inline constexpr int kFp8Shift = 20;
inline constexpr uint32_t kFp8KeepBits = 0x87f00000u;
inline constexpr float kFp8Rescale = 0x1p120f;
inline constexpr uint8_t kFp8NanAbs = 0x7f;
// A NaN byte (S.1111.111) becomes sign | 0x07f00000 above; XOR with this makes it sign | 0x7fc00000, the
// quiet NaN fp8_e4m3_to_f32 returns (multiplying it by a scale keeps it bit for bit).
inline constexpr uint32_t kFp8NanFix = 0x07f00000u ^ 0x7fc00000u;

// True when the block scale s can take the 2^120 factor without overflowing (a non-finite s stays what it
// is either way).
inline bool fp8_scale_foldable(float s) {
    return !std::isfinite(s) || std::isfinite(s * kFp8Rescale);
}

// True when every block scale used by rows [r0, r1) is fp8_scale_foldable.
inline bool fp8_scales_foldable(const WeightView& w, int64_t r0, int64_t r1) {
    if (r0 >= r1) return true;
    const int64_t block_cols = fp8_scale_cols(w.cols);
    for (int64_t i = (r0 / kFp8Block) * block_cols; i < ((r1 - 1) / kFp8Block + 1) * block_cols; ++i)
        if (!fp8_scale_foldable(float_load(w.scales, i))) return false;
    return true;
}

// Calls run.template operator()<Row<kFolded, kNanFix>>() with the fp8 row decoder that rows [r0, r1) of w
// need: the 2^120 factor folded into the scales where every one allows it (fp8_scales_foldable), the NaN
// fix unless the codes were checked (WeightView::nan_free). Row is a SIMD file's Fp8Row.
template <template <bool, bool> class Row, class Run>
void fp8_rows_dispatch(const WeightView& w, int64_t r0, int64_t r1, Run&& run) {
    const bool fold = fp8_scales_foldable(w, r0, r1);
    if (w.nan_free) {
        if (fold) return run.template operator()<Row<true, false>>();
        return run.template operator()<Row<false, false>>();
    }
    if (fold) return run.template operator()<Row<true, true>>();
    return run.template operator()<Row<false, true>>();
}

// Permuted lanes (the SIMD kernels of the 4-bit formats). Spreading 16 packed nibbles over 16 dword lanes in
// element order takes several shuffles, and shuffles are the bottleneck there. Broadcasting the 8 bytes to
// every qword and shifting each dword lane by its own amount takes none, but puts element kNibblePerm[j] of
// each 16 into lane j: lane j holds dword j % 2 shifted right by 4 * (j / 2), i.e. element
// 8 * (j % 2) + j / 2. The activations are permuted the same way (x_permute_nibble_order, once per call),
// so lane j accumulates exactly the products canonical lane kNibblePerm[j] would, in the same order;
// putting the 16 lanes back (kNibbleUnperm) before the reduction gives the canonical result bit for bit.
inline constexpr int kNibblePerm[kLanes] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
inline constexpr int kNibbleUnperm[kLanes] = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};

// x[nt][cols] with every 16 floats in kNibblePerm order (cols must be a multiple of 16). Returns a
// per-thread buffer, valid until the next call on the same thread.
const float* x_permute_nibble_order(const float* x, int nt, int64_t cols);

// Decodes elements [c0, c1) of row r into out[0, c1 - c0); the values weight_decode_row gives.
void weight_decode_span(const WeightView& w, int64_t r, int64_t c0, int64_t c1, float* out);

// The canonical reduction of 16 lanes (fixed pairwise tree).
float lanes_reduce(const float* lanes);

// The canonical dot product of x[cols] and decoded weights w[cols].
float dot_canonical(const float* x, const float* w, int64_t cols);

// A row kernel computes, for rows r in [r0, r1) and tokens t in [0, nt) with nt in [1, kTokenGroup]:
//   y[t * ldy + r] = canonical dot of x[t * cols .. + cols) with row r of w.
// Each decodes a chunk of a row once and uses it for all nt tokens.
using RowsKernel = void (*)(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0,
                            int64_t r1);
void rows_scalar(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1);
void rows_avx2(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1);
void rows_avx512(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1);

// Throws coli::Error when w cannot be read (bad shape, missing data or scales).
void weight_view_check(const WeightView& w);

}  // namespace coli::formats_internal
