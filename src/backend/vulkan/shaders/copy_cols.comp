#version 450
// out[r][j] = x[r][c0 + j % period], grid-stride over rows * width: a block of columns (slice_cols: period =
// width), or each row repeated (repeat_cols: c0 = 0, period = x's width).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };     // [rows, src_cols]
layout(std430, binding = 1) writeonly buffer Out { float o[]; };  // [rows, width]
layout(push_constant) uniform Push {
    uint rows;
    uint src_cols;  // x's width
    uint c0;        // first column taken
    uint width;     // columns written
    uint period;    // columns taken, repeated until width
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.rows * pc.width; i += stride)
        o[i] = x[(i / pc.width) * pc.src_cols + pc.c0 + i % pc.width % pc.period];
}
