// The weight formats' constants and the exact values of their codes and scales (layouts in
// src/formats/format.h), with no buffer access: weight.glsl reads weights element by element with them,
// codec.glsl decodes whole words for the GEMV.
const uint kF32 = 0u, kBf16 = 1u, kF16 = 2u, kInt8 = 3u, kInt4 = 4u, kMxfp4 = 5u, kFp8 = 6u;  // coli::Format
const uint kInt4Group = 64u;  // int4_g64: elements per scale
const uint kMxBlock = 32u;    // mxfp4: elements per e8m0 scale
const uint kFp8Block = 128u;  // fp8_e4m3_block: scale block edge
const int kInt4Zero = 8;      // int4_g64 stores q + 8
const float kF16Subnormal = 5.9604644775390625e-8;  // 2^-24: f16 subnormal step
const float kFp8Subnormal = 0.001953125;            // 2^-9: e4m3 subnormal step
const float kE2m1[16] = float[16](0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,  //
                                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0);

uint byte_of(uint word, uint i) {
    return bitfieldExtract(word, int((i & 3u) * 8u), 8);
}

float bf16_value(uint h) {
    return uintBitsToFloat(h << 16u);
}

// Exact, subnormals included (unpackHalf2x16 may flush them).
float f16_value(uint h) {
    const uint sign = (h & 0x8000u) << 16u, e = (h >> 10u) & 31u, m = h & 1023u;
    if (e == 0u) return uintBitsToFloat(sign | floatBitsToUint(float(m) * kF16Subnormal));
    if (e == 31u) return uintBitsToFloat(sign | 0x7f800000u | (m << 13u));
    return uintBitsToFloat(sign | ((e + 112u) << 23u) | (m << 13u));
}

float int8_value(uint b) {
    return float(bitfieldExtract(int(b), 0, 8));
}

// OCP e4m3fn: no infinities, S.1111.111 is NaN.
float fp8_value(uint b) {
    if ((b & 0x7fu) == 0x7fu) return kNan;
    const uint sign = (b & 0x80u) << 24u, e = (b >> 3u) & 15u, m = b & 7u;
    if (e == 0u) return uintBitsToFloat(sign | floatBitsToUint(float(m) * kFp8Subnormal));
    return uintBitsToFloat(sign | ((e + 120u) << 23u) | (m << 20u));
}

const uint kF32TwoPowMinus127 = 0x00400000u;  // f32 bits of 2^-127 (a subnormal), bit 22

// 2^(e - 127) for a byte e; 0xff is NaN. Without compares: e << 23 is right for 1..254, 0 for 0 (which the
// maximum with 2^-127's bits lifts) and infinity for 0xff, which bit 22 (bit 8 of e + 1, set for 0xff
// alone) makes the quiet NaN.
float e8m0_value(uint e) {
    return uintBitsToFloat(max(e << 23u, kF32TwoPowMinus127) | (((e + 1u) << 14u) & kF32TwoPowMinus127));
}
