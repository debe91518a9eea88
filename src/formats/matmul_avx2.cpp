// AVX2 + FMA (+ F16C) row kernels: the canonical dot product (kernels.h) with its 16 lanes held in two ymm
// registers, lanes 0-7 in `lo` and 8-15 in `hi`, so the sums happen in the same order as AVX-512's.
//
// Functions carry the target attribute (COLI_AVX2) rather than the file being built with -mavx2; see
// matmul_avx512.cpp for why. Only called when simd_detected() reports AVX2, FMA and F16C.
#include "formats/format.h"
#include "formats/kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#define COLI_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace coli::formats_internal {

namespace {

constexpr int kCacheLine = 64;     // bytes
constexpr int kHalf = kLanes / 2;  // lanes per ymm register
constexpr int kF32Sign = static_cast<int>(0x80000000u);
constexpr int kBf16Shift = 16;

// 16 weight values: elements [c, c+8) in lo, [c+8, c+16) in hi.
struct W16 {
    __m256 lo, hi;
};

// The fixed 16 -> 8 -> 4 -> 2 -> 1 pairwise tree of kernels.h (lanes 0-7 in lo, 8-15 in hi).
COLI_AVX2 inline float lanes_reduce_ymm(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

// The 16 codes of elements [c, c+16) as dwords in the permuted lane order of kernels.h (kNibblePerm, lanes
// 0-7 in lo, 8-15 in hi); only the low 4 bits are meaningful.
struct Nibbles16 {
    __m256i lo, hi;
};

COLI_AVX2 inline Nibbles16 nibbles_load16_permuted(const uint8_t* p) {
    long long bytes;
    std::memcpy(&bytes, p, sizeof(bytes));
    const __m256i all = _mm256_set1_epi64x(bytes);
    return {_mm256_srlv_epi32(all, _mm256_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12)),
            _mm256_srlv_epi32(all, _mm256_setr_epi32(16, 16, 20, 20, 24, 24, 28, 28))};
}

// Lanes (lo, hi) in permuted order, put back in canonical order.
COLI_AVX2 inline void lanes_unpermute(__m256& lo, __m256& hi) {
    alignas(32) float permuted[kLanes], canonical[kLanes];
    _mm256_store_ps(permuted, lo);
    _mm256_store_ps(permuted + kHalf, hi);
    for (int l = 0; l < kLanes; ++l) canonical[l] = permuted[kNibbleUnperm[l]];
    lo = _mm256_load_ps(canonical);
    hi = _mm256_load_ps(canonical + kHalf);
}

// 16 int8 values to two f32 registers times a scale.
COLI_AVX2 inline W16 int8x16_scale(__m128i q, __m256 scale) {
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, kHalf)));
    return {_mm256_mul_ps(lo, scale), _mm256_mul_ps(hi, scale)};
}

// Row decoders: the same contract as in matmul_avx512.cpp, 16 values as two registers.

struct F32Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 32;  // per element, in data
    static constexpr bool kPermuted = false;
    const float* p;
    F32Row() = default;
    F32Row(const WeightView& w, int64_t r) : p(static_cast<const float*>(w.data) + r * w.cols) {}
    COLI_AVX2 void block(int64_t) {}
    COLI_AVX2 W16 load(int64_t c) const { return {_mm256_loadu_ps(p + c), _mm256_loadu_ps(p + c + kHalf)}; }
};

struct Bf16Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 16;  // per element, in data
    static constexpr bool kPermuted = false;
    const uint16_t* p;
    Bf16Row() = default;
    Bf16Row(const WeightView& w, int64_t r) : p(static_cast<const uint16_t*>(w.data) + r * w.cols) {}
    COLI_AVX2 void block(int64_t) {}
    COLI_AVX2 static __m256 widen8(const uint16_t* q) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), kBf16Shift));
    }
    COLI_AVX2 W16 load(int64_t c) const { return {widen8(p + c), widen8(p + c + kHalf)}; }
};

struct F16Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 16;  // per element, in data
    static constexpr bool kPermuted = false;
    const uint16_t* p;
    F16Row() = default;
    F16Row(const WeightView& w, int64_t r) : p(static_cast<const uint16_t*>(w.data) + r * w.cols) {}
    COLI_AVX2 void block(int64_t) {}
    COLI_AVX2 W16 load(int64_t c) const {
        return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c))),
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c + kHalf)))};
    }
};

