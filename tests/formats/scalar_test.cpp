// Scalar conversions: every code of every small format against an independent formula, rounding to
// nearest-even at the midpoints, subnormals, saturation, inf and NaN.
#include "formats/format.h"
#include "formats/kernels.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace coli {
namespace {

using test::bits_of;
using test::float_of;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- bf16 ----

TEST(Bf16, DecodeIsTheTopHalfOfAF32) {
    for (uint32_t h = 0; h <= 0xffff; ++h)
        EXPECT_EQ(bits_of(bf16_to_f32(static_cast<uint16_t>(h))), h << 16) << h;
}

TEST(Bf16, EncodeRoundTripsEveryNonNanCode) {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const float f = bf16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        EXPECT_EQ(f32_to_bf16(f), h) << std::hex << h;
    }
}

TEST(Bf16, MidpointsRoundToEven) {
    for (uint32_t h = 0; h < 0x7f7f; ++h) {  // positive finite codes whose successor is finite
        for (const uint32_t sign : {0u, 0x8000u}) {
            const uint32_t code = h | sign;
            const float mid = float_of((code << 16) | 0x8000u);  // exactly halfway to the next code
            const uint32_t even = (h & 1u) ? code + 1 : code;
            ASSERT_EQ(f32_to_bf16(mid), even) << std::hex << code;
            ASSERT_EQ(f32_to_bf16(float_of((code << 16) | 0x8001u)), code + 1) << std::hex << code;
            ASSERT_EQ(f32_to_bf16(float_of((code << 16) | 0x7fffu)), code) << std::hex << code;
        }
    }
}

TEST(Bf16, RelativeErrorAtMostTwoToMinus8) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-120, 120);
    for (int i = 0; i < 100000; ++i) {
        const float f = std::ldexp(mantissa(rng), exponent(rng));
        if (std::fabs(f) < std::numeric_limits<float>::min()) continue;  // subnormals have fewer bits
        const float back = bf16_to_f32(f32_to_bf16(f));
        ASSERT_LE(std::fabs(static_cast<double>(back) - f), std::ldexp(std::fabs(static_cast<double>(f)), -8))
            << f;
    }
}

TEST(Bf16, InfNanAndOverflow) {
    EXPECT_EQ(f32_to_bf16(kInf), 0x7f80);
    EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
    EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf, as IEEE does
    // A NaN whose payload sits only in the low 16 bits must not become inf; it comes out quiet.
    for (const uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffbfffffu, 0x7f80ffffu}) {
        const uint16_t h = f32_to_bf16(float_of(nan));
        EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << nan;
        EXPECT_EQ(h & 0x0040, 0x0040) << "quiet bit, " << std::hex << nan;
        EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << "sign, " << std::hex << nan;
    }
    EXPECT_TRUE(std::isinf(bf16_to_f32(0x7f80)));
}

// ---- f16 ----

// IEEE binary16 by formula, in double.
double f16_formula(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double mag;
    if (exp == 0x1f)
        mag = mant ? kNaN : std::numeric_limits<double>::infinity();
    else if (exp == 0)
        mag = mant / 1024.0 * std::pow(2.0, -14);
    else
        mag = (1.0 + mant / 1024.0) * std::pow(2.0, exp - 15);
    return sign ? -mag : mag;
}

TEST(F16, DecodeEveryCode) {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const double want = f16_formula(static_cast<uint16_t>(h));
        const float got = f16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << std::hex << h;
        } else {
            EXPECT_EQ(static_cast<double>(got), want) << std::hex << h;
            EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
        }
    }
}

TEST(F16, EncodeRoundTripsEveryNonNanCode) {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const float f = f16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
    }
}

TEST(F16, MidpointsRoundToEven) {
    // Consecutive finite codes, subnormals included; the midpoint of two f16 values is exact in f32.
    for (uint32_t h = 0; h < 0x7bff; ++h) {
        for (const uint32_t sign : {0u, 0x8000u}) {
            const auto code = static_cast<uint16_t>(h | sign);
            const double a = f16_formula(code), b = f16_formula(static_cast<uint16_t>(code + 1));
            const auto mid = static_cast<float>((a + b) / 2);
            ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
            const uint16_t even = (h & 1u) ? code + 1 : code;
            ASSERT_EQ(f32_to_f16(mid), even) << std::hex << code;
            const float above = std::nextafter(mid, sign ? -kInf : kInf);
            const float below = std::nextafter(mid, 0.0f);
            ASSERT_EQ(f32_to_f16(above), code + 1) << std::hex << code;
            ASSERT_EQ(f32_to_f16(below), code) << std::hex << code;
        }
    }
}

