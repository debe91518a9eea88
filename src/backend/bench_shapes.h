// The shapes and formats that every GPU backend's `coli test-ops --bench` measures, so that their figures
// sit side by side: decode GEMVs of real MoE expert matrices, and decode MoE layers of real models.
#pragma once

#include <cstdint>

#include "formats/format.h"

namespace coli {

// One weight matrix of a decode GEMV.
struct BenchShape {
    int64_t rows, cols;
};
// MoE expert matrices (DeepSeek V3 / Kimi down and gate: 7168 x 2048 and 2048 x 7168; GLM-5: 6144 x 2048)
// and one matrix larger than an H200's L2 cache on its own.
inline constexpr BenchShape kBenchGemvShapes[] = {{7168, 2048}, {2048, 7168}, {6144, 2048}, {8192, 8192}};

// The routed experts of one decode MoE layer: kBenchExperts experts of gate and up [d_ff, d_model] and
// down [d_model, d_ff].
struct BenchMoeShape {
    const char* model;  // whose layer it is
    int64_t d_model, d_ff;
};
inline constexpr int kBenchExperts = 8;  // routed experts per token (DeepSeek V3, Kimi, GLM-5)
inline constexpr BenchMoeShape kBenchMoeShapes[] = {{"DeepSeek V3 / Kimi", 7168, 2048},
                                                    {"GLM-5", 6144, 2048}};

inline constexpr Format kBenchFormats[] = {Format::f32,           Format::bf16,     Format::f16,
                                           Format::int8_row,      Format::int4_g64, Format::mxfp4,
                                           Format::fp8_e4m3_block};

}  // namespace coli
