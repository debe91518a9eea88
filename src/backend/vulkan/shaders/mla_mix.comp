#version 450
// MLA's latent mix: mixed[row][d] = sum_j p[row][j] latent[key(j)][d], row = (i - i0) heads + h, key(j) = j
// or the selected position sel[i][j] (-1: none, its probability is 0). Per query a product [heads, keys] x
// [keys, lora] in tiles (tile.glsl): a workgroup takes kTile heads of one query and kTile latent columns, so
// that a cached row is read once per kTile heads. Long contexts split the keys into ranges of split_keys,
// each summed into a part of its own (parts[s], which sum_parts.comp then adds in order), so that a decode
// step's few tiles still fill the device.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "tile.glsl"

layout(local_size_x = 256) in;  // kTileThreads
const uint kPLoadRows = kTileThreads / kDepth;  // heads one pass of the probability loads fills
const uint kVLoadRows = kTileThreads / kTile;   // keys one pass of the latent loads fills

layout(std430, binding = 0) readonly buffer P { float p[]; };            // [rows, keys]
layout(std430, binding = 1) readonly buffer Latent { float latent[]; };  // [ctx, lora]
layout(std430, binding = 2) readonly buffer Sel { float sel[]; };        // [n, keys] when selected
layout(std430, binding = 3) writeonly buffer Parts { float parts[]; };   // [splits, rows, lora]
layout(push_constant) uniform Push {
    uint i0;          // first query of the chunk
    uint heads;
    uint lora;        // kv_lora
    uint keys;        // probabilities per row
    uint selected;    // 1: keys are sel's positions
    uint split_keys;  // keys of each split, a multiple of kDepth
    uint part_size;   // floats of a part: rows x lora
} pc;

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint col_tiles = (pc.lora + kTile - 1u) / kTile, head_tiles = (pc.heads + kTile - 1u) / kTile;
    const uint split = gl_WorkGroupID.x / col_tiles, d0 = (gl_WorkGroupID.x % col_tiles) * kTile;
    const uint qi = gl_WorkGroupID.y / head_tiles, h0 = (gl_WorkGroupID.y % head_tiles) * kTile;
    const uint i = pc.i0 + qi;
    const uint first = split * pc.split_keys, last = min(first + pc.split_keys, pc.keys);

    const uint pj = t % kDepth, pr = t / kDepth;  // this thread's loads: probability of key pj, heads pr + ..
    const uint vd = t % kTile, vk = t / kTile;    // and latent column vd of keys vk + kVLoadRows m
    tile_clear();
    for (uint j0 = first; j0 < last; j0 += kDepth) {
        for (uint r = pr; r < kTile; r += kPLoadRows) {
            const uint h = h0 + r, j = j0 + pj;
            tile_a[pj][r] = h < pc.heads && j < last ? p[(qi * pc.heads + h) * pc.keys + j] : 0.0;
        }
        for (uint k = vk; k < kDepth; k += kVLoadRows) {
            const uint j = j0 + k, d = d0 + vd;
            int key = -1;
            if (j < last) key = pc.selected != 0u ? int(sel[i * pc.keys + j]) : int(j);
            tile_b[k][vd] = key >= 0 && d < pc.lora ? latent[uint(key) * pc.lora + d] : 0.0;
        }
        barrier();
        tile_step(t);
        barrier();
    }

    [[unroll]] for (uint u = 0u; u < kBlock; ++u)
        [[unroll]] for (uint v = 0u; v < kBlock; ++v) {
            const uint h = h0 + tile_row(t) + kSide * u, d = d0 + tile_col(t) + kSide * v;
            if (h < pc.heads && d < pc.lora)
                parts[split * pc.part_size + (qi * pc.heads + h) * pc.lora + d] = acc[u][v];
        }
}
