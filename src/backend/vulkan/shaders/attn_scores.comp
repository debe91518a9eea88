#version 450
// Attention scores in tiles, for GQA and for absorbed MLA: scores[row][j] = scale (q1(row) . k1(key) +
// q2(row) . k2(key)), row = (i - i0) heads + h, key = j over the causal keys (-inf after them) or the
// selected position sel[i][j] (-inf for -1).
// Per kv head g a product [rows, len1 + len2] x [keys, len1 + len2]^T (tile.glsl) over the (query, head)
// rows of the heads that share g (of one query when the keys are selected, since each query has its own):
// a workgroup takes kTile of those rows and kTile keys, so that a cached row is read once per kTile rows
// (one thread per score read it once per head).
//   GQA: q1 = q, k1 = the key cache at g's columns; no second part.
//   MLA: one kv head for all heads; q1 = the absorbed q (chunk rows), k1 = the latent cache; q2 = q's rope
//        part, k2 = the rope key cache.
//   Compressed attention (DeepSeek-V4): one kv head; q1 = q, selected keys from two sources: k1 = the raw
//        keys, and from key k_split on k_tail = the compressed entries (row key - k_split).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "tile.glsl"

layout(local_size_x = 256) in;  // kTileThreads
const uint kLoadRows = kTileThreads / kDepth;  // tile rows one pass of the loads fills

layout(std430, binding = 0) readonly buffer Q1 { float q1[]; };        // see q1_* below
layout(std430, binding = 1) readonly buffer Q2 { float q2[]; };        // see q2_* below
layout(std430, binding = 2) readonly buffer K1 { float k1[]; };        // [ctx, k1_stride]
layout(std430, binding = 3) readonly buffer K2 { float k2[]; };        // [ctx, k2_stride]
layout(std430, binding = 4) readonly buffer Sel { float sel[]; };      // [n, keys] when selected
layout(std430, binding = 5) writeonly buffer Scores { float scores[]; };  // [queries heads, keys]
layout(std430, binding = 6) readonly buffer KTail { float k_tail[]; };  // [*, k1_stride]: keys >= k_split
layout(push_constant) uniform Push {
    uint i0;         // first query of the chunk
    uint queries;    // queries of the chunk
    uint heads;      // query heads
    uint group;      // query heads per kv head
    uint keys;       // scores per row
    uint pos0;       // position of query 0
    uint selected;   // 1: keys are sel's positions
    float scale;     // softmax scale
    uint len1;       // columns of the first part
    uint q1_stride;  // (query i, head h) reads q1 from ((i - i0 + q1_first) heads + h) q1_stride + q1_offset
    uint q1_offset;
    uint q1_first;   // 0: q1 holds the chunk's queries; i0: all of them
    uint k1_stride;  // key `key`, kv head g reads k1 from key k1_stride + g k1_group
    uint k1_group;
    uint len2;       // columns of the second part (0: none)
    uint q2_stride;  // as q1_*
    uint q2_offset;
    uint q2_first;
    uint k2_stride;  // key `key` reads k2 from key k2_stride
    uint k_split;    // keys from here on read k_tail, as k1 (no second part); kNoSplit: none
} pc;

shared int key_of[kTile];  // cached row of each key of the tile, -1: none

void main() {
    const uint t = gl_LocalInvocationID.x;
    // The workgroup's rows: tile `tile` of row set `set` of kv head g. A set is the rows of one query when
    // the keys are selected, else of every query of the chunk.
    const uint sets = pc.selected != 0u ? pc.queries : 1u, set_rows = pc.queries * pc.group / sets;
    const uint tiles = (set_rows + kTile - 1u) / kTile;
    const uint g = gl_WorkGroupID.y / (sets * tiles), set = gl_WorkGroupID.y / tiles % sets;
    const uint r0 = set * set_rows + gl_WorkGroupID.y % tiles * kTile, r_end = (set + 1u) * set_rows;
    const uint j0 = gl_WorkGroupID.x * kTile;
    if (t < kTile) {
        const uint j = j0 + t;
        int key = -1;
        if (j < pc.keys && pc.selected != 0u) {
            const float pick = sel[(pc.i0 + set) * pc.keys + j];
            key = pick >= 0.0 ? int(pick) : -1;
        } else if (j < pc.keys) {
            key = int(j);  // every row of the cache up to keys is written; the causal mask comes at the end
        }
        key_of[t] = key;
    }
    barrier();

    const uint depth = pc.len1 + pc.len2;
    const uint lc = t % kDepth, lr = t / kDepth;  // this thread's loads: column lc of rows lr + kLoadRows m
    tile_clear();
    for (uint c0 = 0u; c0 < depth; c0 += kDepth) {
        const uint c = c0 + lc;
        for (uint r = lr; r < kTile; r += kLoadRows) {
            const uint row = r0 + r, qi = row / pc.group, h = g * pc.group + row % pc.group;
            float qv = 0.0, kv = 0.0;
            if (row < r_end && c < depth)
                qv = c < pc.len1
                         ? q1[((qi + pc.q1_first) * pc.heads + h) * pc.q1_stride + pc.q1_offset + c]
                         : q2[((qi + pc.q2_first) * pc.heads + h) * pc.q2_stride + pc.q2_offset + c - pc.len1];
            const int key = key_of[r];
            if (key >= 0 && c < depth) {
                const uint k = uint(key);
                if (k >= pc.k_split)
                    kv = k_tail[(k - pc.k_split) * pc.k1_stride + g * pc.k1_group + c];
                else
                    kv = c < pc.len1 ? k1[k * pc.k1_stride + g * pc.k1_group + c]
                                     : k2[k * pc.k2_stride + c - pc.len1];
            }
            tile_a[lc][r] = qv;
            tile_b[lc][r] = kv;
        }
        barrier();
        tile_step(t);
        barrier();
    }

    [[unroll]] for (uint u = 0u; u < kBlock; ++u)
        [[unroll]] for (uint v = 0u; v < kBlock; ++v) {
            const uint row = r0 + tile_row(t) + kSide * u, kt = tile_col(t) + kSide * v, j = j0 + kt;
            if (row >= r_end || j >= pc.keys) continue;
            const uint qi = row / pc.group, h = g * pc.group + row % pc.group;
            const bool visible = key_of[kt] >= 0 && (pc.selected != 0u || j <= pc.pos0 + pc.i0 + qi);
            scores[(qi * pc.heads + h) * pc.keys + j] = visible ? acc[u][v] * pc.scale : kNegInf;
        }
}
