#version 450
// Decode GEMV on the tensor cores through cooperative matrices (VK_NV_cooperative_matrix, 16x8x16 products
// of f16 with f32 sums), for int4-g64 and mxfp4 and one token per job: y[r] = dot(x, row r of w). The FMA
// shader (gemv.comp) spends about 3.4 instructions per 4-bit weight; here a weight costs its share of the
// decode to an exact f16 pair (about 11 instructions per word of 8 codes) and of one product per 256.
//
// A workgroup is kTeams subgroups ("teams") of 32 lanes. A team owns kTiles tiles of 16 rows: rows r0 ..
// r0 + 31 of the job's matrix, or (kMats = 2) rows r0 .. r0 + 15 of its gate and of its up, written as
// glu(gate, up). It walks the superblocks (SBs, kSbCols columns) part, part + parts, ... of its rows. Per SB
// each lane loads 2 16-byte chunks of codes of one row of each tile, and the team:
//   - decodes the codes to f16 into its tiles in shared memory;
//   - expands the SB's x (gemv_xtable.comp: f16 hi + lo pairs, scaled by the SB's power of two) into the
//     products' B operands: 16 k rows of 8 columns, the x of weight scale group g in columns 2g (hi) and
//     2g + 1 (lo), zeros elsewhere, so that one product gives each group's sum apart;
//   - multiplies each tile with them in kSteps products into fresh sums (a product's f32 sum truncates;
//     restarting every SB keeps its run short);
//   - passes the sums through shared memory to the lanes, which scale each group by its weight scale and
//     the SB's inverse x scale in f32 and add it to their row's sum.
// An SB's loads are issued two SBs before its use (two register sets, used in turn), so that a team keeps
// two SBs of codes in flight while it computes.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_NV_cooperative_matrix : require

layout(local_size_x = 128) in;
const uint kLanes = 32u;                                  // lanes per team: NVIDIA's subgroup
const uint kTeams = 4u;                                   // teams per workgroup
const uint kTiles = 2u;                                   // tiles of 16 rows per team
const uint kTileRows = 16u;                               // rows of a product
const uint kStepCols = 16u;                               // k of a product
const uint kOutCols = 8u;                                 // columns of a product: hi, lo of 4 groups
const uint kSbCols = 128u;                                // = gemv_xtable.comp's kSbCols
const uint kSteps = kSbCols / kStepCols;                  // products per SB
const uint kChunkCols = 32u;                              // 4-bit codes per 16-byte chunk
const uint kSbChunks = kSbCols / kChunkCols;              // chunks of a row per SB
const uint kLaneChunks = kTileRows * kSbChunks / kLanes;  // chunks a lane loads per SB and tile
const uint kRowVecs = kSbCols / 8u + 1u;                  // uvec4 of a decoded row, one of padding (banks)
const uint kTileVecs = kTileRows * kRowVecs;              // uvec4 of one decoded tile
const uint kLanePlaces = kSbCols / kLanes;                // x places (k rows) each lane expands per SB
const uint kMaxJobs = 16u;                                // = gemv.h's kGemvMaxJobs
const uint kHalfBias = 0x64006400u;                       // f16 pair (1024, 1024): a nibble below adds
const uint kNibblePair = 0x000f000fu;                     // nibbles j and j + 4 of a word, in both halves
layout(constant_id = 0) const uint kFormat = 4u;          // int4_g64 or mxfp4
layout(constant_id = 1) const uint kMats = 1u;            // 1, or 2 (gate and up)
layout(constant_id = 2) const uint kGlu = 0u;             // kMats = 2: the GluKind
layout(constant_id = 3) const uint kSlots = 1u;           // weights bound

#include "common.glsl"
#include "activations.glsl"
#include "codec.glsl"

layout(std430, binding = 0) readonly buffer Table { uvec4 xq[]; };     // gemv_xtable.comp's pairs
layout(std430, binding = 1) writeonly buffer Y { float y[]; };         // [tokens, rows]
layout(std430, binding = 2) readonly buffer Inverse { float inv[]; };  // [tokens, SBs]
layout(std430, binding = 8) readonly buffer Codes { uvec4 chunk[]; } codes[kSlots];
layout(std430, binding = 9) readonly buffer Scales { uint word[]; } scales[kSlots];
layout(push_constant) uniform Push {
    uint rows;                  // of each matrix
    uint cols;                  // a multiple of kSbCols
    uint parts;                 // teams that split one row group's SBs: 1, 2 or 4
    float beta;                 // SiTU: the gate's tanh bound
    float linear_beta;          // SiTU: the up projection's tanh bound
    uint first[kMaxJobs + 1u];  // job j's token (row of the x table, of `inv` and of y): first[j]
} pc;