struct Int8Row {
    static constexpr int64_t kBlock = 0;
    static constexpr int kBits = 8;  // per element, in data
    static constexpr bool kPermuted = false;
    const int8_t* p;
    float s;
    __m256 scale;
    Int8Row() = default;
    Int8Row(const WeightView& w, int64_t r)
        : p(static_cast<const int8_t*>(w.data) + r * w.cols), s(float_load(w.scales, r)) {}
    COLI_AVX2 void block(int64_t) { scale = _mm256_set1_ps(s); }
    COLI_AVX2 W16 load(int64_t c) const {
        return int8x16_scale(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c)), scale);
    }
};

// int4_g64: q = nib - 8 as an integer, converted, times the group's scale: decode's product exactly.
// nib ^ 8 read as a signed 4-bit number is nib - 8, so q comes from shifting that nibble to the top of the
// lane and arithmetic-shifting it back down (two shifts instead of shift, mask and subtract).
struct Int4Row {
    static constexpr int64_t kBlock = kInt4Group;
    static constexpr int kBits = 4;  // per element, in data
    static constexpr bool kPermuted = true;
    const uint8_t* p;
    const void* scales;
    int64_t first_scale;
    __m256 scale;
    Int4Row() = default;
    Int4Row(const WeightView& w, int64_t r)
        : p(static_cast<const uint8_t*>(w.data) + r * (w.cols / 2)),
          scales(w.scales),
          first_scale(r * (w.cols / kInt4Group)) {}
    COLI_AVX2 void block(int64_t c) {
        scale = _mm256_set1_ps(float_load(scales, first_scale + c / kInt4Group));
    }
    COLI_AVX2 __m256 value8(__m256i all, __m256i to_top) const {
        constexpr int kTopNibble = 28;
        const __m256i q = _mm256_srai_epi32(_mm256_sllv_epi32(all, to_top), kTopNibble);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
    }
    COLI_AVX2 W16 load(int64_t c) const {
        // Lane j of the permuted order holds element 8 * (j % 2) + j / 2 (see kNibblePerm): dword j % 2 of
        // the broadcast qword, nibble j / 2, brought to bits 28-31 by a left shift of 28 - 4 * (j / 2).
        constexpr long long kFlipNibbleTops = 0x8888888888888888LL;
        long long bytes;
        std::memcpy(&bytes, p + c / 2, sizeof(bytes));
        const __m256i all = _mm256_set1_epi64x(bytes ^ kFlipNibbleTops);
        return {value8(all, _mm256_setr_epi32(28, 28, 24, 24, 20, 20, 16, 16)),
                value8(all, _mm256_setr_epi32(12, 12, 8, 8, 4, 4, 0, 0))};
    }
};

// mxfp4: an 8-entry table of |e2m1| * 2^(e-127) per block (exact products, as in decode), looked up with
// the code's low 3 bits; the code's bit 3 is the sign, moved to the f32 sign bit (so code 8 gives -0 too).
struct Mxfp4Row {
    static constexpr int64_t kBlock = kMxBlock;
    static constexpr int kBits = 4;  // per element, in data
    static constexpr bool kPermuted = true;
    const uint8_t* p;
    const uint8_t* scales;
    __m256 lut;
    Mxfp4Row() = default;
    Mxfp4Row(const WeightView& w, int64_t r)
        : p(static_cast<const uint8_t*>(w.data) + r * (w.cols / 2)),
          scales(static_cast<const uint8_t*>(w.scales) + r * (w.cols / kMxBlock)) {}
    COLI_AVX2 void block(int64_t c) {
        const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
        lut = _mm256_mul_ps(magnitudes, _mm256_set1_ps(kE8m0Values[scales[c / kMxBlock]]));
    }
    COLI_AVX2 __m256 value8(__m256i code) const {
        constexpr int kSignToTop = 28;  // code bit 3 -> bit 31
        const __m256i sign =
            _mm256_and_si256(_mm256_slli_epi32(code, kSignToTop), _mm256_set1_epi32(kF32Sign));
        return _mm256_xor_ps(_mm256_permutevar8x32_ps(lut, code), _mm256_castsi256_ps(sign));
    }
    COLI_AVX2 W16 load(int64_t c) const {
        const Nibbles16 code = nibbles_load16_permuted(p + c / 2);
        return {value8(code.lo), value8(code.hi)};
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
    __m256 scale;
    Fp8Row() = default;
    Fp8Row(const WeightView& w, int64_t r)
        : p(static_cast<const uint8_t*>(w.data) + r * w.cols),
          scales(w.scales),
          first_scale((r / kFp8Block) * fp8_scale_cols(w.cols)) {}
    COLI_AVX2 void block(int64_t c) {
        const float s = float_load(scales, first_scale + c / kFp8Block);
        scale = _mm256_set1_ps(kFolded ? s * kFp8Rescale : s);
    }
    COLI_AVX2 __m256 widen8(const uint8_t* q) const {
        const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
        __m256i bits = _mm256_slli_epi32(v, kFp8Shift);
        bits = _mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(kFp8KeepBits)));
        if constexpr (kNanFix) {
            const __m256i nan_abs = _mm256_set1_epi32(kFp8NanAbs);
            const __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(v, nan_abs), nan_abs);
            bits = _mm256_xor_si256(bits,
                                    _mm256_and_si256(nan, _mm256_set1_epi32(static_cast<int>(kFp8NanFix))));
        }
        __m256 value = _mm256_castsi256_ps(bits);
        if constexpr (!kFolded) value = _mm256_mul_ps(value, _mm256_set1_ps(kFp8Rescale));
        return _mm256_mul_ps(value, scale);
    }
    COLI_AVX2 W16 load(int64_t c) const { return {widen8(p + c), widen8(p + c + kHalf)}; }
};

