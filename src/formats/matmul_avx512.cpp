// AVX-512 row kernels: the canonical dot product (kernels.h) with the 16 lanes in one zmm register.
//
// Every function that uses AVX-512 carries the target attribute itself (COLI_AVX512) instead of the file
// being compiled with -mavx512f: with a per-file flag, inline functions from headers (std::min, ...) would
// be emitted with AVX-512 code here and the linker could pick that copy for the whole program.
// Only called when simd_detected() says the CPU has these features.
#include "formats/format.h"
#include "formats/kernels.h"

#if defined(__x86_64__)

// GCC 12 warns falsely inside its own AVX-512 intrinsics (_mm512_undefined_*, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define COLI_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace coli::formats_internal {

namespace {

constexpr int kCacheLine = 64;  // bytes
constexpr int kBf16Shift = 16;  // bf16 is the top half of a f32

// The fixed 16 -> 8 -> 4 -> 2 -> 1 pairwise tree of kernels.h.
COLI_AVX512 inline float lanes_reduce_zmm(__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

COLI_AVX512 inline __m512i lanes_index(const int (&index)[kLanes]) {
    return _mm512_loadu_si512(static_cast<const void*>(index));
}

// 16 packed 4-bit codes (8 bytes, element 2j in the low nibble of byte j) as dword indices in the permuted
// lane order of kernels.h (kNibblePerm). Only the low 4 bits of each lane are meaningful; vpermps ignores the
// rest.
COLI_AVX512 inline __m512i nibbles_load16_permuted(const uint8_t* p) {
    uint64_t bytes;
    std::memcpy(&bytes, p, sizeof(bytes));
    const __m512i shifts = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
    return _mm512_srlv_epi32(_mm512_set1_epi64(static_cast<long long>(bytes)), shifts);
}

// Row decoders. Each yields the weight_decode_row values of row r, 16 elements at a time (c a multiple of
// 16). kBlock is the number of elements sharing a scale (0: one scale per row, or none); the kernel calls
// block(c) at the start of every block before the load(c) calls inside it.

struct F32Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 32;  // per element, in data
    static constexpr bool kPermuted = false;
    const float* p;
    F32Row() = default;
    F32Row(const WeightView& w, int64_t r) : p(static_cast<const float*>(w.data) + r * w.cols) {}
    COLI_AVX512 void block(int64_t) {}
    COLI_AVX512 __m512 load(int64_t c) const { return _mm512_loadu_ps(p + c); }
};

struct Bf16Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 16;  // per element, in data
    static constexpr bool kPermuted = false;
    const uint16_t* p;
    Bf16Row() = default;
    Bf16Row(const WeightView& w, int64_t r) : p(static_cast<const uint16_t*>(w.data) + r * w.cols) {}
    COLI_AVX512 void block(int64_t) {}
    COLI_AVX512 __m512 load(int64_t c) const {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + c));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), kBf16Shift));
    }
};

struct F16Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 16;  // per element, in data
    static constexpr bool kPermuted = false;
    const uint16_t* p;
    F16Row() = default;
    F16Row(const WeightView& w, int64_t r) : p(static_cast<const uint16_t*>(w.data) + r * w.cols) {}
    COLI_AVX512 void block(int64_t) {}
    COLI_AVX512 __m512 load(int64_t c) const {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + c)));
    }
};

struct Int8Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 8;  // per element, in data
    static constexpr bool kPermuted = false;
    const int8_t* p;
    float s;
    __m512 scale;
    Int8Row() = default;
    Int8Row(const WeightView& w, int64_t r)
        : p(static_cast<const int8_t*>(w.data) + r * w.cols), s(float_load(w.scales, r)) {}
    COLI_AVX512 void block(int64_t) { scale = _mm512_set1_ps(s); }
    COLI_AVX512 __m512 load(int64_t c) const {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), scale);
    }
};

// int4_g64: a 16-entry table of (nib - 8) * s per group; the lookup gives exactly decode's product.
struct Int4Row {
    static constexpr int64_t kBlock = kInt4Group;
    static constexpr int kBits = 4;          // per element, in data
    static constexpr bool kPermuted = true;  // kNibblePerm lane order (kernels.h)
    const uint8_t* p;
    const void* scales;
    int64_t first_scale;
    __m512 lut;
    Int4Row() = default;
    Int4Row(const WeightView& w, int64_t r)
        : p(static_cast<const uint8_t*>(w.data) + r * (w.cols / 2)),
          scales(w.scales),
          first_scale(r * (w.cols / kInt4Group)) {}
    COLI_AVX512 void block(int64_t c) {
        const __m512 codes = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
        lut = _mm512_mul_ps(codes, _mm512_set1_ps(float_load(scales, first_scale + c / kInt4Group)));
    }
    COLI_AVX512 __m512 load(int64_t c) const {
        return _mm512_permutexvar_ps(nibbles_load16_permuted(p + c / 2), lut);
    }
};

