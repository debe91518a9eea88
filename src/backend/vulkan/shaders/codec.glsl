// Fast decoding of 16-byte chunks of codes for the GEMV (as src/backend/cuda/codec.cuh does for CUDA). The
// GEMV reads weights at memory speed only when decoding costs a few instructions per element, so no code
// goes through an integer-to-float conversion (a quarter of the FMA rate on many GPUs) or a branch:
//   int8, int4  the code's bits are placed into the mantissa of 2^23 ("magic number") and one FMA removes
//               2^23, the code's offset and the bits' place value, exactly.
//   f16         unpackHalf2x16, two codes at a time.
//   fp8 e4m3    the byte's bits are placed into an f16 (exponent and mantissa fields line up, the exponent
//               bias differs by 8): unpackHalf2x16 reads the value times 2^-8, subnormals included.
//   mxfp4       the e2m1 bits are placed into f16 fields: the value times 2^-14.
// kPreScale undoes those powers of two once per chunk. Before its scale, every value equals the CPU's.
// The including shader declares the specialization constant kFormat.
#include "format.glsl"

// Elements per 32-bit word of codes.
const uint kWordElems = kFormat == kF32                          ? 1u
                        : (kFormat == kBf16 || kFormat == kF16) ? 2u
                        : (kFormat == kInt8 || kFormat == kFp8) ? 4u
                                                                : 8u;
const uint kChunkElems = 4u * kWordElems;  // elements of a 16-byte chunk
// A chunk is decoded in groups of whole words giving 4 or 8 values (one or two vec4 of x).
const uint kGroupWords = kWordElems >= 4u ? 1u : 4u / kWordElems;
const uint kGroupElems = kGroupWords * kWordElems;
const uint kGroups = 4u / kGroupWords;  // groups per chunk
const uint kMaxGroupElems = 8u;
const uint kMaxChunkGroups = 4u;
// Whether a scale covers each chunk (applied to the chunk's partial sums); int8's row scale multiplies the
// row's sum instead.
const bool kChunkScaled = kFormat == kInt4 || kFormat == kMxfp4 || kFormat == kFp8;
const float kPreScale = kFormat == kMxfp4 ? 16384.0 : kFormat == kFp8 ? 256.0 : 1.0;  // 2^14, 2^8

const uint kMagic = 0x4b000000u;  // f32 bits of 2^23: integers below 2^23 fit its mantissa
const float kTwo23 = 8388608.0;
const float kInt8Zero = 128.0;                // an int8 code with its sign bit flipped is b + 128
const uint kE2m1PairBits = 0x8e008e00u;       // f16 bits 9..11 and 15 of both halves
const uint kE2m1MergeMag = 0x0e0e0e0eu;       // e2m1_merge: the bits taken from the magnitudes
const uint kHalfSignBits = 0x80008000u;       // f16 sign bits of both halves
const uint kFp8MagBits = 0x3f803f80u;         // f16 bits 7..13 of both halves
const uint kFp8NanLow = 0x7f7f7f7fu;          // e4m3 bytes without their sign: 0x7f is NaN
const uint kFp8NanStep = 0x01010101u;         // + 1 per byte carries into bit 7 exactly for 0x7f
const uint kByteHighBits = 0x80808080u;

// Byte k (0 or 1, inside the mantissa) of u as the signed int8 it stores.
float int8_at(uint u, uint k) {
    const float step = k == 0u ? 1.0 : 1.0 / 256.0;  // the byte's place value, inverted
    const float m = uintBitsToFloat((u & (0xffu << (8u * k))) ^ (kMagic | (0x80u << (8u * k))));
    return fma(m, step, -(kTwo23 * step + kInt8Zero));
}

// Nibble k (0..3, inside the mantissa) of u minus the int4 zero point.
const float kNibbleStep[4] = float[4](1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);  // 16^-k

float int4_at(uint u, uint k) {
    const float step = kNibbleStep[k];
    const float m = uintBitsToFloat((u & (0xfu << (4u * k))) | kMagic);  // 2^23 + q 16^k
    return fma(m, step, -(kTwo23 * step + float(kInt4Zero)));
}

// A word of e2m1 codes rearranged so that the 4 codes of one nibble parity sit as f16 pairs want them, each
// code's magnitude bits 3 places below its sign: bit by bit, the positions kE2m1MergeMag come from `mag`,
// the rest from `sign` (one instruction where the GPU has a three-input logic op).
uint e2m1_merge(uint mag, uint sign) {
    return (mag & kE2m1MergeMag) | (sign & ~kE2m1MergeMag);
}