// Rows [r, r + NR) for NT tokens: each 16-element chunk of a row is decoded once and used by every token;
// several rows at once give independent accumulators to hide the FMA latency.
template <class Row, int NR, int NT>
COLI_AVX2 void rows_tile(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r) {
    const int64_t cols = w.cols;
    const int64_t body = cols - cols % kLanes;  // the tail [body, cols) is zero-padded to 16 lanes
    const int64_t block = Row::kBlock > 0 ? Row::kBlock : std::max<int64_t>(body, 1);
    Row row[NR];
    __m256 lo[NR][NT], hi[NR][NT];
    for (int i = 0; i < NR; ++i) {
        row[i] = Row(w, r + i);
        for (int t = 0; t < NT; ++t) lo[i][t] = hi[i][t] = _mm256_setzero_ps();
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
            __m256 x_lo[NT], x_hi[NT];
            for (int t = 0; t < NT; ++t) {
                x_lo[t] = _mm256_loadu_ps(x + t * cols + c);
                x_hi[t] = _mm256_loadu_ps(x + t * cols + c + kHalf);
            }
            for (int i = 0; i < NR; ++i) {
                const W16 wv = row[i].load(c);
                for (int t = 0; t < NT; ++t) {
                    lo[i][t] = _mm256_fmadd_ps(x_lo[t], wv.lo, lo[i][t]);
                    hi[i][t] = _mm256_fmadd_ps(x_hi[t], wv.hi, hi[i][t]);
                }
            }
        }
    }
    if (body < cols) {
        // maskload masks for the tail of x: lane l is loaded when l < cols - body.
        const __m256i tail_n = _mm256_set1_epi32(static_cast<int>(cols - body));
        const __m256i mask_lo = _mm256_cmpgt_epi32(tail_n, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i mask_hi = _mm256_cmpgt_epi32(tail_n, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
        for (int i = 0; i < NR; ++i) {
            alignas(32) float tail[kLanes] = {};
            weight_decode_span(w, r + i, body, cols, tail);
            const __m256 w_lo = _mm256_load_ps(tail), w_hi = _mm256_load_ps(tail + kHalf);
            for (int t = 0; t < NT; ++t) {
                const float* xt = x + t * cols + body;
                lo[i][t] = _mm256_fmadd_ps(_mm256_maskload_ps(xt, mask_lo), w_lo, lo[i][t]);
                hi[i][t] = _mm256_fmadd_ps(_mm256_maskload_ps(xt + kHalf, mask_hi), w_hi, hi[i][t]);
            }
        }
    }
    for (int i = 0; i < NR; ++i) {
        for (int t = 0; t < NT; ++t) {
            if constexpr (Row::kPermuted) lanes_unpermute(lo[i][t], hi[i][t]);
            y[t * ldy + r + i] = lanes_reduce_ymm(lo[i][t], hi[i][t]);
        }
    }
}

// Rows [r0, r1) for NT tokens, in tiles of NR rows, then single rows.
template <class Row, int NT>
void rows_run(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    constexpr int NR = NT <= 2 ? 2 : 1;  // 2 * NR * NT accumulators in [4, 8]: 16 ymm registers in all
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

void rows_avx2(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
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

#else  // not x86-64: simd_detected() never returns avx2, so this is never called

namespace coli::formats_internal {
void rows_avx2(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    rows_scalar(w, x, nt, y, ldy, r0, r1);
}
}  // namespace coli::formats_internal

#endif
