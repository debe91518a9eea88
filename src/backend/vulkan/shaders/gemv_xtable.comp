#version 450
// x laid out for the cooperative-matrix GEMV (gemv_coop.comp): for each x row of the jobs and each
// superblock (SB) of kSbCols columns, its columns as f16 pairs (hi, lo), and the power of two that scales
// the SB. One workgroup per (SB, row), one invocation per column.
//
// The SB is scaled by the power of two 2^e that puts its largest |x| in [2^14, 2^15), so that x = hi + lo
// in f16 to ~2^-22 of that largest |x| (hi keeps 11 significant bits of the scaled value, lo the rest
// rounded; values below f16's normal range, 2^-28 of the largest, may flush, which is below that error).
// The pairs follow the order in which gemv_coop.comp stores decoded weights (its k order): in each 32-bit
// word of codes, elements 0, 4, 1, 5, 2, 6, 3, 7 (the f16 pairs of codec.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x = 128) in;
const uint kSbCols = 128u;      // = gemv_coop.comp's kSbCols: one invocation per column
const uint kMaxSubgroups = 4u;  // 128 invocations in subgroups of 32 or more
const int kTopExponent = 15;    // the SB's largest |x| is scaled below 2^15
const float kF16MinNormal = 6.103515625e-05;  // 2^-14: below it hi is 0 and lo may flush
const uint kF16Significand = 0xffffe000u;     // f32 bits that an f16 keeps: sign, exponent, 10 of mantissa
layout(constant_id = 0) const bool kGatherX = false;  // x rows through `xrows` (the routed tokens)

#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };          // [x rows, cols]
layout(std430, binding = 1) writeonly buffer Table { uint pairs[]; };  // [rows, SBs, kSbCols] in k order
layout(std430, binding = 2) writeonly buffer Inverse { float inv[]; };  // [rows, SBs]: 2^-e
layout(std430, binding = 3) readonly buffer XRows { int xrows[]; };    // kGatherX: x row of each table row
layout(push_constant) uniform Push {
    uint cols;  // of x; a multiple of kSbCols
} pc;

shared float sub_max[kMaxSubgroups];

void main() {
    const uint col = gl_LocalInvocationID.x, sb = gl_WorkGroupID.x, row = gl_WorkGroupID.y;
    const uint sbs = pc.cols / kSbCols;
    const uint src = kGatherX ? uint(xrows[row]) : row;
    const float v = x[src * pc.cols + sb * kSbCols + col];

    float m = subgroupMax(abs(v));
    if (subgroupElect()) sub_max[gl_SubgroupID] = m;
    barrier();
    m = sub_max[0];
    for (uint s = 1u; s < gl_NumSubgroups; ++s) m = max(m, sub_max[s]);
    int top = 0;
    frexp(m, top);  // m < 2^top
    const int e = (m > 0.0 && !isinf(m) && !isnan(m)) ? kTopExponent - top : 0;
    if (col == 0u) inv[row * sbs + sb] = ldexp(1.0, -e);

    const float xs = ldexp(v, e);
    const float hi = abs(xs) < kF16MinNormal ? 0.0 : uintBitsToFloat(floatBitsToUint(xs) & kF16Significand);
    const uint pair = packHalf2x16(vec2(hi, xs - hi));

    // The place of this column: word w of the SB, element el of the word, at 2 (el % 4) + el / 4.
    const uint w = col / 8u, el = col % 8u;
    pairs[(row * sbs + sb) * kSbCols + 8u * w + 2u * (el % 4u) + el / 4u] = pair;
}
