#version 450
// Decode GEMV on the tensor cores through cooperative matrices, for int4-g64 and mxfp4 and one token per
// job: y[r] = dot(x, row r of w). The FMA shader (gemv.comp) spends about 3.4 instructions per 4-bit weight;
// here each lane decodes its codes straight into the elements it holds of a 16x16 f16 A operand (about 1.5
// instructions per weight) and one 16x8x16 product takes 256 weights. Writing a matrix element by element
// needs the driver's element layout, which the specification leaves to it: this shader is written for the
// one NVIDIA's driver (580) uses, the mma.m16n8k16 fragments. With g = L / 4 and quad = L % 4, lane L holds
// A elements 0, 1 at row g, columns 2 quad and + 1; 2, 3 eight columns right of those; 4 .. 7 as 0 .. 3
// eight rows down. B elements 0, 1 at column g, rows 2 quad and + 1; 2, 3 eight rows down. C elements 0, 1
// at row g, columns 2 quad and + 1; 2, 3 eight rows down. coop_probe.comp checks it at start; a device with
// another layout runs the FMA shader.
//
// Columns come in superblocks (SBs) of kSbCols: 4 blocks of 32 columns, one 16-byte chunk of codes per row
// and block. In a product over a block's first or second 16 columns (k-step 0 or 1 of the block), lane L
// takes word L % 4 of the chunk: its elements of A are the word's codes 2h, 2h + 4, 2h + 1, 2h + 5 (h the
// k-step), as codec.glsl's f16 pairs give them; gemv_xtable.comp lays x out in that same k order. The
// product's B holds x (as f16 hi + lo, scaled by the SB's power of two) of weight scale group g in columns
// 2g and 2g + 1, zeros elsewhere, so that the SB's sums of each group come out apart: lane L holds group
// L % 4 of its rows and scales it in f32.
//
// A workgroup is kTeams subgroups ("teams") of 32 lanes. A team owns kTiles tiles of 16 rows (rows r0 ..
// r0 + 31, or with kMats = 2 rows r0 .. r0 + 15 of the gate and of the up projection, written as glu(gate,
// up)) and walks the SBs part, part + parts, ... of its rows, one SB's loads in flight while it computes
// the previous one.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_NV_cooperative_matrix : require

layout(local_size_x = 128) in;
const uint kLanes = 32u;       // lanes per team: NVIDIA's subgroup
const uint kTeams = 4u;        // teams per workgroup
const uint kTiles = 2u;        // tiles of 16 rows per team
const uint kTileRows = 16u;    // rows of a product
const uint kHalfRows = 8u;     // a lane's second row of a tile: 8 below its first
const uint kStepCols = 16u;    // k of a product
const uint kOutCols = 8u;      // columns of a product: hi, lo of 4 scale groups
const uint kSbCols = 128u;     // = gemv_xtable.comp's kSbCols
const uint kBlockCols = 32u;   // columns of a 16-byte chunk of 4-bit codes
const uint kBlocks = kSbCols / kBlockCols;       // blocks per SB
const uint kBlockSteps = kBlockCols / kStepCols;  // products per block
const uint kChunkWords = 4u;                      // 32-bit words of codes per chunk
const uint kMaxJobs = 16u;                        // = gemv.h's kGemvMaxJobs
const uint kHalfBias = 0x64006400u;               // f16 pair (1024, 1024): a nibble below adds
const uint kNibblePair = 0x000f000fu;             // nibbles j and j + 4 of a word, in both halves
layout(constant_id = 0) const uint kFormat = 4u;  // int4_g64 or mxfp4
layout(constant_id = 1) const uint kMats = 1u;    // 1, or 2 (gate and up)
layout(constant_id = 2) const uint kGlu = 0u;     // kMats = 2: the GluKind
layout(constant_id = 3) const uint kSlots = 1u;   // weights bound

#include "common.glsl"
#include "activations.glsl"
#include "codec.glsl"