TEST(F16, SubnormalsOverflowInfNan) {
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);    // tie with 0: even
    EXPECT_EQ(f32_to_f16(std::ldexp(1.001f, -25)), 0x0001);  // above the tie
    EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);    // tie between 1 and 2: even
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // rounds up to normal
    EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -24)), 0x8001);
    EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
    EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie between 65504 and 65536 (= inf): even, so inf
    EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
    EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
    EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
    for (const uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffffffffu}) {
        const uint16_t h = f32_to_f16(float_of(nan));
        EXPECT_EQ(h & 0x7c00, 0x7c00) << std::hex << nan;
        EXPECT_NE(h & 0x03ff, 0) << "a NaN must not become inf, " << std::hex << nan;
        EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000);
    }
    EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) {
    return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

// The AVX kernels convert f16 with F16C; the scalar path must give the same bits, NaNs included.
TEST(F16, MatchesTheF16cInstructionBitForBit) {
    // simd_detected() >= avx2 includes F16C.
    if (simd_detected() < Simd::avx2) GTEST_SKIP() << "CPU lacks F16C: hardware comparison NOT run";
    for (uint32_t h = 0; h <= 0xffff; ++h)
        ASSERT_EQ(bits_of(f16_to_f32(static_cast<uint16_t>(h))),
                  bits_of(hw_f16_to_f32(static_cast<uint16_t>(h))))
            << std::hex << h;
    std::mt19937 rng(2);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int i = 0; i < 1000000; ++i) {
        const float f = float_of(any_bits(rng));
        ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << std::hex << bits_of(f);
    }
    // Every f32 in the f16 range's neighbourhood, at a stride that hits all exponents.
    for (uint32_t b = 0x30000000u; b < 0x48000000u; b += 0x101u) {
        for (const uint32_t sign : {0u, 0x80000000u}) {
            const float f = float_of(b | sign);
            ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << std::hex << (b | sign);
        }
    }
}
#endif

// ---- fp8 e4m3fn (OCP) ----

// OCP 8-bit FP spec, E4M3: bias 7, subnormals (e = 0) m/8 * 2^-6, S.1111.111 is NaN, no infinities.
double e4m3_formula(uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 0x7;
    if (exp == 0xf && mant == 0x7) return kNaN;
    const double mag =
        exp == 0 ? (mant / 8.0) * std::pow(2.0, -6) : (1.0 + mant / 8.0) * std::pow(2.0, exp - 7);
    return sign ? -mag : mag;
}

TEST(Fp8E4m3, DecodeEveryByteMatchesTheOcpFormula) {
    for (int b = 0; b < 256; ++b) {
        const double want = e4m3_formula(static_cast<uint8_t>(b));
        const float got = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << b;
        } else {
            EXPECT_EQ(static_cast<double>(got), want) << b;
            EXPECT_EQ(std::signbit(got), b >= 0x80) << b;
        }
    }
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
    EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0x78), 256.0f);                // S.1111.000 is a number, not inf
    EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
    EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
    EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
}

TEST(Fp8E4m3, EncodeRoundTripsEveryNonNanByte) {
    for (int b = 0; b < 256; ++b) {
        const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
        if (std::isnan(f)) continue;
        EXPECT_EQ(f32_to_fp8_e4m3(f), b) << b;
    }
}

TEST(Fp8E4m3, MidpointsRoundToEven) {
    for (int b = 0; b < 0x7e; ++b) {
        for (const int sign : {0, 0x80}) {
            const auto code = static_cast<uint8_t>(b | sign);
            const double lo = e4m3_formula(code), hi = e4m3_formula(static_cast<uint8_t>(code + 1));
            const auto mid = static_cast<float>((lo + hi) / 2);
            const uint8_t even = (b & 1) ? code + 1 : code;
            EXPECT_EQ(f32_to_fp8_e4m3(mid), even) << b;
            EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, sign ? -kInf : kInf)), code + 1) << b;
            EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 0.0f)), code) << b;
        }
    }
}

