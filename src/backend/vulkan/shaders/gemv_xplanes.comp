#version 450
// The x of the int4 GEMV's integer dot-product path (gemv.comp with COLI_INT_DOT), laid out once per
// dispatch. Each 32-column chunk of each x row (one chunk of int4 codes) becomes the integers
// X = round(x 2^k), k the power of two that puts the chunk's largest |x| in [2^21, 2^22): exact to 2^-22 of
// that largest |x|, as the CUDA tensor-core GEMV's x. X is split into byte planes, X = 65536 P2 + 256 P1 + P0
// (P2 signed, P1 and P0 unsigned), each plane in the order of the codes' dot products: for 32-bit word w of
// the codes, the bytes of its even nibbles' columns (8w, 8w + 2, 8w + 4, 8w + 6), then of its odd ones'.
// Beside them, per chunk: 2^-k, NaN where the chunk holds a NaN or an infinity (the row's sums become NaN),
// and the sum of X, which takes the codes' zero point out of the dot products.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;
const uint kThreads = 64u;      // = gemv.cpp's kXPlanesThreads
const int kXTop = 21;           // the largest |X| lies in [2^kXTop, 2^(kXTop+1))
const int kMaxScaleExp = 126;   // 2^-k stays a normal f32
const int kF32ExpBias = 127;

#include "common.glsl"
#include "xplanes.glsl"

layout(std430, binding = 0) readonly buffer X { vec4 x4[]; };               // [*, cols]
layout(std430, binding = 1) readonly buffer XRows { int xrows[]; };         // gather: x row of each row
layout(std430, binding = 2) writeonly buffer Planes { uvec4 planes[]; };    // [rows, chunks, kXPlaneVecs]
layout(std430, binding = 3) writeonly buffer Meta { uvec2 meta[]; };        // [rows, chunks]: 2^-k, sum X
layout(push_constant) uniform Push {
    uint rows;    // rows of x to lay out
    uint cols;
    uint gather;  // 1: row r is x row xrows[r]
} pc;

float pow2(int e) {
    return uintBitsToFloat(uint(e + kF32ExpBias) << 23u);
}

// Lays out chunk i (row i / chunks, chunk i % chunks).
void chunk_layout(uint i, uint chunks) {
    const uint row = i / chunks, c = i % chunks;
    const uint src = pc.gather != 0u ? uint(xrows[row]) : row;

    float v[kXPlaneCols];
    float max_abs = 0.0;
    bool finite = true;
    [[unroll]] for (uint p = 0u; p < kXPlaneCols / 4u; ++p) {
        const vec4 f = x4[(src * pc.cols + c * kXPlaneCols) / 4u + p];
        v[4u * p] = f.x;
        v[4u * p + 1u] = f.y;
        v[4u * p + 2u] = f.z;
        v[4u * p + 3u] = f.w;
        finite = finite && !any(isnan(f)) && !any(isinf(f));
        max_abs = max(max_abs, max(max(abs(f.x), abs(f.y)), max(abs(f.z), abs(f.w))));
    }
    int e;
    frexp(finite ? max_abs : 0.0, e);  // max_abs = m 2^e, m in [0.5, 1)
    const int k = min(kXTop + 1 - e, kMaxScaleExp);
    const float scale = pow2(k);

    uint words[kXPlanes * kXPlaneWords];
    [[unroll]] for (uint j = 0u; j < kXPlanes * kXPlaneWords; ++j) words[j] = 0u;
    int sum = 0;
    [[unroll]] for (uint j = 0u; j < kXPlaneCols; ++j) {
        // Column j = 8 w + 2 b + h: word w of codes, nibble parity h, byte b of the plane word 2 w + h.
        const uint w = j / 8u, b = (j % 8u) / 2u, h = j % 2u;
        const int xi = finite ? int(roundEven(v[j] * scale)) : 0;
        sum += xi;
        const uint u = uint(xi);
        [[unroll]] for (uint p = 0u; p < kXPlanes; ++p)
            words[p * kXPlaneWords + 2u * w + h] |= ((u >> (8u * p)) & 0xffu) << (8u * b);
    }
    [[unroll]] for (uint q = 0u; q < kXPlaneVecs; ++q)
        planes[i * kXPlaneVecs + q] =
            uvec4(words[4u * q], words[4u * q + 1u], words[4u * q + 2u], words[4u * q + 3u]);
    meta[i] = uvec2(finite ? floatBitsToUint(pow2(-k)) : floatBitsToUint(kNan), uint(sum));
}

void main() {
    const uint chunks = pc.cols / kXPlaneCols, stride = gl_NumWorkGroups.x * kThreads;
    for (uint i = gl_GlobalInvocationID.x; i < pc.rows * chunks; i += stride) chunk_layout(i, chunks);
}
