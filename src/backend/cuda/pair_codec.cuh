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
    uint32_t f16_magic;   // 1024 in both f16 halves (int4)
    uint32_t e2m1_merge;  // 0x0e0e0e0e: e2m1_merge's magnitude positions (mxfp4)
};
inline constexpr PairConsts kPairConsts = {0x64006400u, 0x0e0e0e0eu};

inline constexpr uint32_t kF16x2Minus1032 = 0xe408e408u;  // -(1024 + int4 zero point 8), both halves
inline constexpr uint32_t kF16x2Sixteenth = 0x2c002c00u;  // 1/16, both halves
inline constexpr uint32_t kF16x2Minus72 = 0xd480d480u;    // -(1024 / 16 + 8), both halves

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

// The bits of a word of e2m1 codes rearranged so that 4 of its 8 codes (one parity of nibble index) sit as
// f16 pairs want them: each code's magnitude bits 3 below the f16 magnitude field's position, each sign 4
// above the magnitude (f16 bits 9..11 and 15 of a half, or 8 bits lower); between them, copies of other bits
// that the pair's mask drops. `mag` holds the magnitudes at their place, `sign` the signs: bit by bit, the
// magnitude positions k.e2m1_merge come from mag, the rest from sign. One LOP3 with the positions in a
// register: with them as a constant, ptxas splits it in two (it knows which bits of a shifted word are zero).
__device__ __forceinline__ uint32_t e2m1_merge(uint32_t mag, uint32_t sign, const PairConsts& k) {
    return (mag & k.e2m1_merge) | (sign & ~k.e2m1_merge);
}

inline constexpr uint32_t kE2m1PairBits = 0x8e008e00u;  // sign and magnitude bits of an f16 pair (mxfp4)

template <>
struct PairCodec<Format::mxfp4> {
    static constexpr int kWordElems = 8;
    static constexpr int kPairsPerWord = 4;
    static constexpr float kPreScale = 0x1p14f;  // the pairs' 2^-14
    __host__ __device__ static constexpr int pair_col(int j, int half) { return j + 4 * half; }
    // Pair j holds codes j and j + 4 (16 bits apart, so that one shift places both): each code's magnitude
    // bits go to f16 bits 9..11 of its half and its sign to bit 15, so that normal and subnormal codes alike
    // read as the e2m1 value times 2^-14. The even codes merge the word shifted 1 (magnitudes) and 4 (signs)
    // left, which places pair 2 and, shifted 8 more, pair 0; the odd codes the word shifted 3 right and not
    // at all: pairs 3 and 1. 11 instructions per word, where a shift per magnitude and per sign took 15.
    __device__ static void word_pairs(uint32_t u, const PairConsts& k, uint32_t (&p)[kPairsPerWord]) {
        const uint32_t even = e2m1_merge(u << 1, u << 4, k), odd = e2m1_merge(u >> 3, u, k);
        p[0] = (even << 8) & kE2m1PairBits;
        p[1] = (odd << 8) & kE2m1PairBits;
        p[2] = even & kE2m1PairBits;
        p[3] = odd & kE2m1PairBits;
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