#define MatA fcoopmatNV<16, gl_ScopeSubgroup, kTileRows, kStepCols>
#define MatB fcoopmatNV<16, gl_ScopeSubgroup, kStepCols, kOutCols>
#define MatC fcoopmatNV<32, gl_ScopeSubgroup, kTileRows, kOutCols>

shared uvec4 tiles[kTeams * kTiles * kTileVecs];              // decoded codes, [team][tile][row][vec]
shared uvec4 operands[kTeams * kSbCols];                      // B operands, [team][k]: a row of 8 f16 each
shared float sums[kTeams * kTiles * kTileRows * kOutCols];    // products' sums, [team][tile][row][col]
shared float part_sums[kTeams * kTiles * kTileRows];          // team sums, for the parts of a row group

const float kCodeScale = kFormat == kMxfp4 ? 16384.0 : 1.0;  // mxfp4 pairs hold the value times 2^-14
const uint kGroupCols = kFormat == kMxfp4 ? kMxBlock : kInt4Group;
const uint kGroupsPerSb = kSbCols / kGroupCols;

// What one SB needs from memory, for one lane.
struct SbData {
    uvec4 q[kTiles][kLaneChunks];  // codes: its chunks of each tile
    uvec4 x;                       // x pairs of its kLanePlaces places
    vec2 s[kTiles];                // weight scales of its two groups of its sum row of each tile
    float x_inverse;               // the SB's inverse x scale, times the codes' power of two
};

// The team's rows: tile t is rows tile_row0(t) .. + 15 of matrix tile_mat(t).
uint tile_mat(uint t) {
    return kMats == 2u ? t : 0u;
}
uint tile_row0(uint r0, uint t) {
    return kMats == 2u ? r0 : r0 + t * kTileRows;
}

// The 8 codes of word u as 4 f16 pairs (codes j and j + 4), exact.
uvec4 word_decode(uint u) {
    if (kFormat == kMxfp4) {
        const uint even = e2m1_merge(u << 1u, u << 4u), odd = e2m1_merge(u >> 3u, u);
        return uvec4((even << 8u) & kE2m1PairBits, (odd << 8u) & kE2m1PairBits, even & kE2m1PairBits,
                     odd & kE2m1PairBits);
    }
    const f16vec2 zero = f16vec2(float16_t(1024 + kInt4Zero));
    uvec4 p;
    [[unroll]] for (uint j = 0u; j < 4u; ++j)
        p[j] = packFloat2x16(unpackFloat2x16(((u >> (4u * j)) & kNibblePair) | kHalfBias) - zero);
    return p;
}

// Weight scales of groups g and g + 1 of SB sb of row r (0 for groups the format does not have).
vec2 group_scales(uint slot, uint r, uint sb, uint g) {
    if (g >= kGroupsPerSb) return vec2(0.0);
    if (kFormat == kMxfp4) {
        const uint w = scales[slot].word[r * (pc.cols / kSbCols) + sb];  // the SB's 4 e8m0 bytes
        return vec2(e8m0_value(byte_of(w, g)), e8m0_value(byte_of(w, g + 1u)));
    }
    const uint i = r * (pc.cols / kInt4Group) + sb * kGroupsPerSb + g;
    return vec2(uintBitsToFloat(scales[slot].word[i]), uintBitsToFloat(scales[slot].word[i + 1u]));
}

// Issues the loads of SB sb for this lane: tile rows lane % 16, chunks kLaneChunks (lane / 16) + i; sums
// of tile row lane / 2, groups 2 (lane % 2) and 2 (lane % 2) + 1.
SbData sb_load(uint job, uint token, uint r0, uint lane, uint sb) {
    const uint row_chunks = pc.cols / kChunkCols, sbs = pc.cols / kSbCols;
    SbData d;
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
        const uint slot = job * kMats + tile_mat(t), row0 = tile_row0(r0, t);
        const uint load_row = min(row0 + lane % kTileRows, pc.rows - 1u);
        [[unroll]] for (uint i = 0u; i < kLaneChunks; ++i)
            d.q[t][i] = codes[slot].chunk[load_row * row_chunks + sb * kSbChunks +
                                          kLaneChunks * (lane / kTileRows) + i];
        d.s[t] = group_scales(slot, min(row0 + lane / 2u, pc.rows - 1u), sb, 2u * (lane % 2u));
    }
    d.x = xq[(token * sbs + sb) * (kSbCols / kLanePlaces) + lane];
    d.x_inverse = inv[token * sbs + sb] * kCodeScale;
    return d;
}

