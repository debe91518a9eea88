#version 450
// Prefill GEMM (and every shape the GEMV does not take): y = x w^T in kTile x kTile tiles of (tokens, rows)
// (tile.glsl), the columns kDepth at a time through shared memory, f32 sums. Weights are decoded element by
// element (weight.glsl) as they enter shared memory, so every format and shape works.
// Grouped (block-diagonal, gl_WorkGroupID.z = group g of `groups`): output columns [g rows, (g + 1) rows) are
// the weight's rows there times x's columns [g cols, (g + 1) cols).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "tile.glsl"

layout(local_size_x = 256) in;  // kTileThreads
layout(constant_id = 0) const uint kFormat = 0u;

layout(std430, binding = 0) readonly buffer WData { uint wdata[]; };
layout(std430, binding = 1) readonly buffer WScale { uint wscale[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };    // [n, groups cols]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };   // [n, groups rows]
layout(push_constant) uniform Push {
    uint rows;    // of a group (all of the weight's when groups = 1)
    uint cols;
    uint n;       // tokens
    uint groups;  // blocks of the block-diagonal weight: 1, a plain matmul
} pc;

#include "weight.glsl"

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint row0 = gl_WorkGroupID.x * kTile, tok0 = gl_WorkGroupID.y * kTile;
    const uint g = gl_WorkGroupID.z, x_cols = pc.groups * pc.cols, y_cols = pc.groups * pc.rows;
    const uint x0 = g * pc.cols, w0 = g * pc.rows;  // the group's first column of x and row of the weight
    tile_clear();
    for (uint k0 = 0u; k0 < pc.cols; k0 += kDepth) {
        for (uint l = t; l < kTile * kDepth; l += kTileThreads) {
            const uint i = l / kDepth, k = l % kDepth, c = k0 + k;
            tile_a[k][i] = (tok0 + i < pc.n && c < pc.cols) ? x[(tok0 + i) * x_cols + x0 + c] : 0.0;
            tile_b[k][i] =
                (row0 + i < pc.rows && c < pc.cols) ? weight_at(kFormat, pc.cols, w0 + row0 + i, c) : 0.0;
        }
        barrier();
        tile_step(t);
        barrier();
    }
    [[unroll]] for (uint u = 0u; u < kBlock; ++u)
        [[unroll]] for (uint v = 0u; v < kBlock; ++v) {
            const uint tok = tok0 + tile_row(t) + kSide * u, r = row0 + tile_col(t) + kSide * v;
            if (tok < pc.n && r < pc.rows) y[tok * y_cols + w0 + r] = acc[u][v];
        }
}
