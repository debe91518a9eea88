#version 450
// x for the integer-dot GEMV of int4 weights (gemv.comp with COLI_INT_DOT): each block of 32 columns of a
// row of x (one 16-byte chunk of int4 codes) is scaled by the power of two 2^k that puts its largest |x| in
// [2^21, 2^22), rounded to an integer xi (exact to 2^-22 of that largest |x|) and split into three signed
// bytes, xi = 2^16 a + 2^8 b + c. Each byte plane is packed as the codes are: for code word w of the chunk,
// one word of the bytes of its even columns (its low nibbles) and one of its odd columns (its high nibbles).
//
// Output, [rows][kEntries][blocks] uvec4 (entry-major, so that a team's lanes, which take consecutive
// chunks, load consecutive uvec4s): entries 2p and 2p + 1 are plane p (a, b, c) of code words 0, 1 and 2, 3
// as (even, odd, even, odd) words; entry 6 holds 8 times each plane's sum over the block (the int4 zero
// point 8, subtracted exactly in integers) and 2^-k as float bits, or NaN when the block holds a
// non-finite x (the GEMV's result is then NaN).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 64) in;
const uint kBlockCols = 32u;  // columns per block: one chunk of int4 codes
const uint kEntries = 7u;     // uvec4s per block
const uint kPlanes = 3u;
const int kTopExp = 22;       // the block's largest |x| lies in [2^(kTopExp - 1), 2^kTopExp) after scaling
const int kMaxShift = 126;    // 2^-k stays a normal float
const int kZeroPoint = 8;     // int4_g64 stores q + 8

layout(std430, binding = 0) readonly buffer X { vec4 x4[]; };   // [rows, cols / 4]
layout(std430, binding = 1) writeonly buffer Q { uvec4 q[]; };  // [rows, kEntries, cols / kBlockCols]
layout(push_constant) uniform Push {
    uint rows;
    uint cols;  // a multiple of kBlockCols
} pc;

// Byte (v & 0xff) at byte position `at` (0..3).
uint byte_at(int v, uint at) {
    return (uint(v) & 0xffu) << (8u * at);
}

void main() {
    const uint blocks = pc.cols / kBlockCols;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.rows * blocks; i += stride) {
        const uint row = i / blocks, block = i % blocks;
        vec4 v[kBlockCols / 4u];
        float max_abs = 0.0;
        bool finite = true;
        [[unroll]] for (uint j = 0u; j < kBlockCols / 4u; ++j) {
            v[j] = x4[(row * pc.cols + block * kBlockCols) / 4u + j];
            const vec4 a = abs(v[j]);
            max_abs = max(max_abs, max(max(a.x, a.y), max(a.z, a.w)));
            finite = finite && !any(isnan(v[j])) && !any(isinf(v[j]));
        }
        int e = 0;
        frexp(max_abs, e);  // max_abs in [2^(e-1), 2^e)
        const int k = max_abs == 0.0 ? 0 : min(kTopExp - e, kMaxShift);

        uvec4 planes[kPlanes * 2u];  // plane p: entries 2p, 2p + 1
        [[unroll]] for (uint p = 0u; p < kPlanes * 2u; ++p) planes[p] = uvec4(0u);
        ivec3 sums = ivec3(0);
        [[unroll]] for (uint col = 0u; col < kBlockCols; ++col) {
            const int xi = finite ? int(roundEven(ldexp(v[col / 4u][col % 4u], k))) : 0;
            const int c = ((xi + 128) & 255) - 128, r = (xi - c) >> 8;
            const int b = ((r + 128) & 255) - 128, a = (r - b) >> 8;
            sums += ivec3(a, b, c);
            // Code word w = col / 8; its nibble n = col % 8 is byte n / 2's low (even n) or high half.
            const uint w = col / 8u, n = col % 8u, slot = (w % 2u) * 2u + n % 2u, at = n / 2u;
            planes[w / 2u][slot] |= byte_at(a, at);
            planes[2u + w / 2u][slot] |= byte_at(b, at);
            planes[4u + w / 2u][slot] |= byte_at(c, at);
        }
        const uint base = row * kEntries * blocks + block;
        [[unroll]] for (uint p = 0u; p < kPlanes * 2u; ++p) q[base + p * blocks] = planes[p];
        const float inv = finite ? ldexp(1.0, -k) : kNan;
        q[base + 6u * blocks] = uvec4(uvec3(sums * kZeroPoint), floatBitsToUint(inv));
    }
}
