// Weight formats: how a 2-D weight matrix [rows, cols] (row = output feature, cols = the reduction
// dimension, as nn.Linear / safetensors store it) is encoded in memory, and the CPU kernels on it.
//
// Layouts (element (r, c) of the matrix; "2j low nibble" = element 2j in bits 0-3, 2j+1 in bits 4-7):
//   f32             data: float[rows][cols]
//   bf16, f16       data: uint16[rows][cols]
//   int8_row        data: int8[rows][cols]            scales: float[rows]              w = q * s[r]
//   int4_g64        data: uint8[rows][cols/2] 2j low  scales: float[rows][cols/64]     w = (nib - 8) * s
//   mxfp4           data: uint8[rows][cols/2] 2j low  scales: uint8 e8m0[rows][cols/32] w = e2m1 * 2^(s-127)
//                   (the compressed-tensors weight_packed/weight_scale and the gpt-oss blocks/scales layouts)
//   fp8_e4m3_block  data: uint8 e4m3[rows][cols]      scales: float[ceil(rows/128)][ceil(cols/128)]
//                   (DeepSeek-style weight_scale_inv: w = fp8 * s[r/128][c/128])
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace coli {

class ThreadPool;

enum class Format : uint8_t { f32, bf16, f16, int8_row, int4_g64, mxfp4, fp8_e4m3_block };

inline constexpr int kInt4Group = 64;  // int4_g64: elements per scale
inline constexpr int kMxBlock = 32;    // mxfp4: elements per e8m0 scale
inline constexpr int kFp8Block = 128;  // fp8_e4m3_block: scale block edge

std::string_view format_name(Format f);  // "f32", "bf16", "int8", "int4-g64", "mxfp4", "fp8-e4m3-block"
std::optional<Format> format_parse(std::string_view s);
bool format_is_quantized(Format f);  // lossy encodings of f32 (int8, int4, mxfp4, fp8)

// A read-only view of an encoded weight matrix in host memory. Does not own its bytes.
struct WeightView {
    Format format = Format::f32;   // encoding of data/scales, see the table above
    int64_t rows = 0;              // output features
    int64_t cols = 0;              // input features (the reduction dimension)
    const void* data = nullptr;    // codes
    const void* scales = nullptr;  // per-format scales, nullptr for f32/bf16/f16
    bool nan_free = false;         // fp8: checked to hold no NaN code, so the CPU matmul skips its NaN fix

    size_t data_bytes() const;   // bytes of data for this format and shape
    size_t scale_bytes() const;  // bytes of scales (0 for unscaled formats)
};

// An owned encoded weight, produced by weight_encode (quantization at load, tests, synth).
struct EncodedWeight {
    Format format = Format::f32;
    int64_t rows = 0, cols = 0;
    std::vector<uint8_t> data;
    std::vector<uint8_t> scales;
    WeightView view() const {
        return {format, rows, cols, data.data(), scales.empty() ? nullptr : scales.data()};
    }
};

// Checks that (format, rows, cols) is encodable (e.g. cols % 64 == 0 for int4_g64); throws coli::Error.
void format_check_shape(Format f, int64_t rows, int64_t cols);

// Encodes w[rows][cols] (f32) into format f: round-to-nearest-even for bf16/f16, symmetric absmax scales
// for int8/int4, OCP MX rules for mxfp4 (shared exponent from the block absmax), absmax/448 per 128x128
// block for fp8. NaN/inf inputs follow each format's rules (documented in format.cpp).
EncodedWeight weight_encode(Format f, const float* w, int64_t rows, int64_t cols);

// Whether none of the n fp8 e4m3 codes is a NaN code (0x7f, 0xff): what WeightView::nan_free records. The
// loader checks resident weights once, the expert store each part as its read lands.
bool fp8_codes_nan_free(const uint8_t* codes, size_t n);

// Rows [r0, r0 + count) of w as a view of the same bytes (no copy), when the scales allow it: always, but
// for fp8_e4m3_block only from a row that starts a 128-row scale block, over whole blocks or to the last row.
std::optional<WeightView> weight_rows_view(const WeightView& w, int64_t r0, int64_t count);

// Decodes row r of w into out[cols] (exact: every code maps to one f32 value).
void weight_decode_row(const WeightView& w, int64_t r, float* out);

// y[n][rows] = x[n][cols] · wᵀ, all f32 except w.
// Every dot product has one canonical summation order (documented in format.cpp), so matmul_ref, the
// SIMD paths and any thread count give bit-identical results, and n = 1 equals any row of n > 1.
void matmul_ref(const WeightView& w, const float* x, int64_t n, float* y);
void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// One matmul of a batch: y[n][w.rows] = x[n][w.cols] · wᵀ.
struct MatmulTask {
    WeightView w;    // the weights
    const float* x;  // [n, w.cols]
    int64_t n;       // tokens
    float* y;        // [n, w.rows]
};
// Every task's matmul, their rows split over the pool together in one parallel loop: each result is the
// one matmul() gives, bit for bit, in one handover instead of one per task (a decode step's experts).
void matmul_batch(const MatmulTask* tasks, size_t count,
                  ThreadPool& pool);  // (pointer, count): nvcc reads this as C++17

// Scalar conversions (round-to-nearest-even; NaN stays NaN; f16 handles subnormals). bf16_to_f32 is inline
// so that loops of it vectorize (a row decode, MLA's per-head weights on the CPU).
inline float bf16_to_f32(uint16_t h) {
    constexpr int kBf16Shift = 16;  // a bf16 is the top half of an f32
    const uint32_t bits = static_cast<uint32_t>(h) << kBf16Shift;
    float f;
    std::memcpy(&f, &bits, sizeof f);  // C++17 (nvcc includes this header): no std::bit_cast
    return f;
}
uint16_t f32_to_bf16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float fp8_e4m3_to_f32(uint8_t b);  // OCP e4m3fn: no inf, 0x7f/0xff are NaN
uint8_t f32_to_fp8_e4m3(float f);  // saturates to +-448
float e2m1_to_f32(uint8_t code);   // code in [0, 16)
float e8m0_to_f32(uint8_t e);      // 2^(e-127); 0xff is NaN

// The instruction set the fast paths use; chosen at run time, overridable for tests and benchmarks.
enum class Simd : uint8_t { scalar, avx2, avx512 };
Simd simd_detected();   // best the CPU supports
Simd simd_active();     // what matmul uses now
void simd_set(Simd s);  // clamps to simd_detected()
std::string_view simd_name(Simd s);

}  // namespace coli
