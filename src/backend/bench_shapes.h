// The shapes and formats that every GPU backend's `coli test-ops --bench` measures, so that their figures
// sit side by side: decode GEMVs of real MoE expert matrices, and decode MoE layers of real models, with
// the routing and experts their moe_experts calls take.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/tensor.h"
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

// One token routed to experts 0 .. kBenchExperts - 1 with equal gains.
inline Routing bench_moe_routing() {
    Routing r{1, kBenchExperts, {}, std::vector<float>(kBenchExperts, 1.0f / kBenchExperts)};
    for (int e = 0; e < kBenchExperts; ++e) r.experts.push_back(e);
    return r;
}

// `layers` layers of kBenchExperts experts, each with gate and up `gate_up` and down `down` in host memory
// (a device tier uploads them on first use); layer l is named layer0 + l, as the tier keys experts.
inline std::vector<std::vector<ExpertWeights>> bench_moe_layers(const WeightView& gate_up,
                                                                const WeightView& down, int layers,
                                                                int32_t layer0) {
    std::vector<std::vector<ExpertWeights>> experts(layers);
    for (int l = 0; l < layers; ++l)
        for (int e = 0; e < kBenchExperts; ++e)
            experts[l].push_back({e,
                                  Weight{gate_up, nullptr, nullptr},
                                  Weight{gate_up, nullptr, nullptr},
                                  Weight{down, nullptr, nullptr},
                                  layer0 + l,
                                  {}});
    return experts;
}

inline constexpr Format kBenchFormats[] = {Format::f32,           Format::bf16,     Format::f16,
                                           Format::int8_row,      Format::int4_g64, Format::mxfp4,
                                           Format::fp8_e4m3_block};

}  // namespace coli
