#version 450
// Decode GEMV: y[t][r] = dot(x[t], row r of w) for up to kMaxTokens tokens in one pass over w, for one
// matrix, or (COLI_BATCH) for a batch of jobs in one dispatch: the experts of a MoE layer, where one dispatch
// per matrix would cost more than reading it. gl_WorkGroupID.z picks the job; job j's weights are slots
// j * kMats + m of the `codes` and `scales` arrays, its tokens are rows first[j] .. first[j + 1] of x and y.
//
// A workgroup is kTeams teams of kLanes lanes; a team takes kRows rows of each of the job's kMats matrices
// (kMats = 2: gate and up of the same rows, written as glu(gate, up)). Each lane reads every kLanes-th
// 16-byte chunk of its rows (one load per row in flight while the previous chunk is computed), decodes it
// (codec.glsl) and multiplies it with the matching x of every token, loaded once for all the rows.
// Grouped (block-diagonal) matmul: x rows hold x_cols columns, and row r reads x's columns from
// (r / group_rows) cols on; a team's rows lie in one group (group_rows is a multiple of kRows). Short,
// wide matrices split a row group's chunks over `parts` teams. A team's lanes meet through subgroupAdd when
// a subgroup is a team (COLI_SUBGROUP and subgroups of kLanes), else through shared memory.
//
// COLI_INT_DOT (int4, up to kDotMaxTokens tokens): x comes as byte planes of integers (gemv_xplanes.comp),
// and a lane multiplies each word of codes with them on the GPU's packed 4x8-bit integer dot product: the
// even and the odd nibbles masked into bytes, three dot products each. Its chunk sums are exact integers,
// scaled once per chunk. On GPUs that issue few f32 FMAs per byte of memory bandwidth (an H200) this needs
// about half the instructions of the f32 path, which is bound by their issue there.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if COLI_INT_DOT
#extension GL_EXT_spirv_intrinsics : require
#endif
#if COLI_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_basic : require
#endif

layout(local_size_x = 128) in;
const uint kThreads = 128u;               // = gemv.cpp's kGemvThreads
const uint kLanes = 32u;                  // lanes per team
const uint kTeams = kThreads / kLanes;    // teams per workgroup
const uint kMaxTokens = 8u;               // = kVulkanGemvMaxTokens
const uint kMaxSlots = 8u;                // rows a team holds: kRows * kMats at most
const uint kMaxJobs = 16u;                // = gemv.h's kGemvMaxJobs
layout(constant_id = 0) const uint kFormat = 0u;
layout(constant_id = 1) const uint kTokens = 1u;  // 1 .. kMaxTokens: the most tokens of any job
layout(constant_id = 2) const uint kRows = 1u;    // rows of each matrix per team
layout(constant_id = 3) const uint kMats = 1u;    // matrices per job: 1, or 2 (gate and up)
layout(constant_id = 4) const uint kGlu = 0u;     // kMats = 2: the GluKind
#if COLI_BATCH
layout(constant_id = 5) const uint kSlots = 1u;        // weights bound: the device's batch size
layout(constant_id = 6) const bool kGatherX = false;  // x rows through `xrows` (the routed tokens)
#define SLOT(job, m) ((job) * kMats + (m))
#else
const uint kSlots = 1u;
#define SLOT(job, m) 0u
#endif

#include "common.glsl"
#include "activations.glsl"
#include "codec.glsl"
#if COLI_INT_DOT
#include "xplanes.glsl"
#endif

layout(std430, binding = 0) readonly buffer X { vec4 x4[]; };  // [tokens, cols / 4]
layout(std430, binding = 1) writeonly buffer Y { float y[]; };  // [tokens, rows]
#if COLI_BATCH
layout(std430, binding = 2) readonly buffer XRows { int xrows[]; };  // kGatherX: x row of each job token
#endif
#if COLI_INT_DOT
layout(std430, binding = 3) readonly buffer Planes { uvec4 planes[]; };  // gemv_xplanes.comp's
layout(std430, binding = 4) readonly buffer Meta { uvec2 meta[]; };      // [rows, chunks]: 2^-k, sum X
#endif
layout(std430, binding = 8) readonly buffer Codes { uvec4 chunk[]; } codes[kSlots];
layout(std430, binding = 9) readonly buffer Scales { uint word[]; } scales[kSlots];
layout(push_constant) uniform Push {
    uint rows;                   // of each matrix
    uint cols;
    uint parts;                  // teams that split one row group's chunks: 1, 2 or 4
    float beta;                  // SiTU: the gate's tanh bound; clamped SwiGLU: the limit
    float linear_beta;           // SiTU: the up projection's tanh bound
    uint x_cols;                 // x's row width: cols, or groups cols (grouped)
    uint group_rows;             // rows that read one block of cols columns of x: rows, or rows / groups
    uint first[kMaxJobs + 1u];   // job j's tokens: rows first[j] .. first[j + 1] of y (and of x)
} pc;

