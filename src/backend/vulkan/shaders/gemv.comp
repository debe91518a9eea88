#version 450
// Decode GEMV: y[t][r] = dot(x[t], row r of w) for kTokens tokens in one pass over w. One workgroup per
// row; each thread reads whole 16-byte chunks of codes (rows of whole chunks only: the backend sends other
// shapes to the GEMM), decodes them in registers and multiplies with x. Partial sums meet through subgroup
// adds where the device has them (COLI_SUBGROUP=1), else through shared memory.
#extension GL_GOOGLE_include_directive : require
#if COLI_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#include "common.glsl"

const uint kThreads = 128u;
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint kFormat = 0u;
layout(constant_id = 1) const uint kTokens = 1u;  // 1 .. kMaxTokens
const uint kMaxTokens = 8u;                        // = kVulkanGemvMaxTokens

layout(std430, binding = 0) readonly buffer WChunks { uvec4 wchunk[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };       // [kTokens, cols]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };      // [kTokens, rows]
layout(std430, binding = 4) readonly buffer WData { uint wdata[]; };  // the codes again, for weight.glsl
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
} pc;

#include "weight.glsl"

// Elements per 32-bit word of codes.
uint word_elems() {
    if (kFormat == kF32) return 1u;
    if (kFormat == kBf16 || kFormat == kF16) return 2u;
    if (kFormat == kInt8 || kFormat == kFp8) return 4u;
    return 8u;
}

// Element e of a word of codes, before any scale.
float word_value(uint u, uint e) {
    if (kFormat == kF32) return uintBitsToFloat(u);
    if (kFormat == kBf16) return bf16_value(bitfieldExtract(u, int(e * 16u), 16));
    if (kFormat == kF16) return f16_value(bitfieldExtract(u, int(e * 16u), 16));
    if (kFormat == kInt8) return int8_value(bitfieldExtract(u, int(e * 8u), 8));
    if (kFormat == kFp8) return fp8_value(bitfieldExtract(u, int(e * 8u), 8));
    const uint code = bitfieldExtract(u, int(e * 4u), 4);
    if (kFormat == kInt4) return float(int(code) - kInt4Zero);
    return kE2m1[code];
}

// The scale of chunk k of row r (1 for formats without chunk scales).
float chunk_scale(uint r, uint k, uint chunk_elems) {
    if (kFormat == kInt4) return scale_f32(r * (pc.cols / kInt4Group) + k * chunk_elems / kInt4Group);
    if (kFormat == kMxfp4) return e8m0_value(scale_byte(r * (pc.cols / kMxBlock) + k));
    if (kFormat == kFp8) {
        const uint scale_cols = (pc.cols + kFp8Block - 1u) / kFp8Block;
        return scale_f32((r / kFp8Block) * scale_cols + k * chunk_elems / kFp8Block);
    }
    return 1.0;
}

shared float partial[kMaxTokens][kThreads];  // per thread, or per subgroup with COLI_SUBGROUP

void main() {
    const uint r = group_index();
    if (r >= pc.rows) return;  // whole workgroup: no barrier is skipped by part of it
    const uint t = gl_LocalInvocationID.x;
    const uint epw = word_elems(), chunk_elems = 4u * epw, chunks = pc.cols / chunk_elems;
    float acc[kMaxTokens];
    for (uint j = 0u; j < kTokens; ++j) acc[j] = 0.0;
    for (uint k = t; k < chunks; k += kThreads) {
        const uvec4 q = wchunk[r * chunks + k];
        const uint c0 = k * chunk_elems;
        float part[kMaxTokens];
        for (uint j = 0u; j < kTokens; ++j) part[j] = 0.0;
        for (uint w = 0u; w < 4u; ++w)
            for (uint e = 0u; e < epw; ++e) {
                const float v = word_value(q[w], e);
                const uint c = c0 + w * epw + e;
                for (uint j = 0u; j < kTokens; ++j) part[j] += v * x[j * pc.cols + c];
            }
        const float s = chunk_scale(r, k, chunk_elems);
        for (uint j = 0u; j < kTokens; ++j) acc[j] += part[j] * s;
    }
#if COLI_SUBGROUP
    for (uint j = 0u; j < kTokens; ++j) {
        const float sum = subgroupAdd(acc[j]);
        if (subgroupElect()) partial[j][gl_SubgroupID] = sum;
    }
    barrier();
    if (t < kTokens) {
        float total = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; ++g) total += partial[t][g];
        y[t * pc.rows + r] = kFormat == kInt8 ? total * scale_f32(r) : total;
    }
#else
    for (uint j = 0u; j < kTokens; ++j) partial[j][t] = acc[j];
    barrier();
    for (uint s = kThreads / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            for (uint j = 0u; j < kTokens; ++j) partial[j][t] += partial[j][t + s];
        barrier();
    }
    if (t < kTokens) y[t * pc.rows + r] = kFormat == kInt8 ? partial[t][0] * scale_f32(r) : partial[t][0];
#endif
}
