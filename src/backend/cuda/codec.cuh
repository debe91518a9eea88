// Fast decoding of 32-bit words of codes for the GEMV kernels, one Codec per weight format.
//
// The GEMV reads weights at HBM speed only when decoding costs a few instructions per element; the
// integer-to-float conversions of the plain decoders (decode.cuh) run at a quarter of the FMA rate and
// would make the 4- and 8-bit formats compute-bound. So:
//   int8, int4  the code's bits are ORed into the mantissa of 2^23 ("magic number") and one FMA removes
//               2^23, the code's offset and the bits' position, exactly: no conversion instruction.
//   fp8 e4m3    the hardware's e4m3x2 -> f16x2 conversion (sm_89+), then f16 -> f32, both exact.
//   mxfp4       the e2m1 bits are placed into f16 fields (value times 2^-14, exact), then f16 -> f32;
//               kPreScale puts the 2^14 back once per chunk.
// Every decoded value equals the CPU's (formats/decode.cpp) before the chunk's scale is applied.
//
// A LOP3 instruction takes one immediate operand, so `(u & mask) | magic` costs two unless one constant sits
// in a register. ptxas folds every constant it can see, so the kernels take Consts as a parameter.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/decode.cuh"

namespace coli::cuda {

inline constexpr uint32_t kMagic = 0x4b000000u;  // f32 bits of 2^23: integers below 2^23 fit its mantissa
inline constexpr float kTwo23 = 8388608.0f;      // 2^23
inline constexpr int kInt8Zero = 128;            // int8 code with its sign bit flipped: b + 128

// Constants of word_decode held in registers (see above).
struct Consts {
    uint32_t magic;     // kMagic
    uint32_t magic_s0;  // kMagic with the sign bit of byte 0 (int8)
    uint32_t magic_s1;  // kMagic with the sign bit of byte 1 (int8)
    uint32_t e2m1_mag;  // magnitude bits of an f16 pair made from e2m1 codes (mxfp4)
};
inline constexpr uint32_t kE2m1MagBits = 0x0e000e00u;   // f16 bits 9..11 of both halves
inline constexpr uint32_t kE2m1SignBits = 0x80008000u;  // f16 sign bits of both halves

inline constexpr Consts kConsts = {kMagic, kMagic | 0x80u, kMagic | 0x8000u, kE2m1MagBits};

// One format's decoding. kWordElems: elements per 32-bit word; kChunkScale: whether a scale covers each
// 16-byte chunk of codes (applied to the chunk's partial sums); kPreScale: multiplies a chunk's partial
// sums before its scale (undoes an exact power-of-two factor of word_decode).
template <Format F>
struct Codec;

template <>
struct Codec<Format::f32> {
    static constexpr int kWordElems = 1;
    static constexpr bool kChunkScale = false;
    static constexpr float kPreScale = 1.0f;
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) { v[0] = __uint_as_float(u); }
};

template <>
struct Codec<Format::bf16> {
    static constexpr int kWordElems = 2;
    static constexpr bool kChunkScale = false;
    static constexpr float kPreScale = 1.0f;
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) {
        v[0] = __uint_as_float(u << 16);
        v[1] = __uint_as_float(u & 0xffff0000u);
    }
};

template <>
struct Codec<Format::f16> {
    static constexpr int kWordElems = 2;
    static constexpr bool kChunkScale = false;
    static constexpr float kPreScale = 1.0f;
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) {
        __half2_raw raw;
        raw.x = static_cast<unsigned short>(u & 0xffffu);
        raw.y = static_cast<unsigned short>(u >> 16);
        const float2 f = __half22float2(__half2(raw));
        v[0] = f.x;
        v[1] = f.y;
    }
};

// Byte K of u (K < 2, so that its bits stay inside the mantissa) as the signed int8 it stores.
template <int K>
__device__ __forceinline__ float int8_at(uint32_t u, const Consts& k) {
    constexpr uint32_t kMask = 0xffu << (8 * K);
    constexpr float kStep = 1.0f / (1 << (8 * K));  // the byte's place value, inverted
    const uint32_t magic_sign = K == 0 ? k.magic_s0 : k.magic_s1;
    const float m = __uint_as_float((u & kMask) ^ magic_sign);  // 2^23 + (b + 128) 256^K
    return fmaf(m, kStep, -(kTwo23 * kStep + kInt8Zero));
}

template <>
struct Codec<Format::int8_row> {
    static constexpr int kWordElems = 4;
    static constexpr bool kChunkScale = false;  // the row scale multiplies the row's sum
    static constexpr float kPreScale = 1.0f;
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) {
        const uint32_t hi = u >> 16;
        v[0] = int8_at<0>(u, k);
        v[1] = int8_at<1>(u, k);
        v[2] = int8_at<0>(hi, k);
        v[3] = int8_at<1>(hi, k);
    }
};

