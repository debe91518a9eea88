#version 450
// Row normalization, one workgroup per row, in the CPU's arithmetic (f32, sum then divide):
//   kMode 0, rms_norm:   out = w * (x / sqrt(mean(x^2) + eps))
//   kMode 1, layer_norm: out = (x - mean) / sqrt(var + eps) * w + b
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

const uint kThreads = 256u;
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint kMode = 0u;
const uint kRms = 0u;

layout(std430, binding = 0) readonly buffer X { float x[]; };      // [n, d]
layout(std430, binding = 1) readonly buffer W { float w[]; };      // [d]
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };  // [d] (layer_norm)
layout(std430, binding = 3) writeonly buffer Out { float o[]; };   // [n, d]
layout(push_constant) uniform Push {
    uint d;     // row width
    float eps;  // added to the variance
} pc;

shared float partial[kThreads];

float row_sum(float v) {
    const uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = kThreads / 2u; s > 0u; s >>= 1u) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    const float total = partial[0];
    barrier();
    return total;
}

void main() {
    const uint row = group_index(), base = row * pc.d, t = gl_LocalInvocationID.x;
    if (kMode == kRms) {
        float sq = 0.0;
        for (uint i = t; i < pc.d; i += kThreads) sq += x[base + i] * x[base + i];
        const float inv = 1.0 / sqrt(row_sum(sq) / float(pc.d) + pc.eps);
        for (uint i = t; i < pc.d; i += kThreads) o[base + i] = w[i] * (x[base + i] * inv);
        return;
    }
    float s = 0.0;
    for (uint i = t; i < pc.d; i += kThreads) s += x[base + i];
    const float mean = row_sum(s) / float(pc.d);
    float var = 0.0;
    for (uint i = t; i < pc.d; i += kThreads) var += (x[base + i] - mean) * (x[base + i] - mean);
    const float inv = 1.0 / sqrt(row_sum(var) / float(pc.d) + pc.eps);
    for (uint i = t; i < pc.d; i += kThreads) o[base + i] = (x[base + i] - mean) * inv * w[i] + bias[i];
}
