#version 450
// Decode GEMV: y[t][r] = dot(x[t], row r of w) for kTokens tokens in one pass over w. A workgroup of 128
// threads takes kRows rows, one team of 128 / kRows threads per row, so that short rows (4-bit codes) still
// keep every thread busy. Each thread reads whole 16-byte chunks of codes (rows of whole chunks only, so
// cols is a multiple of 4: the backend sends other shapes to the GEMM), two chunks in flight, decodes them
// in registers and multiplies with x. A team's partial sums meet through a subgroup add when one team is
// the whole workgroup and the device has subgroup arithmetic (COLI_SUBGROUP=1), else through shared memory.
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
layout(constant_id = 2) const uint kRows = 1u;    // rows per workgroup: 1, 2, 4 or 8
const uint kMaxTokens = 8u;                        // = kVulkanGemvMaxTokens
const uint kTeam = kThreads / kRows;               // threads per row

layout(std430, binding = 0) readonly buffer WChunks { uvec4 wchunk[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer X { vec4 x4[]; };        // [kTokens, cols / 4]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };        // [kTokens, rows]
layout(std430, binding = 4) readonly buffer WData { uint wdata[]; };  // the codes again, for weight.glsl
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
} pc;

#include "weight.glsl"

// Integer codes become floats without a conversion instruction (a quarter of the FMA rate on many GPUs):
// the code is ORed into the mantissa of 2^23 and one subtraction removes 2^23 and the code's offset. Exact.
const uint kMagic = 0x4b000000u;  // f32 bits of 2^23
const float kTwo23 = 8388608.0;

// Elements per 32-bit word of codes.
uint word_elems() {
    if (kFormat == kF32) return 1u;
    if (kFormat == kBf16 || kFormat == kF16) return 2u;
    if (kFormat == kInt8 || kFormat == kFp8) return 4u;
    return 8u;
}

// e2m1 code to its value by its bits (exact; no table, no subnormal f32): 0, 0.5 for the two smallest
// magnitudes, else 2^(e-1) (1 + m/2).
float e2m1_bits(uint code) {
    const uint mag = code & 7u;
    const float v = mag < 2u ? float(mag) * 0.5 : uintBitsToFloat((((mag >> 1u) + 126u) << 23u) | ((mag & 1u) << 22u));
    return (code & 8u) != 0u ? -v : v;
}

// Element e of a word of codes, before any scale.
float word_value(uint u, uint e) {
    if (kFormat == kF32) return uintBitsToFloat(u);
    if (kFormat == kBf16) return bf16_value(bitfieldExtract(u, int(e * 16u), 16));
    if (kFormat == kF16) return f16_value(bitfieldExtract(u, int(e * 16u), 16));
    if (kFormat == kInt8)
        return uintBitsToFloat(kMagic | (bitfieldExtract(u, int(e * 8u), 8) ^ 0x80u)) - (kTwo23 + 128.0);
    if (kFormat == kFp8) return fp8_value(bitfieldExtract(u, int(e * 8u), 8));
    const uint code = bitfieldExtract(u, int(e * 4u), 4);
    if (kFormat == kInt4) return uintBitsToFloat(kMagic | code) - (kTwo23 + float(kInt4Zero));
    return e2m1_bits(code);
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

float acc[kMaxTokens];

const uint kMaxChunkElems = 32u;  // elements of a 16-byte chunk of 4-bit codes

// Adds chunk k (codes q) of row r times x to acc: the chunk is decoded once, then dotted with each token's
// x, read four floats at a time.
void chunk_add(uvec4 q, uint r, uint k) {
    const uint epw = word_elems(), chunk_elems = 4u * epw;
    float v[kMaxChunkElems];
    for (uint w = 0u; w < 4u; ++w)
        for (uint e = 0u; e < epw; ++e) v[w * epw + e] = word_value(q[w], e);
    const float s = chunk_scale(r, k, chunk_elems);
    const uint x0 = k * chunk_elems / 4u, row4 = pc.cols / 4u;
    for (uint j = 0u; j < kTokens; ++j) {
        float part = 0.0;
        for (uint i = 0u; i < chunk_elems / 4u; ++i)
            part += dot(vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]), x4[j * row4 + x0 + i]);
        acc[j] += part * s;
    }
}

shared float partial[kMaxTokens][kThreads];

void main() {
    const uint t = gl_LocalInvocationID.x, lane = t % kTeam;
    const uint r = group_index() * kRows + t / kTeam;
    const bool valid = r < pc.rows;  // no early return: the whole workgroup meets at the barriers
    const uint chunks = pc.cols / (4u * word_elems());
    for (uint j = 0u; j < kTokens; ++j) acc[j] = 0.0;
    if (valid) {
        uint k = lane;
        for (; k + kTeam < chunks; k += 2u * kTeam) {
            const uvec4 q0 = wchunk[r * chunks + k], q1 = wchunk[r * chunks + k + kTeam];
            chunk_add(q0, r, k);
            chunk_add(q1, r, k + kTeam);
        }
        if (k < chunks) chunk_add(wchunk[r * chunks + k], r, k);
    }
    const float row_scale = (kFormat == kInt8 && valid) ? scale_f32(r) : 1.0;
#if COLI_SUBGROUP
    if (kRows == 1u) {
        for (uint j = 0u; j < kTokens; ++j) {
            const float sum = subgroupAdd(acc[j]);
            if (subgroupElect()) partial[j][gl_SubgroupID] = sum;
        }
        barrier();
        if (t < kTokens && valid) {
            float total = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; ++g) total += partial[t][g];
            y[t * pc.rows + r] = total * row_scale;
        }
        return;
    }
#endif
    for (uint j = 0u; j < kTokens; ++j) partial[j][t] = acc[j];
    barrier();
    for (uint s = kTeam / 2u; s > 0u; s >>= 1u) {
        if (lane < s)
            for (uint j = 0u; j < kTokens; ++j) partial[j][t] += partial[j][t + s];
        barrier();
    }
    if (lane < kTokens && valid) y[lane * pc.rows + r] = partial[lane][t - lane] * row_scale;
}
