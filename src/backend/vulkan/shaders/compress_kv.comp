#version 450
// DeepSeek-V4's KV compressor: one pooled row per window of `ratio` positions that closes in this call,
// out[w - w0][d] = sum over the window's slots of softmax(logits)_slot value_slot, per channel d, in the
// CPU's order (the slots' largest logit, then the exponentials' sums). A slot is position j = w ratio + r
// with logit gate_j[c0 + d] + ape[r][c0 + d] and value kv_j[c0 + d]; series 2 (overlapping windows) also
// takes the slots of window w - 1 from the first hd channels (none for w = 0) and window w's from the
// second (c0 = hd). Position j's row is kv / gate row j - pos0 when j >= pos0, else row j mod (series ratio)
// of the states. Grid-stride over windows * hd.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Kv { float kv[]; };              // [n, width]
layout(std430, binding = 1) readonly buffer Gate { float gate[]; };          // [n, width]
layout(std430, binding = 2) readonly buffer Ape { float ape[]; };            // [ratio, width]
layout(std430, binding = 3) readonly buffer StateKv { float state_kv[]; };   // [series ratio, width]
layout(std430, binding = 4) readonly buffer StateGate { float state_gate[]; };  // [series ratio, width]
layout(std430, binding = 5) writeonly buffer Out { float o[]; };             // [windows, hd]
layout(push_constant) uniform Push {
    uint pos0;     // position of kv's row 0
    uint w0;       // the first window closing: pos0 / ratio
    uint windows;  // windows closing
    uint ratio;    // positions per window
    uint hd;       // head_dim: out's width
    uint series;   // 1 (HCA) or 2 (CSA)
} pc;

uint width() {
    return pc.series * pc.hd;
}

// The gate logit and the value of position j, column c; r = j's slot in its window.
vec2 slot_of(uint j, uint r, uint c) {
    const uint state_row = j % (pc.series * pc.ratio);
    const float g = j >= pc.pos0 ? gate[(j - pc.pos0) * width() + c] : state_gate[state_row * width() + c];
    const float v = j >= pc.pos0 ? kv[(j - pc.pos0) * width() + c] : state_kv[state_row * width() + c];
    return vec2(g + ape[r * width() + c], v);
}

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.windows * pc.hd; i += stride) {
        const uint w = pc.w0 + i / pc.hd, d = i % pc.hd;
        const bool before = pc.series == 2u && w >= 1u;  // window w - 1 takes part
        const uint c0 = pc.series == 2u ? pc.hd : 0u;    // window w's channels
        float top = kNegInf;
        if (before)
            for (uint r = 0u; r < pc.ratio; ++r) top = max(top, slot_of((w - 1u) * pc.ratio + r, r, d).x);
        for (uint r = 0u; r < pc.ratio; ++r) top = max(top, slot_of(w * pc.ratio + r, r, c0 + d).x);
        float total = 0.0, mixed = 0.0;
        if (before)
            for (uint r = 0u; r < pc.ratio; ++r) {
                const vec2 s = slot_of((w - 1u) * pc.ratio + r, r, d);
                const float e = exp(s.x - top);
                total += e;
                mixed += e * s.y;
            }
        for (uint r = 0u; r < pc.ratio; ++r) {
            const vec2 s = slot_of(w * pc.ratio + r, r, c0 + d);
            const float e = exp(s.x - top);
            total += e;
            mixed += e * s.y;
        }
        o[i] = mixed / total;
    }
}
