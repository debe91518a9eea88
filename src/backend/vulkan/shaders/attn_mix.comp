#version 450
// Attention's probability-weighted sums, in tiles, for GQA and for MLA's latent mix:
// out[i][h width + d] = sum_j p[row][j] v[key(j)][g width + d], row = (i - i0) heads + h, g = h / group the
// kv head, key(j) = j or the selected position sel[i][j] (-1: none; its probability is 0); keys from v_split
// on read v_tail (row key - v_split: compressed attention's entries after its raw keys).
// Per kv head g a product [rows, keys] x [keys, width] (tile.glsl) over the (query, head) rows of the heads
// that share g (of one query when the keys are selected): a workgroup takes kTile of those rows and kTile
// columns, so that a cached row is read once per kTile rows. Long contexts split the keys into ranges of
// split_keys, each summed into a part of its own (dst + s part_size; sum_parts.comp then adds them in
// order), so that a decode step's few tiles still fill the device.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "tile.glsl"

layout(local_size_x = 256) in;  // kTileThreads
const uint kPLoadRows = kTileThreads / kDepth;  // rows one pass of the probability loads fills
const uint kVLoadRows = kTileThreads / kTile;   // keys one pass of the value loads fills

layout(std430, binding = 0) readonly buffer P { float p[]; };          // [queries heads, keys]
layout(std430, binding = 1) readonly buffer V { float v[]; };          // [ctx, v_stride]
layout(std430, binding = 2) readonly buffer Sel { float sel[]; };      // [n, keys] when selected
layout(std430, binding = 3) writeonly buffer Dst { float dst[]; };     // [splits, *, heads width]
layout(std430, binding = 4) readonly buffer VTail { float v_tail[]; };  // [*, v_stride]: keys >= v_split
layout(push_constant) uniform Push {
    uint i0;          // first query of the chunk
    uint queries;     // queries of the chunk
    uint heads;       // query heads
    uint group;       // query heads per kv head
    uint width;       // values per head
    uint v_stride;    // floats per cached row
    uint keys;        // probabilities per row
    uint selected;    // 1: keys are sel's positions
    uint split_keys;  // keys of each split, a multiple of kDepth
    uint part_size;   // floats between the splits' parts
    uint dst_first;   // dst row of query i0 within a part
    uint v_split;     // keys from here on read v_tail; kNoSplit: none
} pc;

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint sets = pc.selected != 0u ? pc.queries : 1u, set_rows = pc.queries * pc.group / sets;
    const uint tiles = (set_rows + kTile - 1u) / kTile;
    const uint g = gl_WorkGroupID.y / (sets * tiles), set = gl_WorkGroupID.y / tiles % sets;
    const uint r0 = set * set_rows + gl_WorkGroupID.y % tiles * kTile, r_end = (set + 1u) * set_rows;
    const uint col_tiles = (pc.width + kTile - 1u) / kTile;
    const uint split = gl_WorkGroupID.x / col_tiles, d0 = gl_WorkGroupID.x % col_tiles * kTile;
    const uint first = split * pc.split_keys, last = min(first + pc.split_keys, pc.keys);

    const uint pj = t % kDepth, pr = t / kDepth;  // this thread's loads: probability of key pj, rows pr + ..
    const uint vd = t % kTile, vk = t / kTile;    // and value column vd of keys vk + kVLoadRows m
    tile_clear();
    for (uint j0 = first; j0 < last; j0 += kDepth) {
        for (uint r = pr; r < kTile; r += kPLoadRows) {
            const uint row = r0 + r, j = j0 + pj;
            const uint qi = row / pc.group, h = g * pc.group + row % pc.group;
            tile_a[pj][r] = row < r_end && j < last ? p[(qi * pc.heads + h) * pc.keys + j] : 0.0;
        }
        for (uint k = vk; k < kDepth; k += kVLoadRows) {
            const uint j = j0 + k, d = d0 + vd;
            int key = -1;
            if (j < last) key = pc.selected != 0u ? int(sel[(pc.i0 + set) * pc.keys + j]) : int(j);
            float value = 0.0;
            if (key >= 0 && d < pc.width) {
                const uint kk = uint(key);
                value = kk >= pc.v_split ? v_tail[(kk - pc.v_split) * pc.v_stride + g * pc.width + d]
                                         : v[kk * pc.v_stride + g * pc.width + d];
            }
            tile_b[k][vd] = value;
        }
        barrier();
        tile_step(t);
        barrier();
    }

    [[unroll]] for (uint u = 0u; u < kBlock; ++u)
        [[unroll]] for (uint w = 0u; w < kBlock; ++w) {
            const uint row = r0 + tile_row(t) + kSide * u, d = d0 + tile_col(t) + kSide * w;
            if (row >= r_end || d >= pc.width) continue;
            const uint qi = row / pc.group, h = g * pc.group + row % pc.group;
            dst[split * pc.part_size + ((pc.dst_first + qi) * pc.heads + h) * pc.width + d] = acc[u][w];
        }
}
