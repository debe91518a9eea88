#version 450
// Compressed attention's keys (DeepSeek-V4), the selected keys of attn_scores and attn_mix: for query i at
// t = pos0 + i, slots [0, window) are the raw keys at positions s = t - window + 1 + j (none when s < 0), row
// s - first_raw of the raw keys (the ring's rows before pos0, then this call's kv); slots window + e are
// compressed entries, key raw_rows + w: w = e while w < (t + 1) / ratio (every closed window), or (selected)
// w = selection[i][e] (-1: none). As floats, -1 for none: the form of attention's selections. Grid-stride
// over n * (window + entry_slots).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Selection { float selection[]; };  // [n, entry_slots] (selected)
layout(std430, binding = 1) writeonly buffer Keys { float keys[]; };  // [n, window + entry_slots]
layout(push_constant) uniform Push {
    uint n;            // queries
    uint pos0;         // position of query 0
    uint window;       // raw positions a query sees
    uint ratio;        // positions per compressed entry (0: none)
    uint first_raw;    // position of the raw keys' row 0
    uint raw_rows;     // raw keys; entry w is key raw_rows + w
    uint entry_slots;  // slots for entries per query: the selection's width, or the most entries visible
    uint selected;     // 1: the entries are the selection's
} pc;

void main() {
    const uint slots = pc.window + pc.entry_slots, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n * slots; idx += stride) {
        const uint i = idx / slots, j = idx % slots, t = pc.pos0 + i;
        int key = -1;
        if (j < pc.window) {
            if (t + 1u + j >= pc.window) key = int(t + 1u + j - pc.window - pc.first_raw);  // s >= 0
        } else if (pc.selected != 0u) {
            const float id = selection[i * pc.entry_slots + j - pc.window];
            if (id >= 0.0) key = int(pc.raw_rows) + int(id);
        } else if (j - pc.window < (t + 1u) / pc.ratio) {
            key = int(pc.raw_rows + j - pc.window);
        }
        keys[idx] = float(key);
    }
}
