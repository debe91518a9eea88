#version 450
// A gated-linear-unit expert's activation, in place over `count` floats (grid-stride loop):
//   gate = glu(kind, beta, linear_beta, gate, up), SwiGLU, SiTU or the clamped SwiGLU by the
//   specialization constant kKind.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "activations.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint kKind = kGluSilu;

layout(std430, binding = 0) buffer Gate { float gate[]; };       // [m, d_ff], becomes the activation
layout(std430, binding = 1) readonly buffer Up { float up[]; };  // [m, d_ff]
layout(push_constant) uniform Push {
    uint count;         // elements
    float beta;         // SiTU: the gate's tanh bound; clamped SwiGLU: the limit
    float linear_beta;  // SiTU: the up projection's tanh bound
} pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride)
        gate[i] = glu(kKind, pc.beta, pc.linear_beta, gate[i], up[i]);
}
