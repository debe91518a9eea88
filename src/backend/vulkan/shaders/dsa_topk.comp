#version 450
// DSA's selection rule (backend.h dsa_topk_row) on the device, one workgroup per query row i: the positions
// of the top_k largest of the row's visible scores ((pos0 + i + 1) / ratio of them: ratio 1 for dsa_select,
// positions per compressed key for index_topk), scores descending and ties to the lower position, -1 past
// the visible count. As CUDA's dsa_topk.cu, in 32-bit types and core GLSL:
//   1. radix select over order-preserving integer keys, four passes of 8 bits with workgroup histograms:
//      the key T of the want-th largest score (want = min(top_k, visible)) and how many scores equal to T
//      it takes;
//   2. collection into the row's part of `picked`: every key above T (any order), then the first ties in
//      position order (a workgroup scan of each chunk of positions that holds ties still wanted);
//   3. a bitonic sort of the picked (key, position) pairs, then their positions written out.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
const uint kThreads = 256u;
const uint kDigitBits = 8u;
const uint kBins = 1u << kDigitBits;
const uint kDigitMask = kBins - 1u;
const int kTopShift = 24;                // the first pass's digit: key bits 24..31
const uint kSignBit = 0x80000000u;
const uint kEmptyPosition = 0xffffffffu;  // a pair past want: key 0 and this sort after every picked pair

layout(std430, binding = 0) readonly buffer Scores { float scores[]; };   // [n, total]
layout(std430, binding = 1) writeonly buffer Out { float positions[]; };  // [n, top_k]
layout(std430, binding = 2) coherent buffer Picked { uvec2 picked[]; };   // [n, stride]: (key, position)
layout(push_constant) uniform Push {
    uint n;       // query rows
    uint total;   // scores per row
    uint pos0;    // position of query 0: row i sees pos0 + i + 1 keys
    uint top_k;   // positions per row
    uint stride;  // a power of two >= top_k: each row's part of picked
    uint ratio;   // positions per key
} pc;

shared uint hist[kBins];
shared uint scan[kThreads];
shared uint found_digit, found_remaining, above_count, chunk_ties, ties_taken;

// A key whose unsigned order is the scores' float order; -0 and +0 are equal, as they compare in C++.
uint score_key(float x) {
    const uint bits = floatBitsToUint(x == 0.0 ? 0.0 : x);
    return (bits & kSignBit) != 0u ? ~bits : bits | kSignBit;
}

// Whether pair a goes before pair b: key descending, then position ascending.
bool before(uvec2 a, uvec2 b) {
    return a.x > b.x || (a.x == b.x && a.y < b.y);
}

void main() {
    const uint i = group_index();
    if (i >= pc.n) return;  // the whole workgroup
    const uint t = gl_LocalInvocationID.x;
    const uint visible = (pc.pos0 + i + 1u) / pc.ratio, want = min(visible, pc.top_k);
    const uint row = i * pc.total, base = i * pc.stride;

    // 1. The key T of the want-th largest score, digit by digit from the top.
    uint prefix = 0u, prefix_mask = 0u, remaining = want;
    for (int shift = kTopShift; shift >= 0; shift -= int(kDigitBits)) {
        for (uint b = t; b < kBins; b += kThreads) hist[b] = 0u;
        barrier();
        for (uint j = t; j < visible; j += kThreads) {
            const uint key = score_key(scores[row + j]);
            if ((key & prefix_mask) == prefix) atomicAdd(hist[(key >> shift) & kDigitMask], 1u);
        }
        barrier();
        if (t == 0u) {  // the digit whose keys, with those above it, first reach `remaining`
            uint above = 0u, d = kDigitMask;
            while (d > 0u && above + hist[d] < remaining) above += hist[d--];
            found_digit = d;
            found_remaining = remaining - above;
        }
        barrier();
        prefix |= found_digit << shift;
        prefix_mask |= kDigitMask << shift;
        remaining = found_remaining;
    }
    const uint threshold = prefix, ties_wanted = remaining, above_wanted = want - remaining;

    // 2. Every key above T, then the first ties_wanted keys equal to T in position order.
    if (t == 0u) {
        above_count = 0u;
        ties_taken = 0u;
    }
    barrier();
    for (uint j0 = 0u; j0 < visible; j0 += kThreads) {
        const uint j = j0 + t;
        const uint key = j < visible ? score_key(scores[row + j]) : 0u;
        const bool tie = j < visible && key == threshold;
        if (j < visible && key > threshold) picked[base + atomicAdd(above_count, 1u)] = uvec2(key, j);
        if (t == 0u) chunk_ties = 0u;
        barrier();
        if (tie) atomicAdd(chunk_ties, 1u);
        barrier();
        if (chunk_ties > 0u && ties_taken < ties_wanted) {  // uniform: shared values after a barrier
            scan[t] = tie ? 1u : 0u;  // inclusive prefix sums of the chunk's ties
            barrier();
            for (uint offset = 1u; offset < kThreads; offset *= 2u) {
                const uint v = scan[t] + (t >= offset ? scan[t - offset] : 0u);
                barrier();
                scan[t] = v;
                barrier();
            }
            const uint rank = ties_taken + scan[t] - 1u;
            if (tie && rank < ties_wanted) picked[base + above_wanted + rank] = uvec2(key, j);
            barrier();
            if (t == 0u) ties_taken += scan[kThreads - 1u];
        }
        barrier();
    }

    // 3. Sort the want picked pairs, padded to a power of two, and write their positions.
    uint width = 1u;
    while (width < want) width *= 2u;
    for (uint s = want + t; s < width; s += kThreads) picked[base + s] = uvec2(0u, kEmptyPosition);
    memoryBarrierBuffer();
    barrier();
    for (uint size = 2u; size <= width; size *= 2u) {
        for (uint stride = size / 2u; stride > 0u; stride /= 2u) {
            for (uint s = t; s < width; s += kThreads) {
                const uint partner = s ^ stride;
                if (partner <= s) continue;
                const uvec2 a = picked[base + s], b = picked[base + partner];
                if (before(b, a) == ((s & size) == 0u)) {
                    picked[base + s] = b;
                    picked[base + partner] = a;
                }
            }
            memoryBarrierBuffer();
            barrier();
        }
    }
    for (uint s = t; s < pc.top_k; s += kThreads)
        positions[i * pc.top_k + s] = s < want ? float(picked[base + s].y) : -1.0;
}
