#version 450
// p = exp(s - max) / sum over each row, in place, one workgroup per row; -inf entries (masked keys) get 0,
// and a row with no key left is all 0. kSinks (DeepSeek-V4's attention sinks): row r's head h = r mod heads
// adds exp(sinks[h]) to the sum (and sinks[h] to the max) without a probability of its own.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

const uint kThreads = 256u;
layout(local_size_x = 256) in;

layout(constant_id = 0) const bool kSinks = false;

layout(std430, binding = 0) buffer Scores { float s[]; };              // [rows, keys]
layout(std430, binding = 1) readonly buffer Sinks { float sinks[]; };  // [heads] when kSinks
layout(push_constant) uniform Push {
    uint keys;   // row length
    uint heads;  // kSinks: rows are (query, head) pairs, heads per query
} pc;

shared float partial[kThreads];

float row_reduce(float v, bool take_max) {
    const uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint k = kThreads / 2u; k > 0u; k >>= 1u) {
        if (t < k) partial[t] = take_max ? max(partial[t], partial[t + k]) : partial[t] + partial[t + k];
        barrier();
    }
    const float r = partial[0];
    barrier();
    return r;
}

void main() {
    const uint base = group_index() * pc.keys, t = gl_LocalInvocationID.x;
    float m = kNegInf;
    for (uint j = t; j < pc.keys; j += kThreads) m = max(m, s[base + j]);
    m = row_reduce(m, true);
    const float sink = kSinks ? sinks[group_index() % pc.heads] : kNegInf;
    m = max(m, sink);
    float sum = t == 0u && kSinks ? exp(sink - m) : 0.0;  // the sink, counted once
    for (uint j = t; j < pc.keys; j += kThreads) {
        const float e = (m == kNegInf || s[base + j] == kNegInf) ? 0.0 : exp(s[base + j] - m);
        s[base + j] = e;
        sum += e;
    }
    sum = row_reduce(sum, false);
    for (uint j = t; j < pc.keys; j += kThreads) s[base + j] = sum > 0.0 ? s[base + j] / sum : 0.0;
}