// Adds SB d's products to this lane's sums of its tile rows.
void sb_compute(SbData d, uint team, uint lane, inout float acc[kTiles]) {
    subgroupBarrier();  // the team's reads of the previous SB's tiles, operands and sums are done
    [[unroll]] for (uint t = 0u; t < kTiles; ++t)
        [[unroll]] for (uint i = 0u; i < kLaneChunks; ++i) {
            const uint base = (team * kTiles + t) * kTileVecs + (lane % kTileRows) * kRowVecs +
                              (kLaneChunks * (lane / kTileRows) + i) * 4u;
            [[unroll]] for (uint w = 0u; w < 4u; ++w) tiles[base + w] = word_decode(d.q[t][i][w]);
        }
    // The lane's places share one group: place k is in word k / 8 of the SB.
    const uint group = lane / (2u * kGroupCols / 8u);
    [[unroll]] for (uint j = 0u; j < kLanePlaces; ++j) {
        uvec4 row = uvec4(0u);
        row[group] = d.x[j];
        operands[team * kSbCols + kLanePlaces * lane + j] = row;
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    MatC c[kTiles];
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) c[t] = MatC(0.0);
    [[unroll]] for (uint k = 0u; k < kSteps; ++k) {
        MatB b;
        coopMatLoadNV(b, operands, team * kSbCols + k * kStepCols, 1u, false);
        [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
            MatA a;
            coopMatLoadNV(a, tiles, (team * kTiles + t) * kTileVecs + k * (kStepCols / 8u), kRowVecs, false);
            c[t] = coopMatMulAddNV(a, b, c[t]);
        }
    }
    [[unroll]] for (uint t = 0u; t < kTiles; ++t)
        coopMatStoreNV(c[t], sums, (team * kTiles + t) * kTileRows * kOutCols, kOutCols, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
        const uint o = ((team * kTiles + t) * kTileRows + lane / 2u) * kOutCols + 4u * (lane % 2u);
        acc[t] += ((sums[o] + sums[o + 1u]) * d.s[t].x + (sums[o + 2u] + sums[o + 3u]) * d.s[t].y) * d.x_inverse;
    }
}

void main() {
    const uint team = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    const uint job = gl_WorkGroupID.z, token = pc.first[job];
    const uint parts = pc.parts, part = team % parts;
    const uint group_rows = kTiles / kMats * kTileRows;  // rows of each matrix a team owns
    const uint r0 = (group_index() * (kTeams / parts) + team / parts) * group_rows;
    const bool has_rows = r0 < pc.rows;
    const uint sbs = pc.cols / kSbCols;

    float acc[kTiles];
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) acc[t] = 0.0;
    if (has_rows) {
        // SBs sb and sb + parts are computed in turn from two register sets, each refilled two SBs ahead
        // right after use (past the end: the last SB again, unused).
        uint sb = part;
        SbData d0 = sb_load(job, token, r0, lane, sb);
        SbData d1 = sb_load(job, token, r0, lane, min(sb + parts, sbs - 1u));
        for (; sb < sbs; sb += 2u * parts) {
            sb_compute(d0, team, lane, acc);
            d0 = sb_load(job, token, r0, lane, min(sb + 2u * parts, sbs - 1u));
            if (sb + parts < sbs) sb_compute(d1, team, lane, acc);
            d1 = sb_load(job, token, r0, lane, min(sb + 3u * parts, sbs - 1u));
        }
    }
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) acc[t] += subgroupShuffleXor(acc[t], 1u);

    const uint tile_row = lane / 2u;
    if (parts > 1u) {
        if (lane % 2u == 0u)
            [[unroll]] for (uint t = 0u; t < kTiles; ++t)
                part_sums[(team * kTiles + t) * kTileRows + tile_row] = acc[t];
        barrier();
        if (part == 0u)
            for (uint p = 1u; p < parts; ++p)
                [[unroll]] for (uint t = 0u; t < kTiles; ++t)
                    acc[t] += part_sums[((team + p) * kTiles + t) * kTileRows + tile_row];
    }
    if (!has_rows || part != 0u || lane % 2u != 0u) return;
    if (kMats == 2u) {
        if (r0 + tile_row < pc.rows)
            y[token * pc.rows + r0 + tile_row] = glu(kGlu, pc.beta, pc.linear_beta, acc[0], acc[1]);
        return;
    }
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
        const uint row = tile_row0(r0, t) + tile_row;
        if (row < pc.rows) y[token * pc.rows + row] = acc[t];
    }
}
