#version 450
// Checks the element layout that gemv_coop.comp writes its cooperative matrices with (NVIDIA's, as
// gemv_coop.comp describes it): one subgroup fills an A (16x16 f16), a B (16x8 f16) and a C (16x8 f32) element
// by element with the value of each element's place (row * columns + column) as that layout assigns places
// to lanes, and stores them row-major, then their product D = A B + C; the host compares. The matrices'
// lengths per lane go last.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require

layout(local_size_x = 32) in;
const uint kRows = 16u, kK = 16u, kN = 8u;       // A: kRows x kK, B: kK x kN, C: kRows x kN
const uint kHalfRows = 8u;                       // a lane's second row: 8 below its first
const uint kAWords = kRows * kK / 2u;            // f16 pairs of A
const uint kBWords = kK * kN / 2u;               // f16 pairs of B
const uint kCWords = kRows * kN;                 // floats of C
layout(std430, binding = 0) writeonly buffer Out { uint words[]; };  // A, B, C, D, then the three lengths

#define MatA fcoopmatNV<16, gl_ScopeSubgroup, kRows, kK>
#define MatB fcoopmatNV<16, gl_ScopeSubgroup, kK, kN>
#define MatC fcoopmatNV<32, gl_ScopeSubgroup, kRows, kN>

void main() {
    const uint lane = gl_SubgroupInvocationID, g = lane / 4u, quad = lane % 4u;
    MatA a;
    MatB b;
    MatC c;
    for (uint i = 0u; i < a.length(); ++i)
        a[i] = float16_t((g + kHalfRows * (i >> 2u)) * kK + 2u * quad + (i & 1u) + kHalfRows * ((i >> 1u) & 1u));
    for (uint i = 0u; i < b.length(); ++i)
        b[i] = float16_t((2u * quad + (i & 1u) + kHalfRows * (i >> 1u)) * kN + g);
    for (uint i = 0u; i < c.length(); ++i)
        c[i] = float((g + kHalfRows * (i >> 1u)) * kN + 2u * quad + (i & 1u));
    coopMatStoreNV(a, words, 0u, kK / 2u, false);
    coopMatStoreNV(b, words, kAWords, kN / 2u, false);
    coopMatStoreNV(c, words, kAWords + kBWords, kN, false);
    coopMatStoreNV(coopMatMulAddNV(a, b, c), words, kAWords + kBWords + kCWords, kN, false);
    if (lane == 0u) {
        const uint end = kAWords + kBWords + 2u * kCWords;
        words[end] = a.length();
        words[end + 1u] = b.length();
        words[end + 2u] = c.length();
    }
}
