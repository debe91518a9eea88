// Device-side decoding of every weight format (layouts in formats/format.h). Each value equals what
// weight_decode_row gives on the CPU: the code's exact value, times its scale as one f32 multiply.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels.h"

namespace coli::cuda {

inline constexpr int kWarp = 32;                    // threads per warp
inline constexpr unsigned kFullMask = 0xffffffffu;  // all lanes of a warp
inline constexpr int kInt4Zero = 8;                 // int4_g64 stores q + 8
inline constexpr uint32_t kE8m0Nan = 0xff;          // e8m0 NaN code
inline constexpr uint32_t kF32QuietNan = 0x7fc00000u;
inline constexpr uint32_t kF32TwoPowMinus127 = 0x00400000u;  // e8m0 code 0: the f32 subnormal 2^-127
inline constexpr float kE2m1Rescale = 0x1p126f;  // e2m1 magnitude bits << 22 as f32, times this = the value
inline constexpr float kFp8Rescale = 0x1p120f;   // fp8 bits placed as below, times this = the value
inline constexpr int kFp8Shift = 20;  // sign-extended byte << 20 puts the 7 magnitude bits at 20-26
inline constexpr uint32_t kFp8KeepBits = 0x87f00000u;  // sign and magnitude bits after the shift
inline constexpr uint32_t kFp8NanAbs = 0x7f;           // S.1111.111 is NaN in e4m3fn

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

__device__ __forceinline__ float bf16_value(uint32_t h) {
    return __uint_as_float(h << 16);
}
__device__ __forceinline__ float f16_value(uint32_t h) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

// 2^(e-127) for a code e < 256; e = 0 is the subnormal 2^-127, 0xff NaN (as e8m0_to_f32). e << 23 is
// 2^(e-127) for codes 1..254, 0 for code 0 (which the maximum with 2^-127's bits lifts) and infinity for
// 0xff, which becomes the quiet NaN with bit 22: bit 8 of e + 1, set for 0xff alone (no compares and
// selects).
__device__ __forceinline__ float e8m0_value(uint32_t e) {
    static_assert(kF32QuietNan == (kE8m0Nan << 23 | kF32TwoPowMinus127), "0xff: infinity's bits + bit 22");
    return __uint_as_float(max(e << 23, kF32TwoPowMinus127) | (((e + 1) << 14) & kF32TwoPowMinus127));
}

// e2m1 code (4 bits: sign, 2 exponent, 1 mantissa): the magnitude bits shifted to the top of a f32 mantissa
// read 2^(e-127)(1 + m/2) (normal) or m 2^-127 (subnormal); times 2^126 both are the e2m1 value, exactly.
__device__ __forceinline__ float e2m1_value(uint32_t code) {
    const uint32_t bits = ((code & 7u) << 22) | ((code & 8u) << 28);
    return __uint_as_float(bits) * kE2m1Rescale;
}

// OCP e4m3fn byte to f32 (exact; 0x7f / 0xff are NaN).
__device__ __forceinline__ float fp8_value(uint32_t b) {
    if ((b & kFp8NanAbs) == kFp8NanAbs) return __uint_as_float(kF32QuietNan | ((b & 0x80u) << 24));
    const uint32_t bits =
        (static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(b)) << kFp8Shift)) & kFp8KeepBits;
    return __uint_as_float(bits) * kFp8Rescale;
}

__device__ __forceinline__ float scale_at(const void* scales, int64_t i) {
    return static_cast<const float*>(scales)[i];
}

// Element (r, c) of w, decoded. The generic path: embedding, dequantization, odd shapes.
__device__ __forceinline__ float decode_at(const DeviceWeight& w, int64_t r, int64_t c) {
    const int64_t cols = w.cols;
    switch (w.format) {
        case Format::f32:
            return static_cast<const float*>(w.data)[r * cols + c];
        case Format::bf16:
            return bf16_value(static_cast<const uint16_t*>(w.data)[r * cols + c]);
        case Format::f16:
            return f16_value(static_cast<const uint16_t*>(w.data)[r * cols + c]);
        case Format::int8_row:
            return static_cast<float>(static_cast<const int8_t*>(w.data)[r * cols + c]) *
                   scale_at(w.scales, r);
        case Format::int4_g64: {
            const uint8_t byte = static_cast<const uint8_t*>(w.data)[r * (cols / 2) + c / 2];
            const int nib = (c & 1) ? byte >> 4 : byte & 0xf;
            return static_cast<float>(nib - kInt4Zero) *
                   scale_at(w.scales, r * (cols / kInt4Group) + c / kInt4Group);
        }
        case Format::mxfp4: {
            const uint8_t byte = static_cast<const uint8_t*>(w.data)[r * (cols / 2) + c / 2];
            const uint32_t code = (c & 1) ? byte >> 4 : byte & 0xf;
            const uint8_t e = static_cast<const uint8_t*>(w.scales)[r * (cols / kMxBlock) + c / kMxBlock];
            return e2m1_value(code) * e8m0_value(e);
        }
        case Format::fp8_e4m3_block: {
            const uint8_t b = static_cast<const uint8_t*>(w.data)[r * cols + c];
            const int64_t scale_cols = (cols + kFp8Block - 1) / kFp8Block;
            return fp8_value(b) * scale_at(w.scales, (r / kFp8Block) * scale_cols + c / kFp8Block);
        }
    }
    return 0.0f;
}

// decode_at with the format fixed at compile time: straight-line code, so that the loads of an unrolled loop
// are in flight together instead of each waiting behind the format's branch.
template <Format F>
__device__ __forceinline__ float decode_as(const DeviceWeight& w, int64_t r, int64_t c) {
    DeviceWeight fixed = w;
    fixed.format = F;
    return decode_at(fixed, r, c);
}

// Calls f with the format as a compile-time constant.
template <typename Fn>
void format_dispatch(Format f, Fn&& fn) {
    switch (f) {
        case Format::f32:
            return fn(std::integral_constant<Format, Format::f32>{});
        case Format::bf16:
            return fn(std::integral_constant<Format, Format::bf16>{});
        case Format::f16:
            return fn(std::integral_constant<Format, Format::f16>{});
        case Format::int8_row:
            return fn(std::integral_constant<Format, Format::int8_row>{});
        case Format::int4_g64:
            return fn(std::integral_constant<Format, Format::int4_g64>{});
        case Format::mxfp4:
            return fn(std::integral_constant<Format, Format::mxfp4>{});
        case Format::fp8_e4m3_block:
            return fn(std::integral_constant<Format, Format::fp8_e4m3_block>{});
    }
}

}  // namespace coli::cuda
