#version 450
// MLA scores: scores[row][j] = scale (q_abs(row) . latent(key) + q_pe_h(i) . k_pe(key)), row = (i - i0)
// heads + h, key = j over the causal keys (-inf after them) or the selected position sel[i][j] (-inf for -1).
// Per query a product [heads, lora + rope] x [keys, lora + rope]^T in tiles (tile.glsl): a workgroup takes
// kTile heads of one query and kTile keys, so that a cached row is read once per kTile heads (one thread
// per score read it once per head).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "tile.glsl"

layout(local_size_x = 256) in;  // kTileThreads
const uint kLoadRows = kTileThreads / kDepth;  // tile rows one pass of the loads fills

layout(std430, binding = 0) readonly buffer QAbs { float q_abs[]; };   // [rows, lora]
layout(std430, binding = 1) readonly buffer Q { float q[]; };          // [n, heads (nope + rope)]
layout(std430, binding = 2) readonly buffer Latent { float latent[]; };  // [ctx, lora]
layout(std430, binding = 3) readonly buffer KPe { float k_pe[]; };     // [ctx, rope]
layout(std430, binding = 4) readonly buffer Sel { float sel[]; };      // [n, keys] when selected
layout(std430, binding = 5) writeonly buffer Scores { float scores[]; };  // [rows, keys]
layout(push_constant) uniform Push {
    uint i0;        // first query of the chunk
    uint heads;
    uint nope;      // dn
    uint rope;      // dr
    uint lora;      // kv_lora
    uint keys;      // scores per row
    uint pos0;      // position of query 0
    uint selected;  // 1: keys are sel's positions
    float scale;    // softmax scale
} pc;

shared int key_of[kTile];  // cached row of each key of the tile, -1: not visible

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint head_tiles = (pc.heads + kTile - 1u) / kTile;
    const uint qi = gl_WorkGroupID.y / head_tiles, h0 = (gl_WorkGroupID.y % head_tiles) * kTile;
    const uint i = pc.i0 + qi, j0 = gl_WorkGroupID.x * kTile;
    if (t < kTile) {
        const uint j = j0 + t;
        int key = -1;
        if (j < pc.keys && pc.selected != 0u) {
            const float pick = sel[i * pc.keys + j];
            key = pick >= 0.0 ? int(pick) : -1;
        } else if (j < pc.keys && j <= pc.pos0 + i) {
            key = int(j);
        }
        key_of[t] = key;
    }
    barrier();

    const uint depth = pc.lora + pc.rope, q_row = pc.nope + pc.rope;
    const uint lc = t % kDepth, lr = t / kDepth;  // this thread's loads: column lc of rows lr + kLoadRows m
    tile_clear();
    for (uint c0 = 0u; c0 < depth; c0 += kDepth) {
        const uint c = c0 + lc;
        for (uint r = lr; r < kTile; r += kLoadRows) {
            const uint h = h0 + r;
            float qv = 0.0, kv = 0.0;
            if (h < pc.heads && c < depth)
                qv = c < pc.lora ? q_abs[(qi * pc.heads + h) * pc.lora + c]
                                 : q[(i * pc.heads + h) * q_row + pc.nope + c - pc.lora];
            const int key = key_of[r];
            if (key >= 0 && c < depth)
                kv = c < pc.lora ? latent[uint(key) * pc.lora + c] : k_pe[uint(key) * pc.rope + c - pc.lora];
            tile_a[lc][r] = qv;
            tile_b[lc][r] = kv;
        }
        barrier();
        tile_step(t);
        barrier();
    }

    [[unroll]] for (uint u = 0u; u < kBlock; ++u)
        [[unroll]] for (uint v = 0u; v < kBlock; ++v) {
            const uint h = h0 + tile_row(t) + kSide * u, kt = tile_col(t) + kSide * v, j = j0 + kt;
            if (h < pc.heads && j < pc.keys)
                scores[(qi * pc.heads + h) * pc.keys + j] = key_of[kt] >= 0 ? acc[u][v] * pc.scale : kNegInf;
        }
}