const uint kRowSlots = kRows * kMats;
const uint kMaxAcc = kMaxSlots * kMaxTokens;

// Every loop over row slots and tokens has a literal bound and no loop inside, so that glslc unrolls it and
// every array index becomes a constant (the arrays stay in registers, the decode constants fold); the
// specialization constants then cut the unused iterations. A (row slot r, token j) pair is a = r kMaxTokens + j.
bool acc_used(uint a) {
    return a / kMaxTokens < kRowSlots && a % kMaxTokens < kTokens;
}
#define FOR_ACC(a) [[unroll]] for (uint a = 0u; a < kMaxAcc; ++a) if (acc_used(a))
#define FOR_SLOTS(r) [[unroll]] for (uint r = 0u; r < kMaxSlots; ++r) if (r < kRowSlots)

float scale_f32(uint slot, uint i) {
    return uintBitsToFloat(scales[slot].word[i]);
}

// The scale of chunk c of row r (chunk-scaled formats).
float chunk_scale(uint slot, uint r, uint c) {
    if (kFormat == kInt4) return scale_f32(slot, r * (pc.cols / kInt4Group) + c / (kInt4Group / kChunkElems));
    if (kFormat == kMxfp4) {
        const uint i = r * (pc.cols / kMxBlock) + c;  // one e8m0 byte per chunk
        return e8m0_value(byte_of(scales[slot].word[i >> 2u], i));
    }
    const uint scale_cols = (pc.cols + kFp8Block - 1u) / kFp8Block;
    return scale_f32(slot, (r / kFp8Block) * scale_cols + c / (kFp8Block / kChunkElems));
}

float acc[kMaxAcc];                          // this lane's sums, then the team's
float part[kMaxAcc];                         // the current chunk's
uint xbase[kMaxTokens];                      // vec4 index of each token's x row
const uint kGroupVecs = kMaxGroupElems / 4u;  // vec4s of x per group, at most
vec4 xv[kMaxTokens * kGroupVecs];            // the current group's x: [token][vec4]
float vals[kMaxGroupElems];                  // the current group of one row slot, decoded

// Group g of chunk c (codes q) of the team's rows times x, into part. x is loaded once for every row slot;
// each slot's group is decoded right before its products, so few decoded values are live at once. Each x
// vec4 serves kRowSlots rows: the lanes' x loads touch many cache lines per instruction (every lane reads its
// own chunk's columns), and in the 4-bit formats more rows per load is faster (gemv.cpp's team_rows).
void group_add(uvec4 q[kMaxSlots], uint c, uint g) {
    if (g >= kGroups) return;
    [[unroll]] for (uint i = 0u; i < kMaxTokens * kGroupVecs; ++i) {
        const uint j = i / kGroupVecs, p = i % kGroupVecs;  // token, vec4 of the group
        if (j < kTokens && p < kGroupElems / 4u)
            xv[i] = x4[xbase[j] + c * (kChunkElems / 4u) + g * (kGroupElems / 4u) + p];
    }
    [[unroll]] for (uint a = 0u; a < kMaxSlots * kMaxTokens * kGroupVecs; ++a) {
        const uint r = a / (kMaxTokens * kGroupVecs), i = a % (kMaxTokens * kGroupVecs);
        const uint j = i / kGroupVecs, p = i % kGroupVecs;
        if (r < kRowSlots && j < kTokens && p < kGroupElems / 4u) {
            if (i == 0u) group_decode(q[r], g, vals);
            part[r * kMaxTokens + j] +=
                dot(vec4(vals[4u * p], vals[4u * p + 1u], vals[4u * p + 2u], vals[4u * p + 3u]), xv[i]);
        }
    }
}

// Adds chunk c (codes q, scales s) of the team's rows times x to acc.
void chunk_add(uvec4 q[kMaxSlots], float s[kMaxSlots], uint c) {
    FOR_ACC(a) part[a] = 0.0;
    group_add(q, c, 0u);
    group_add(q, c, 1u);
    group_add(q, c, 2u);
    group_add(q, c, 3u);
    FOR_ACC(a) acc[a] = kChunkScaled ? fma(part[a] * kPreScale, s[a / kMaxTokens], acc[a]) : acc[a] + part[a];
}

