// Function multiversioning for loops in files built for baseline x86-64: COLI_SIMD_CLONES before a function
// makes GCC compile it for AVX-512, AVX2 and the baseline and pick one when the program loads. Products and
// sums stay separate instructions, never contracted into FMAs, so every version gives the baseline's results
// bit for bit.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COLI_SIMD_CLONES \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define COLI_SIMD_CLONES
#endif