layout(std430, binding = 0) readonly buffer Table { uvec4 xq[]; };     // gemv_xtable.comp's pairs
layout(std430, binding = 1) writeonly buffer Y { float y[]; };         // [tokens, rows]
layout(std430, binding = 2) readonly buffer Inverse { float inv[]; };  // [tokens, SBs]
layout(std430, binding = 8) readonly buffer Codes { uint word[]; } codes[kSlots];
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

shared float part_sums[kTeams * kTiles * kTileRows];  // team sums, for the parts of a row group

const float kCodeScale = kFormat == kMxfp4 ? 16384.0 : 1.0;  // mxfp4 pairs hold the value times 2^-14
const uint kGroupCols = kFormat == kMxfp4 ? kMxBlock : kInt4Group;
const uint kGroupsPerSb = kSbCols / kGroupCols;
const uint kGroupBlocks = kGroupCols / kBlockCols;  // blocks per weight scale group
const uint kMaxGroupBlocks = kInt4Group / kBlockCols;  // ... in the format with the widest groups

// What one SB needs from memory, for one lane (row g = lane / 4 of each tile and row g + 8; word lane % 4 of
// each chunk).
struct SbData {
    uint q[kTiles][2][kBlocks];  // codes: [tile][row g, g + 8][block]
    uvec4 x[kMaxGroupBlocks][kBlockSteps];  // x pairs of its scale group's blocks, per k-step
    vec2 s[kTiles];                      // weight scales of group lane % 4 of its two rows of each tile
    float x_inverse;                     // the SB's inverse x scale, times the codes' power of two
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

// Weight scale of group g of SB sb of row r (0 for a group the format does not have).
float group_scale(uint slot, uint r, uint sb, uint g) {
    if (g >= kGroupsPerSb) return 0.0;
    if (kFormat == kMxfp4) return e8m0_value(byte_of(scales[slot].word[r * (pc.cols / kSbCols) + sb], g));
    return uintBitsToFloat(scales[slot].word[r * (pc.cols / kInt4Group) + sb * kGroupsPerSb + g]);
}

// Issues the loads of SB sb for this lane.
SbData sb_load(uint job, uint token, uint r0, uint lane, uint sb) {
    const uint g = lane / 4u, quad = lane % 4u, row_words = pc.cols / kBlockCols * kChunkWords;
    const uint sbs = pc.cols / kSbCols;
    SbData d;
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
        const uint slot = job * kMats + tile_mat(t), row0 = tile_row0(r0, t);
        [[unroll]] for (uint h = 0u; h < 2u; ++h) {
            const uint row = min(row0 + g + h * kHalfRows, pc.rows - 1u);
            [[unroll]] for (uint b = 0u; b < kBlocks; ++b)
                d.q[t][h][b] = codes[slot].word[row * row_words + (sb * kBlocks + b) * kChunkWords + quad];
            d.s[t][h] = group_scale(slot, row, sb, quad);
        }
    }
    // Lanes of B column g hold x of scale group g / 2 (hi in even columns, lo in odd ones).
    const uint group = min(g / 2u, kGroupsPerSb - 1u);
    [[unroll]] for (uint j = 0u; j < kGroupBlocks; ++j)
        [[unroll]] for (uint h = 0u; h < kBlockSteps; ++h)
            d.x[j][h] = xq[((token * sbs + sb) * kSbCols + (group * kGroupBlocks + j) * kBlockCols +
                            8u * quad + 4u * h) / 4u];
    d.x_inverse = inv[token * sbs + sb] * kCodeScale;
    return d;
}