// Nibble k of u (k < 5, inside the mantissa) minus the int4 zero point.
template <int K>
__device__ __forceinline__ float int4_at(uint32_t u, const Consts& k) {
    constexpr uint32_t kMask = 0xfu << (4 * K);
    constexpr float kStep = 1.0f / (1 << (4 * K));
    const float m = __uint_as_float((u & kMask) | k.magic);  // 2^23 + q 16^K
    return fmaf(m, kStep, -(kTwo23 * kStep + kInt4Zero));
}

template <>
struct Codec<Format::int4_g64> {
    static constexpr int kWordElems = 8;
    static constexpr bool kChunkScale = true;
    static constexpr float kPreScale = 1.0f;
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) {
        const uint32_t hi = u >> 12;  // nibbles 5..7 at 2..4
        v[0] = int4_at<0>(u, k);
        v[1] = int4_at<1>(u, k);
        v[2] = int4_at<2>(u, k);
        v[3] = int4_at<3>(u, k);
        v[4] = int4_at<4>(u, k);
        v[5] = int4_at<2>(hi, k);
        v[6] = int4_at<3>(hi, k);
        v[7] = int4_at<4>(hi, k);
    }
};

// e2m1 codes J and J + 4 of u (one per 16-bit half) as an f16 pair: magnitude bits to f16 bits 9..11, sign
// to bit 15. Normal and subnormal codes alike read as the e2m1 value times 2^-14.
template <int J>
__device__ __forceinline__ float2 e2m1_pair(uint32_t u, const Consts& k) {
    constexpr int kMagShift = 9 - 4 * J, kSignShift = 12 - 4 * J;
    const uint32_t mag = kMagShift >= 0 ? u << kMagShift : u >> -kMagShift;
    const uint32_t bits = (mag & k.e2m1_mag) | ((u << kSignShift) & kE2m1SignBits);
    __half2_raw raw;
    raw.x = static_cast<unsigned short>(bits & 0xffffu);
    raw.y = static_cast<unsigned short>(bits >> 16);
    return __half22float2(__half2(raw));
}

template <>
struct Codec<Format::mxfp4> {
    static constexpr int kWordElems = 8;
    static constexpr bool kChunkScale = true;
    static constexpr float kPreScale = 0x1p14f;  // e2m1_pair's 2^-14
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) {
        const float2 p0 = e2m1_pair<0>(u, k), p1 = e2m1_pair<1>(u, k), p2 = e2m1_pair<2>(u, k),
                     p3 = e2m1_pair<3>(u, k);
        v[0] = p0.x;
        v[4] = p0.y;
        v[1] = p1.x;
        v[5] = p1.y;
        v[2] = p2.x;
        v[6] = p2.y;
        v[3] = p3.x;
        v[7] = p3.y;
    }
};

template <>
struct Codec<Format::fp8_e4m3_block> {
    static constexpr int kWordElems = 4;
    static constexpr bool kChunkScale = true;
    static constexpr float kPreScale = 1.0f;
    __device__ static void word_decode(uint32_t u, const Consts& k, float* v) {
        const float2 lo = __half22float2(
            __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u & 0xffffu), __NV_E4M3)));
        const float2 hi = __half22float2(
            __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u >> 16), __NV_E4M3)));
        v[0] = lo.x;
        v[1] = lo.y;
        v[2] = hi.x;
        v[3] = hi.y;
    }
};

// The scales of row r (formats with kChunkScale), for chunk_scale.
template <Format F>
__device__ __forceinline__ const void* scale_row(const DeviceWeight& w, int64_t r) {
    if constexpr (F == Format::int4_g64) {
        return static_cast<const float*>(w.scales) + r * (w.cols / kInt4Group);
    } else if constexpr (F == Format::mxfp4) {
        return static_cast<const uint8_t*>(w.scales) + r * (w.cols / kMxBlock);
    } else {
        return static_cast<const float*>(w.scales) + (r / kFp8Block) * ((w.cols + kFp8Block - 1) / kFp8Block);
    }
}

// The scale of 16-byte chunk `chunk` of a row, from its scale_row.
template <Format F>
__device__ __forceinline__ float chunk_scale(const void* row, int64_t chunk) {
    constexpr int kElems = 4 * Codec<F>::kWordElems;
    if constexpr (F == Format::int4_g64) {
        return static_cast<const float*>(row)[chunk / (kInt4Group / kElems)];
    } else if constexpr (F == Format::mxfp4) {
        static_assert(kMxBlock == kElems, "one e8m0 scale per chunk");
        return e8m0_value(static_cast<const uint8_t*>(row)[chunk]);
    } else {
        return static_cast<const float*>(row)[chunk / (kFp8Block / kElems)];
    }
}

}  // namespace coli::cuda
