// Helpers shared by the formats tests.
#pragma once

#include "formats/format.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace coli::test {

inline uint32_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof(b));
    return b;
}

inline float float_of(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
}

inline constexpr Format kAllFormats[] = {Format::f32,           Format::bf16,     Format::f16,
                                         Format::int8_row,      Format::int4_g64, Format::mxfp4,
                                         Format::fp8_e4m3_block};

// Normally distributed values with per-row magnitudes that vary over a few decades, so that scales differ
// from row to row and block to block.
inline std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> decade(-2.0f, 2.0f);
    std::vector<float> m(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float magnitude = std::pow(10.0f, decade(rng));
        for (int64_t c = 0; c < cols; ++c) m[r * cols + c] = normal(rng) * magnitude;
    }
    return m;
}

inline std::vector<float> decode_all(const WeightView& w) {
    std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
    for (int64_t r = 0; r < w.rows; ++r) weight_decode_row(w, r, out.data() + r * w.cols);
    return out;
}

}  // namespace coli::test
