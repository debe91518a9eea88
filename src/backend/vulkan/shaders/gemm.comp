#version 450
// Prefill GEMM (and every shape the GEMV does not take): y = x w^T in 64 x 64 tiles of (tokens, rows),
// 16 columns at a time through shared memory; each thread accumulates a 4 x 4 block in f32. Weights are
// decoded element by element (weight.glsl) as they enter shared memory, so every format and shape works.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

const uint kTile = 64u;   // tokens and rows per workgroup
const uint kDepth = 16u;  // columns per step
const uint kBlock = 4u;   // outputs per thread along each side
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint kFormat = 0u;

layout(std430, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };    // [n, cols]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };   // [n, rows]
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
    uint n;  // tokens
} pc;

#include "weight.glsl"

shared float ws[kDepth][kTile + 1u];  // [column][row], padded against bank conflicts
shared float xs[kDepth][kTile + 1u];  // [column][token]

void main() {
    const uint t = gl_LocalInvocationID.x, tx = t % (kTile / kBlock), ty = t / (kTile / kBlock);
    const uint row0 = gl_WorkGroupID.x * kTile, tok0 = gl_WorkGroupID.y * kTile;
    float acc[kBlock][kBlock];
    for (uint i = 0u; i < kBlock; ++i)
        for (uint j = 0u; j < kBlock; ++j) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < pc.cols; k0 += kDepth) {
        for (uint l = t; l < kTile * kDepth; l += gl_WorkGroupSize.x) {
            const uint i = l / kDepth, k = l % kDepth, c = k0 + k;
            ws[k][i] = (row0 + i < pc.rows && c < pc.cols) ? weight_at(kFormat, pc.cols, row0 + i, c) : 0.0;
            xs[k][i] = (tok0 + i < pc.n && c < pc.cols) ? x[(tok0 + i) * pc.cols + c] : 0.0;
        }
        barrier();
        for (uint k = 0u; k < kDepth; ++k) {
            float a[kBlock], b[kBlock];
            for (uint i = 0u; i < kBlock; ++i) a[i] = xs[k][ty * kBlock + i];
            for (uint j = 0u; j < kBlock; ++j) b[j] = ws[k][tx * kBlock + j];
            for (uint i = 0u; i < kBlock; ++i)
                for (uint j = 0u; j < kBlock; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    for (uint i = 0u; i < kBlock; ++i)
        for (uint j = 0u; j < kBlock; ++j) {
            const uint tok = tok0 + ty * kBlock + i, r = row0 + tx * kBlock + j;
            if (tok < pc.n && r < pc.rows) y[tok * pc.rows + r] = acc[i][j];
        }
}