// Pair j of u: e2m1 codes j and j + 4 (one per 16-bit half) as f16 values times 2^-14, the magnitude bits
// at f16 bits 9..11 (exponent's low bits and the mantissa's top bit, so that normal and subnormal codes
// alike read right) and the sign at bit 15. The even codes come from u shifted 1 (magnitudes) and 4 (signs)
// left, placing pair 2 and, 8 bits further, pair 0; the odd codes from u shifted 3 right and not at all:
// pairs 3 and 1. Fewer shifts than placing each code's magnitude and sign on their own.
void e2m1_pairs(uint u, out vec2 p[4]) {
    const uint even = e2m1_merge(u << 1u, u << 4u), odd = e2m1_merge(u >> 3u, u);
    p[0] = unpackHalf2x16((even << 8u) & kE2m1PairBits);
    p[1] = unpackHalf2x16((odd << 8u) & kE2m1PairBits);
    p[2] = unpackHalf2x16(even & kE2m1PairBits);
    p[3] = unpackHalf2x16(odd & kE2m1PairBits);
}

// Group g of chunk q: v[0 .. kGroupElems) are its elements in column order. No loops: the caller's unrolled
// loops may not hold one (see gemv.comp).
void group_decode(uvec4 q, uint g, out float v[kMaxGroupElems]) {
    if (kFormat == kF32) {
        v[0] = uintBitsToFloat(q.x);
        v[1] = uintBitsToFloat(q.y);
        v[2] = uintBitsToFloat(q.z);
        v[3] = uintBitsToFloat(q.w);
    } else if (kFormat == kBf16) {
        const uint u0 = q[2u * g], u1 = q[2u * g + 1u];
        v[0] = uintBitsToFloat(u0 << 16u);
        v[1] = uintBitsToFloat(u0 & 0xffff0000u);
        v[2] = uintBitsToFloat(u1 << 16u);
        v[3] = uintBitsToFloat(u1 & 0xffff0000u);
    } else if (kFormat == kF16) {
        const vec2 h0 = unpackHalf2x16(q[2u * g]), h1 = unpackHalf2x16(q[2u * g + 1u]);
        v[0] = h0.x;
        v[1] = h0.y;
        v[2] = h1.x;
        v[3] = h1.y;
    } else if (kFormat == kInt8) {
        const uint u = q[g], hi = u >> 16u;
        v[0] = int8_at(u, 0u);
        v[1] = int8_at(u, 1u);
        v[2] = int8_at(hi, 0u);
        v[3] = int8_at(hi, 1u);
    } else if (kFormat == kFp8) {
        // Bytes 0 and 2 share one shift into f16 halves, bytes 1 and 3 another.
        const uint u = q[g];
        const vec2 even = unpackHalf2x16(((u << 7u) & kFp8MagBits) | ((u << 8u) & kHalfSignBits));
        const vec2 odd = unpackHalf2x16(((u >> 1u) & kFp8MagBits) | (u & kHalfSignBits));
        v[0] = even.x;
        v[1] = odd.x;
        v[2] = even.y;
        v[3] = odd.y;
    } else if (kFormat == kInt4) {
        const uint u = q[g], hi = u >> 16u;
        v[0] = int4_at(u, 0u);
        v[1] = int4_at(u, 1u);
        v[2] = int4_at(u, 2u);
        v[3] = int4_at(u, 3u);
        v[4] = int4_at(hi, 0u);
        v[5] = int4_at(hi, 1u);
        v[6] = int4_at(hi, 2u);
        v[7] = int4_at(hi, 3u);
    } else {
        vec2 p[4];
        e2m1_pairs(q[g], p);
        v[0] = p[0].x;
        v[1] = p[1].x;
        v[2] = p[2].x;
        v[3] = p[3].x;
        v[4] = p[0].y;
        v[5] = p[1].y;
        v[6] = p[2].y;
        v[7] = p[3].y;
    }
}

// Bit 7 of a byte is set where chunk q holds an e4m3 NaN code (fp8 only; ORed over chunks).
uint fp8_nan_bits(uvec4 q) {
    return ((q.x & kFp8NanLow) + kFp8NanStep) | ((q.y & kFp8NanLow) + kFp8NanStep) |
           ((q.z & kFp8NanLow) + kFp8NanStep) | ((q.w & kFp8NanLow) + kFp8NanStep);
}