// mxfp4: a 16-entry table of e2m1 * 2^(e-127) per block (exact products, as in decode).
struct Mxfp4Row {
    static constexpr int64_t kBlock = kMxBlock;
    static constexpr int kBits = 4;          // per element, in data
    static constexpr bool kPermuted = true;  // kNibblePerm lane order (kernels.h)
    const uint8_t* p;
    const uint8_t* scales;
    __m512 lut;
    Mxfp4Row() = default;
    Mxfp4Row(const WeightView& w, int64_t r)
        : p(static_cast<const uint8_t*>(w.data) + r * (w.cols / 2)),
          scales(static_cast<const uint8_t*>(w.scales) + r * (w.cols / kMxBlock)) {}
    COLI_AVX512 void block(int64_t c) {
        const __m512 e2m1 = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                           -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
        lut = _mm512_mul_ps(e2m1, _mm512_set1_ps(kE8m0Values[scales[c / kMxBlock]]));
    }
    COLI_AVX512 __m512 load(int64_t c) const {
        return _mm512_permutexvar_ps(nibbles_load16_permuted(p + c / 2), lut);
    }
};

// fp8_e4m3_block: bit manipulation to f32 (kernels.h, kFp8Shift), times the block's scale; with kFolded
// the 2^120 factor rides in the scale; with kNanFix NaN codes become NaN (else they would read as 480:
// WeightView::nan_free leaves it out).
template <bool kFolded, bool kNanFix>
struct Fp8Row {
    static constexpr int64_t kBlock = kFp8Block;
    static constexpr int kBits = 8;  // per element, in data
    static constexpr bool kPermuted = false;
    const uint8_t* p;
    const void* scales;
    int64_t first_scale;
    __m512 scale;
    Fp8Row() = default;
    Fp8Row(const WeightView& w, int64_t r)
        : p(static_cast<const uint8_t*>(w.data) + r * w.cols),
          scales(w.scales),
          first_scale((r / kFp8Block) * fp8_scale_cols(w.cols)) {}
    COLI_AVX512 void block(int64_t c) {
        const float s = float_load(scales, first_scale + c / kFp8Block);
        scale = _mm512_set1_ps(kFolded ? s * kFp8Rescale : s);
    }
    COLI_AVX512 __m512 load(int64_t c) const {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c));
        __m512i bits = _mm512_slli_epi32(_mm512_cvtepi8_epi32(bytes), kFp8Shift);
        bits = _mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(kFp8KeepBits)));
        if constexpr (kNanFix) {
            const __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_and_si128(bytes, _mm_set1_epi8(kFp8NanAbs)),
                                                      _mm_set1_epi8(kFp8NanAbs));
            bits = _mm512_mask_xor_epi32(bits, nan, bits, _mm512_set1_epi32(static_cast<int>(kFp8NanFix)));
        }
        __m512 value = _mm512_castsi512_ps(bits);
        if constexpr (!kFolded) value = _mm512_mul_ps(value, _mm512_set1_ps(kFp8Rescale));
        return _mm512_mul_ps(value, scale);
    }
};

