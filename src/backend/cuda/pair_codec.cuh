// Decoding of 32-bit words of codes into exact f16 pairs (f16x2 registers), the A operands of the tensor-core
// GEMV (gemv_mma.cu). Every f16 equals the code's value before its scale (the CPU's formats/decode.cpp),
// times kPreScale^-1, a power of two:
//   int4    nibble bits ORed into the mantissa of the f16 1024 ("magic number") give 1024 + q; one f16x2
//           add removes 1024 + the zero point, exactly. The odd nibbles sit 4 bits higher (1024 + 16 q): one
//           f16x2 FMA with 1/16 removes the shift and the offset, exactly.
//   mxfp4   the e2m1 magnitude bits go to f16 bits 9..11 and the sign to bit 15: the value times 2^-14.
//   fp8     the hardware's e4m3x2 -> f16x2 conversion (sm_89+).
// A pair j of a word holds the elements pair_col(j, 0) (low half) and pair_col(j, 1) (high half) of the word;
// the GEMV's B operand (x) is laid out in the same order.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/decode.cuh"

namespace coli::cuda {

// Constants of the pair decoders held in registers: a LOP3 takes one immediate operand, so `(u & mask) |
// magic` costs one instruction only when the magic is in a register (ptxas folds every constant it sees, so
// the kernels take PairConsts as a parameter).
struct PairConsts {
    uint32_t f16_magic;  // 1024 in both f16 halves (int4)
    uint32_t e2m1_mag;   // f16 bits 9..11 of both halves (mxfp4)
};
inline constexpr PairConsts kPairConsts = {0x64006400u, 0x0e000e00u};

inline constexpr uint32_t kF16x2Minus1032 = 0xe408e408u;  // -(1024 + int4 zero point 8), both halves
inline constexpr uint32_t kF16x2Sixteenth = 0x2c002c00u;  // 1/16, both halves
inline constexpr uint32_t kF16x2Minus72 = 0xd480d480u;    // -(1024 / 16 + 8), both halves
inline constexpr uint32_t kE2m1SignPair = 0x80008000u;    // f16 sign bits of both halves

__device__ __forceinline__ uint32_t hadd2_bits(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

__device__ __forceinline__ uint32_t hfma2_bits(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// One format's pair decoding. kWordElems: elements per 32-bit word; kPairsPerWord = kWordElems / 2;
// kPreScale: multiplies a dot product of decoded pairs (undoes the decoder's power of two).
template <Format F>
struct PairCodec;

template <>
struct PairCodec<Format::int4_g64> {
    static constexpr int kWordElems = 8;
    static constexpr int kPairsPerWord = 4;
    static constexpr float kPreScale = 1.0f;
    // Pairs (nibble j, nibble j + 4): nibbles 0, 1 and their partners lie in the f16 mantissas as they are;
    // nibbles 2, 3 after one shift of the word.
    __host__ __device__ static constexpr int pair_col(int j, int half) { return j + 4 * half; }
    __device__ static void word_pairs(uint32_t u, const PairConsts& k, uint32_t (&p)[kPairsPerWord]) {
        const uint32_t hi = u >> 8;
        p[0] = hadd2_bits((u & 0x000f000fu) | k.f16_magic, kF16x2Minus1032);
        p[1] = hfma2_bits((u & 0x00f000f0u) | k.f16_magic, kF16x2Sixteenth, kF16x2Minus72);
        p[2] = hadd2_bits((hi & 0x000f000fu) | k.f16_magic, kF16x2Minus1032);
        p[3] = hfma2_bits((hi & 0x00f000f0u) | k.f16_magic, kF16x2Sixteenth, kF16x2Minus72);
    }
};

// e2m1 codes J and J + 4 of u (one per 16-bit half): magnitude bits to f16 bits 9..11, sign to bit 15. Normal
// and subnormal codes alike read as the e2m1 value times 2^-14.
template <int J>
__device__ __forceinline__ uint32_t e2m1_f16_pair(uint32_t u, const PairConsts& k) {
    constexpr int kMagShift = 9 - 4 * J, kSignShift = 12 - 4 * J;
    const uint32_t mag = kMagShift >= 0 ? u << kMagShift : u >> -kMagShift;
    return (mag & k.e2m1_mag) | ((u << kSignShift) & kE2m1SignPair);
}

template <>
struct PairCodec<Format::mxfp4> {
    static constexpr int kWordElems = 8;
    static constexpr int kPairsPerWord = 4;
    static constexpr float kPreScale = 0x1p14f;  // e2m1_f16_pair's 2^-14
    __host__ __device__ static constexpr int pair_col(int j, int half) { return j + 4 * half; }
    __device__ static void word_pairs(uint32_t u, const PairConsts& k, uint32_t (&p)[kPairsPerWord]) {
        p[0] = e2m1_f16_pair<0>(u, k);
        p[1] = e2m1_f16_pair<1>(u, k);
        p[2] = e2m1_f16_pair<2>(u, k);
        p[3] = e2m1_f16_pair<3>(u, k);
    }
};

template <>
struct PairCodec<Format::fp8_e4m3_block> {
    static constexpr int kWordElems = 4;
    static constexpr int kPairsPerWord = 2;
    static constexpr float kPreScale = 1.0f;
    // Pairs (byte 0, byte 1) and (byte 2, byte 3): each 16-bit half converts as a unit.
    __host__ __device__ static constexpr int pair_col(int j, int half) { return 2 * j + half; }
    __device__ static uint32_t fp8x2_f16x2(uint32_t two) {
        const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
        return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
    }
    __device__ static void word_pairs(uint32_t u, const PairConsts&, uint32_t (&p)[kPairsPerWord]) {
        p[0] = fp8x2_f16x2(u & 0xffffu);
        p[1] = fp8x2_f16x2(u >> 16);
    }
};

}  // namespace coli::cuda
