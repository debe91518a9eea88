// Scalar conversions between f32 and the small float formats, done on the bits so that they do not depend
// on the floating-point environment (except std::nearbyint in the fp8 subnormal range, which uses the
// default round-to-nearest-even mode).
//
//   bf16   1.8.7   bias 127   RNE; NaN stays NaN and is made quiet; overflow rounds to inf as IEEE does
//   f16    1.5.10  bias 15    RNE with subnormals; >= 65520 rounds to inf; NaN made quiet (payload kept)
//   e4m3fn 1.4.3   bias 7     OCP: no inf, S.1111.111 is NaN, max 448; finite values and inf saturate to
//                             +-448, NaN stays NaN
//   e2m1   1.2.1   bias 1     decode only here (the mxfp4 encoder rounds in encode.cpp)
//   e8m0   8 bits  bias 127   2^(e-127), 0xff is NaN
#include "formats/format.h"
#include "formats/kernels.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

namespace coli {

using formats_internal::bits_to_f32;
using formats_internal::f32_to_bits;

namespace {

constexpr uint32_t kF32Sign = 0x80000000u;
constexpr uint32_t kF32Abs = 0x7fffffffu;
constexpr uint32_t kF32Inf = 0x7f800000u;
constexpr uint32_t kF32Quiet = 0x00400000u;  // the quiet bit of a f32 NaN
constexpr uint32_t kF32QuietNan = 0x7fc00000u;
constexpr int kF32MantBits = 23;
constexpr int kF32Bias = 127;

// bf16 is the top half of a f32.
constexpr int kBf16Shift = 16;
constexpr uint16_t kBf16Quiet = 0x0040;

// f16: 1 sign, 5 exponent, 10 mantissa bits.
constexpr int kF16MantBits = 10;
constexpr int kF16Bias = 15;
constexpr uint16_t kF16Sign = 0x8000;
constexpr uint16_t kF16Inf = 0x7c00;
constexpr uint16_t kF16Quiet = 0x0200;
constexpr uint32_t kF16ExpMax = 0x1f;
constexpr uint32_t kF16MantMask = 0x3ff;
constexpr int kF16DropBits = kF32MantBits - kF16MantBits;  // 13 mantissa bits dropped from f32
constexpr int kF16SubnormalExp = -24;                      // f16 subnormal unit is 2^-24
constexpr uint32_t kF32OfF16Min = 0x38800000u;             // 2^-14, the smallest normal f16, as f32 bits
constexpr uint32_t kF32OfF16Overflow = 0x477ff000u;        // 65520: at or above rounds to inf

// e4m3fn: 1 sign, 4 exponent, 3 mantissa bits.
constexpr int kE4m3MantBits = 3;
constexpr int kE4m3Bias = 7;
constexpr uint8_t kE4m3Sign = 0x80;
constexpr uint8_t kE4m3Abs = 0x7f;
constexpr uint8_t kE4m3NanAbs = 0x7f;  // S.1111.111
constexpr uint8_t kE4m3MaxAbs = 0x7e;  // S.1111.110 = 448
constexpr float kE4m3Max = 448.0f;
constexpr float kE4m3MinNormal = 0x1p-6f;
constexpr int kE4m3SubnormalExp = -9;                        // subnormal unit 2^-9
constexpr int kE4m3DropBits = kF32MantBits - kE4m3MantBits;  // 20

// Round-to-nearest-even of the low `drop` bits of u (keeps the carry into the higher bits).
constexpr uint32_t round_bits_rne(uint32_t u, int drop) {
    const uint32_t half_minus_one = (1u << (drop - 1)) - 1;
    const uint32_t odd = (u >> drop) & 1u;
    return (u + half_minus_one + odd) >> drop;
}

}  // namespace

uint16_t f32_to_bf16(float f) {
    const uint32_t b = f32_to_bits(f);
    if ((b & kF32Abs) > kF32Inf) return static_cast<uint16_t>((b >> kBf16Shift) | kBf16Quiet);
    return static_cast<uint16_t>(round_bits_rne(b, kBf16Shift));  // inf stays inf, overflow rounds to inf
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & kF16Sign) << 16;
    const uint32_t exp = (h >> kF16MantBits) & kF16ExpMax;
    const uint32_t mant = h & kF16MantMask;
    if (exp == kF16ExpMax) {  // inf or NaN (NaN made quiet, like the F16C instruction does)
        if (mant == 0) return bits_to_f32(sign | kF32Inf);
        return bits_to_f32(sign | kF32Inf | kF32Quiet | (mant << kF16DropBits));
    }
    if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
        const float mag = std::ldexp(static_cast<float>(mant), kF16SubnormalExp);
        return bits_to_f32(sign | f32_to_bits(mag));
    }
    return bits_to_f32(sign | ((exp + kF32Bias - kF16Bias) << kF32MantBits) | (mant << kF16DropBits));
}