TEST(Fp8E4m3, EncodeIsNearestOverRandomValues) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-12, 9);
    for (int i = 0; i < 20000; ++i) {
        const float f = std::ldexp(mantissa(rng), exponent(rng));
        const double got = e4m3_formula(f32_to_fp8_e4m3(f));
        const double target = std::fmin(std::fmax(f, -448.0), 448.0);  // saturation is part of the contract
        for (int b = 0; b < 256; ++b) {
            const double v = e4m3_formula(static_cast<uint8_t>(b));
            if (!std::isnan(v)) {
                ASSERT_LE(std::fabs(got - target), std::fabs(v - target)) << f << " vs " << b;
            }
        }
    }
}

TEST(Fp8E4m3, EncodeSaturatesAndKeepsNan) {
    for (const float big : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, std::numeric_limits<float>::max(), kInf}) {
        EXPECT_EQ(f32_to_fp8_e4m3(big), 0x7e) << big;
        EXPECT_EQ(f32_to_fp8_e4m3(-big), 0xfe) << big;
    }
    EXPECT_EQ(f32_to_fp8_e4m3(std::nan("")) & 0x7f, 0x7f);
    EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0xff);
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie between 0 and 2^-9: even
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.01f, -10)), 0x01);
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);   // tie between 1 and 2 (x 2^-9): even
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(15.0f, -10)), 0x08);  // tie between 7 and 8 (x 2^-9): 8 = 2^-6
    EXPECT_EQ(f32_to_fp8_e4m3(1e-30f), 0x00);
    EXPECT_EQ(f32_to_fp8_e4m3(-1e-30f), 0x80);
    EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
}

// ---- e2m1 and e8m0 (OCP MX) ----

TEST(E2m1, EveryCode) {
    const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int code = 0; code < 16; ++code) {
        const float want = code < 8 ? magnitudes[code] : -magnitudes[code - 8];
        EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(code)), want) << code;
        EXPECT_EQ(std::signbit(e2m1_to_f32(static_cast<uint8_t>(code))), code >= 8) << code;
        // Independent formula: bit3 sign, bits2-1 exponent (bias 1), bit0 mantissa; exponent 0 = 0.5 * m.
        const int e = (code >> 1) & 3, m = code & 1;
        const double mag = e == 0 ? 0.5 * m : (1.0 + 0.5 * m) * std::pow(2.0, e - 1);
        EXPECT_EQ(std::fabs(e2m1_to_f32(static_cast<uint8_t>(code))), mag) << code;
    }
}

TEST(E8m0, ExtremesAndEveryCode) {
    const float two_pow_minus_127 = e8m0_to_f32(0);
    EXPECT_EQ(static_cast<double>(two_pow_minus_127), std::ldexp(1.0, -127));
    EXPECT_EQ(std::fpclassify(two_pow_minus_127), FP_SUBNORMAL);  // exact although a f32 subnormal
    EXPECT_EQ(static_cast<double>(e8m0_to_f32(1)), std::ldexp(1.0, -126));
    EXPECT_EQ(e8m0_to_f32(127), 1.0f);
    EXPECT_EQ(e8m0_to_f32(128), 2.0f);
    EXPECT_EQ(static_cast<double>(e8m0_to_f32(254)), std::ldexp(1.0, 127));
    EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
    for (int e = 0; e < 255; ++e)
        EXPECT_EQ(static_cast<double>(e8m0_to_f32(static_cast<uint8_t>(e))), std::ldexp(1.0, e - 127)) << e;
}

// The kernels build the e8m0 scale from bits; it must be the same float as the ldexpf version.
TEST(E8m0, KernelBitsMatchDecode) {
    for (int e = 0; e < 256; ++e) {
        const uint32_t want = bits_of(e8m0_to_f32(static_cast<uint8_t>(e)));
        EXPECT_EQ(formats_internal::e8m0_bits(static_cast<uint8_t>(e)), want) << e;
        EXPECT_EQ(bits_of(formats_internal::kE8m0Values[e]), want) << e;
    }
}

}  // namespace
}  // namespace coli