// Adds SB d's products to this lane's sums of its rows g and g + 8 of each tile (scale group lane % 4).
void sb_compute(SbData d, uint lane, inout vec2 acc[kTiles]) {
    const uint g = lane / 4u;
    const bool has_x = g / 2u < kGroupsPerSb, lo = g % 2u == 1u;
    MatC c[kTiles];
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) c[t] = MatC(0.0);
    [[unroll]] for (uint b = 0u; b < kBlocks; ++b) {
        uvec4 p[kTiles][2];  // the decoded words: [tile][row g, g + 8]
        [[unroll]] for (uint t = 0u; t < kTiles; ++t)
            [[unroll]] for (uint h = 0u; h < 2u; ++h) p[t][h] = word_decode(d.q[t][h][b]);
        const bool mine = has_x && b / kGroupBlocks == g / 2u;
        [[unroll]] for (uint h = 0u; h < kBlockSteps; ++h) {
            MatB bm;
            const uvec4 xp = d.x[b % kGroupBlocks][h];
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                const f16vec2 hl = unpackFloat2x16(xp[i]);
                bm[i] = mine ? (lo ? hl.y : hl.x) : float16_t(0.0);
            }
            [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
                const f16vec2 g0 = unpackFloat2x16(p[t][0][2u * h]), g1 = unpackFloat2x16(p[t][0][2u * h + 1u]);
                const f16vec2 e0 = unpackFloat2x16(p[t][1][2u * h]), e1 = unpackFloat2x16(p[t][1][2u * h + 1u]);
                MatA a;
                a[0] = g0.x;
                a[1] = g0.y;
                a[2] = g1.x;
                a[3] = g1.y;
                a[4] = e0.x;
                a[5] = e0.y;
                a[6] = e1.x;
                a[7] = e1.y;
                c[t] = coopMatMulAddNV(a, bm, c[t]);
            }
        }
    }
    // c[t][0], [1]: row g, columns 2 (lane % 4) (hi) and + 1 (lo); [2], [3]: row g + 8.
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
        acc[t].x += (c[t][0] + c[t][1]) * d.s[t].x * d.x_inverse;
        acc[t].y += (c[t][2] + c[t][3]) * d.s[t].y * d.x_inverse;
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

    vec2 acc[kTiles];  // rows g and g + 8 of each tile, this lane's scale group
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) acc[t] = vec2(0.0);
    if (has_rows) {
        // SB sb is computed while the loads of SB sb + parts are in flight (past the end: the last SB again,
        // unused).
        uint sb = part;
        SbData d = sb_load(job, token, r0, lane, sb);
        for (; sb < sbs; sb += parts) {
            const SbData next = sb_load(job, token, r0, lane, min(sb + parts, sbs - 1u));
            sb_compute(d, lane, acc);
            d = next;
        }
    }
    // The 4 lanes of a row hold its 4 scale groups.
    [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
        acc[t] += subgroupShuffleXor(acc[t], 1u);
        acc[t] += subgroupShuffleXor(acc[t], 2u);
    }

    const uint g = lane / 4u;
    if (parts > 1u) {
        if (lane % 4u == 0u)
            [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
                part_sums[(team * kTiles + t) * kTileRows + g] = acc[t].x;
                part_sums[(team * kTiles + t) * kTileRows + g + kHalfRows] = acc[t].y;
            }
        barrier();
        if (part == 0u)
            for (uint p = 1u; p < parts; ++p)
                [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
                    acc[t].x += part_sums[((team + p) * kTiles + t) * kTileRows + g];
                    acc[t].y += part_sums[((team + p) * kTiles + t) * kTileRows + g + kHalfRows];
                }
    }
    if (!has_rows || part != 0u || lane % 4u != 0u) return;
    [[unroll]] for (uint h = 0u; h < 2u; ++h) {
        const uint tile_row = g + h * kHalfRows;
        if (kMats == 2u) {
            if (r0 + tile_row < pc.rows)
                y[token * pc.rows + r0 + tile_row] =
                    glu(kGlu, pc.beta, pc.linear_beta, acc[0][h], acc[1][h]);
            continue;
        }
        [[unroll]] for (uint t = 0u; t < kTiles; ++t) {
            const uint row = tile_row0(r0, t) + tile_row;
            if (row < pc.rows) y[token * pc.rows + row] = acc[t][h];
        }
    }
}