uint16_t f32_to_f16(float f) {
    const uint32_t b = f32_to_bits(f);
    const auto sign = static_cast<uint16_t>((b >> 16) & kF16Sign);
    const uint32_t a = b & kF32Abs;
    if (a > kF32Inf)
        return sign | kF16Inf | kF16Quiet | static_cast<uint16_t>((a >> kF16DropBits) & kF16MantMask);
    if (a >= kF32OfF16Overflow) return sign | kF16Inf;
    if (a >= kF32OfF16Min) {  // normal: rebias the exponent, round away 13 mantissa bits (a carry is fine)
        const uint32_t rebiased = a - (static_cast<uint32_t>(kF32Bias - kF16Bias) << kF32MantBits);
        return sign | static_cast<uint16_t>(round_bits_rne(rebiased, kF16DropBits));
    }
    // Subnormal f16 (or zero): the result is round(|f| / 2^-24). |f| = m * 2^(e - 150) with the implicit
    // bit in m, so the quotient is m >> (126 - e) rounded to nearest even. Rounding up to 0x400 gives the
    // smallest normal, which is the right encoding.
    const int exp = static_cast<int>(a >> kF32MantBits);
    constexpr int kBelowHalfUnit = 102;  // f32 exponent of [2^-25, 2^-24); anything smaller rounds to 0
    if (exp < kBelowHalfUnit) return sign;
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - exp;  // in [14, 24]
    const uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    const uint32_t up = (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
    return sign | static_cast<uint16_t>(q + up);
}

float fp8_e4m3_to_f32(uint8_t b) {
    const uint32_t sign = (b & kE4m3Sign) ? kF32Sign : 0u;
    const int abs = b & kE4m3Abs;
    if (abs == kE4m3NanAbs) return bits_to_f32(sign | kF32QuietNan);
    const int exp = abs >> kE4m3MantBits;
    const int mant = abs & ((1 << kE4m3MantBits) - 1);
    // Subnormal: m * 2^-9. Normal: (8 + m) * 2^(e - 7 - 3). Both exact in f32.
    const float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), kE4m3SubnormalExp)
                               : std::ldexp(static_cast<float>(8 + mant), exp - kE4m3Bias - kE4m3MantBits);
    return bits_to_f32(sign | f32_to_bits(mag));
}

uint8_t f32_to_fp8_e4m3(float f) {
    const uint8_t sign = (f32_to_bits(f) & kF32Sign) ? kE4m3Sign : 0;
    if (std::isnan(f)) return sign | kE4m3NanAbs;
    const float a = std::fabs(f);
    if (a >= kE4m3Max) return sign | kE4m3MaxAbs;  // saturate (inf included): the format has no inf
    if (a < kE4m3MinNormal) {
        // Subnormal grid of 2^-9; the scaling is exact. q = 8 is the smallest normal, code 0x08.
        const float q = std::nearbyint(std::ldexp(a, -kE4m3SubnormalExp));
        return sign | static_cast<uint8_t>(q);
    }
    // Normal: rebias the f32 exponent (127 -> 7) and round away 20 mantissa bits. Below 448 the result
    // cannot reach the NaN code (that would need |f| >= 464).
    const uint32_t rebiased = f32_to_bits(a) - (static_cast<uint32_t>(kF32Bias - kE4m3Bias) << kF32MantBits);
    return sign | static_cast<uint8_t>(round_bits_rne(rebiased, kE4m3DropBits));
}

float e2m1_to_f32(uint8_t code) {
    // OCP MX v1.0: codes 0-7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (8 is -0).
    static constexpr std::array<float, 16> kValues = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    constexpr uint8_t kCodeMask = 0x0f;
    return kValues[code & kCodeMask];
}

float e8m0_to_f32(uint8_t e) {
    constexpr uint8_t kNanCode = 0xff;
    constexpr int kBias = 127;
    if (e == kNanCode) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(e) - kBias);  // e = 0 is 2^-127, a f32 subnormal, exact
}

}  // namespace coli