// Rows [r, r + NR) for NT tokens: each 16-element chunk of a row is decoded once and used by every token.
// Several rows at once give NR * NT independent accumulators: one alone would wait on the FMA latency
// (4 cycles per 16 elements), which is slower than memory for the 4-bit formats.
template <class Row, int NR, int NT>
COLI_AVX512 void rows_tile(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r) {
    const int64_t cols = w.cols;
    const int64_t body = cols - cols % kLanes;  // the tail [body, cols) is zero-padded to one register
    const int64_t block = Row::kBlock > 0 ? Row::kBlock : std::max<int64_t>(body, 1);
    Row row[NR];
    __m512 acc[NR][NT];
    for (int i = 0; i < NR; ++i) {
        row[i] = Row(w, r + i);
        for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_setzero_ps();
    }
    // The rows of the next tile, prefetched a cache line at a time while this tile is computed: each row is
    // its own stream, and hardware prefetchers stop at 4 KiB pages (an int4 row of 8192 is one page), so
    // without this every tile would begin with cold misses.
    constexpr int64_t kLineElems = int64_t{kCacheLine} * 8 / Row::kBits;
    const int64_t row_bytes = w.cols * Row::kBits / 8;
    const char* next[NR];
    for (int i = 0; i < NR; ++i)
        next[i] = static_cast<const char*>(w.data) + std::min(r + NR + i, w.rows - 1) * row_bytes;
    for (int64_t b = 0; b < body; b += block) {
        for (int i = 0; i < NR; ++i) row[i].block(b);
        const int64_t end = std::min(body, b + block);
        for (int64_t c = b; c < end; c += kLanes) {
            if (c % kLineElems == 0)
                for (int i = 0; i < NR; ++i) _mm_prefetch(next[i] + c * Row::kBits / 8, _MM_HINT_T0);
            // The NR decoded chunks stay in registers while each token's x passes by once.
            __m512 wv[NR];
            for (int i = 0; i < NR; ++i) wv[i] = row[i].load(c);
            for (int t = 0; t < NT; ++t) {
                const __m512 xv = _mm512_loadu_ps(x + t * cols + c);
                for (int i = 0; i < NR; ++i) acc[i][t] = _mm512_fmadd_ps(xv, wv[i], acc[i][t]);
            }
        }
    }
    if (body < cols) {
        const auto tail_mask = static_cast<__mmask16>((1u << (cols - body)) - 1u);
        __m512 xv[NT];
        for (int t = 0; t < NT; ++t) xv[t] = _mm512_maskz_loadu_ps(tail_mask, x + t * cols + body);
        for (int i = 0; i < NR; ++i) {
            alignas(64) float tail[kLanes] = {};
            weight_decode_span(w, r + i, body, cols, tail);
            const __m512 wv = _mm512_load_ps(tail);
            for (int t = 0; t < NT; ++t) acc[i][t] = _mm512_fmadd_ps(xv[t], wv, acc[i][t]);
        }
    }
    const __m512i unperm = lanes_index(kNibbleUnperm);
    for (int i = 0; i < NR; ++i) {
        for (int t = 0; t < NT; ++t) {
            if constexpr (Row::kPermuted) acc[i][t] = _mm512_permutexvar_ps(unperm, acc[i][t]);
            y[t * ldy + r + i] = lanes_reduce_zmm(acc[i][t]);
        }
    }
}

// Rows [r0, r1) for NT tokens, in tiles of NR rows, then single rows.
template <class Row, int NT>
void rows_run(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    // NR * NT accumulators (at most 16), NR weight registers and one of x within the 32 registers.
    constexpr int NR = 4;
    int64_t r = r0;
    for (; r + NR <= r1; r += NR) rows_tile<Row, NR, NT>(w, x, y, ldy, r);
    for (; r < r1; ++r) rows_tile<Row, 1, NT>(w, x, y, ldy, r);
}

template <class Row>
void rows_tokens(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    static_assert(kTokenGroup == 4, "rows_tokens instantiates 1..4 tokens");
    if constexpr (Row::kPermuted) x = x_permute_nibble_order(x, nt, w.cols);
    switch (nt) {
        case 1:
            return rows_run<Row, 1>(w, x, y, ldy, r0, r1);
        case 2:
            return rows_run<Row, 2>(w, x, y, ldy, r0, r1);
        case 3:
            return rows_run<Row, 3>(w, x, y, ldy, r0, r1);
        default:
            return rows_run<Row, 4>(w, x, y, ldy, r0, r1);
    }
}

}  // namespace

void rows_avx512(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    switch (w.format) {
        case Format::f32:
            return rows_tokens<F32Row>(w, x, nt, y, ldy, r0, r1);
        case Format::bf16:
            return rows_tokens<Bf16Row>(w, x, nt, y, ldy, r0, r1);
        case Format::f16:
            return rows_tokens<F16Row>(w, x, nt, y, ldy, r0, r1);
        case Format::int8_row:
            return rows_tokens<Int8Row>(w, x, nt, y, ldy, r0, r1);
        case Format::int4_g64:
            return rows_tokens<Int4Row>(w, x, nt, y, ldy, r0, r1);
        case Format::mxfp4:
            return rows_tokens<Mxfp4Row>(w, x, nt, y, ldy, r0, r1);
        case Format::fp8_e4m3_block:
            return fp8_rows_dispatch<Fp8Row>(
                w, r0, r1, [&]<class Row>() { rows_tokens<Row>(w, x, nt, y, ldy, r0, r1); });
    }
}

}  // namespace coli::formats_internal

#else  // not x86-64: simd_detected() never returns avx512, so this is never called

namespace coli::formats_internal {
void rows_avx512(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    rows_scalar(w, x, nt, y, ldy, r0, r1);
}
}  // namespace coli::formats_internal

#endif