#if COLI_INT_DOT
// SPIR-V's packed 4x8-bit dot products (SPV_KHR_integer_dot_product; Debian 12's glslang has no GLSL name
// for them): the sums of the products of the bytes of a and b, unsigned x unsigned and signed x unsigned.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4451)
uint dot_uu(uint a, uint b, spirv_literal uint packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int dot_su(uint a, uint b, spirv_literal uint packed_format);

const uint kDotMaxTokens = 2u;       // = gemv.cpp's kIntDotMaxTokens
const uint kNibbles = 0x0f0f0f0fu;   // one nibble per byte

uvec4 xp[kDotMaxTokens * kXPlaneVecs];  // the current chunk's x planes: [token][plane][even / odd words]
uvec2 xm[kDotMaxTokens];                 // and its 2^-k and sum of X, per token

// Code word u times the x of its 8 columns: (plane 0, 1, 2) sums. p0, p1, p2 hold each plane's words for
// u's even and odd nibbles.
ivec3 word_dot(uint u, uvec2 p0, uvec2 p1, uvec2 p2) {
    const uint even = u & kNibbles, odd = (u >> 4u) & kNibbles;
    return ivec3(int(dot_uu(even, p0.x, 0) + dot_uu(odd, p0.y, 0)),
                 int(dot_uu(even, p1.x, 0) + dot_uu(odd, p1.y, 0)),
                 dot_su(p2.x, even, 0) + dot_su(p2.y, odd, 0));
}

// The sum over chunk q of code (0..15) x X for token j: exact in wrapping int32 arithmetic, as the true sum
// is below 15 * 32 * 2^22 < 2^31 (the planes' layout: xplanes.glsl). No loops: it runs inside FOR_ACC (see
// above).
int chunk_dot(uvec4 q, uint j) {
    const uint b = j * kXPlaneVecs;
    const ivec3 s = word_dot(q.x, xp[b].xy, xp[b + 2u].xy, xp[b + 4u].xy) +
                    word_dot(q.y, xp[b].zw, xp[b + 2u].zw, xp[b + 4u].zw) +
                    word_dot(q.z, xp[b + 1u].xy, xp[b + 3u].xy, xp[b + 5u].xy) +
                    word_dot(q.w, xp[b + 1u].zw, xp[b + 3u].zw, xp[b + 5u].zw);
    return (s.z << 16) + (s.y << 8) + s.x;
}

// Adds chunk c (codes q, scales s) of the team's rows times x to acc; x of token j is row xrow[j] of the
// planes. Sum of (code - zero point) X = chunk_dot - zero point * sum X, below 2^30: exact.
void chunk_add_dot(uvec4 q[kMaxSlots], float s[kMaxSlots], uint c, uint xrow[kMaxTokens], uint chunks) {
    [[unroll]] for (uint i = 0u; i < kDotMaxTokens * kXPlaneVecs; ++i)
        if (i / kXPlaneVecs < kTokens)
            xp[i] = planes[(xrow[i / kXPlaneVecs] * chunks + c) * kXPlaneVecs + i % kXPlaneVecs];
    [[unroll]] for (uint j = 0u; j < kDotMaxTokens; ++j)
        if (j < kTokens) xm[j] = meta[xrow[j] * chunks + c];
    FOR_ACC(a) {
        const uint r = a / kMaxTokens, j = a % kMaxTokens;
        if (j < kDotMaxTokens) {
            const int t = chunk_dot(q[r], j) - (int(xm[j].y) << 3);  // zero point 8
            acc[a] = fma(float(t), uintBitsToFloat(xm[j].x) * s[r], acc[a]);
        }
    }
}
#endif

shared float lane_sums[kThreads];                // the shared-memory team sum
shared float part_sums[kTeams][kMaxAcc];         // team sums, for the parts of a row group

// One step of the shared-memory tree: lanes below `width` add the lane `width` above.
void tree_step(uint t, uint lane, uint width) {
    if (lane < width) lane_sums[t] += lane_sums[t + width];
    barrier();
}

// acc = the sum of acc over the team's lanes, in every lane. Called by the whole workgroup.
void team_sum(uint t, uint team, uint lane) {
#if COLI_SUBGROUP
    if (gl_SubgroupSize == kLanes) {
        FOR_ACC(a) acc[a] = subgroupAdd(acc[a]);
        return;
    }
#endif
    FOR_ACC(a) {
        lane_sums[t] = acc[a];
        barrier();
        tree_step(t, lane, 16u);  // kLanes / 2, ..., 1
        tree_step(t, lane, 8u);
        tree_step(t, lane, 4u);
        tree_step(t, lane, 2u);
        tree_step(t, lane, 1u);
        acc[a] = lane_sums[team * kLanes];
        barrier();
    }
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    uint team = t / kLanes, lane = t % kLanes;
#if COLI_SUBGROUP
    if (gl_SubgroupSize == kLanes) {  // each subgroup is a team, whatever the driver's lane numbering
        team = gl_SubgroupID;
        lane = gl_SubgroupInvocationID;
    }
#endif
    const uint job = gl_WorkGroupID.z;  // 0 without COLI_BATCH
    const uint first = pc.first[job], n = pc.first[job + 1u] - first;
    const uint parts = pc.parts, part_index = team % parts;
    const uint r0 = (group_index() * (kTeams / parts) + team / parts) * kRows;
    const bool has_rows = r0 < pc.rows;
    const uint chunks = pc.cols / kChunkElems;
    const uint x_block = min(r0, pc.rows - 1u) / pc.group_rows * (pc.cols / 4u);  // the team's columns of x

    [[unroll]] for (uint j = 0u; j < kMaxTokens; ++j) {
        const uint row = first + min(j, n - 1u);  // tokens past n repeat the last; their sums are dropped
#if COLI_BATCH
        xbase[j] = (kGatherX ? uint(xrows[row]) : row) * (pc.x_cols / 4u) + x_block;
#else
        xbase[j] = row * (pc.x_cols / 4u) + x_block;
#endif
    }
#if COLI_INT_DOT
    uint xrow[kMaxTokens];  // each token's row of the x planes: the rows of y
    [[unroll]] for (uint j = 0u; j < kMaxTokens; ++j) xrow[j] = first + min(j, n - 1u);
#endif
    uint base[kMaxSlots], rowof[kMaxSlots];  // each row slot's row (past the end: the last) and first chunk
    FOR_SLOTS(r) {
        rowof[r] = min(r0 + r % kRows, pc.rows - 1u);
        base[r] = rowof[r] * chunks;
    }
    FOR_ACC(a) acc[a] = 0.0;
    uint nan_rows = 0u;  // fp8: bit r is set when row slot r holds a NaN code

    if (has_rows) {
        const uint step = parts * kLanes;
        uint c = part_index * kLanes + lane;
        uvec4 q[kMaxSlots];
        float s[kMaxSlots];
        FOR_SLOTS(r) {
            const uint slot = SLOT(job, r / kRows), cc = min(c, chunks - 1u);
            q[r] = codes[slot].chunk[base[r] + cc];
            s[r] = kChunkScaled ? chunk_scale(slot, rowof[r], cc) : 1.0;
        }
        for (; c < chunks; c += step) {
            // The next chunk's loads go out before this one is computed (the last is read twice).
            const uint cn = min(c + step, chunks - 1u);
            uvec4 qn[kMaxSlots];
            float sn[kMaxSlots];
            FOR_SLOTS(r) {
                const uint slot = SLOT(job, r / kRows);
                qn[r] = codes[slot].chunk[base[r] + cn];
                sn[r] = kChunkScaled ? chunk_scale(slot, rowof[r], cn) : 1.0;
            }
            if (kFormat == kFp8)
                FOR_SLOTS(r) if ((fp8_nan_bits(q[r]) & kByteHighBits) != 0u) nan_rows |= 1u << r;
#if COLI_INT_DOT
            chunk_add_dot(q, s, c, xrow, chunks);
#else
            chunk_add(q, s, c);
#endif
            q = qn;
            s = sn;
        }
        FOR_ACC(a) if ((nan_rows & (1u << (a / kMaxTokens))) != 0u) acc[a] = kNan;
    }

    team_sum(t, team, lane);
    if (parts > 1u) {
        if (lane == 0u) FOR_ACC(a) part_sums[team][a] = acc[a];
        barrier();
        if (part_index == 0u)
            for (uint p = 1u; p < parts; ++p) FOR_ACC(a) acc[a] += part_sums[team + p][a];
    }
    if (!has_rows || part_index != 0u) return;

    // The team's outputs, spread over its lanes: row r0 + r of token j, from row slot r (and r + kRows).
    FOR_ACC(a) {
        const uint r = a / kMaxTokens, j = a % kMaxTokens, row = r0 + r;
        if (r < kRows && lane == a % kLanes && row < pc.rows && j < n) {
            float out_value = acc[a];
            if (kFormat == kInt8) out_value *= scale_f32(SLOT(job, 0u), row);
            if (kMats == 2u) {
                float up = acc[a + kRows * kMaxTokens];
                if (kFormat == kInt8) up *= scale_f32(SLOT(job, 1u), row);
                out_value = glu(kGlu, pc.beta, pc.linear_beta, out_value, up);
            }
            y[(first + j) * pc.rows + row] = out_value;
        }
    }
}
