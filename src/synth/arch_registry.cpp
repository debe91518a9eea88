// The table of architectures `coli synth` knows. One line per architecture.
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "synth/synth_arch.h"

namespace coli {

extern const SynthArch kSynthOlmoe;        // arch_olmoe.cpp
extern const SynthArch kSynthKimiK3;       // arch_kimi_k3.cpp
extern const SynthArch kSynthDeepseekV4;   // arch_deepseek_v4.cpp
extern const SynthArch kSynthDeepseekV3;   // arch_deepseek_v3.cpp
extern const SynthArch kSynthDeepseekV32;  // arch_deepseek_v3.cpp
extern const SynthArch kSynthGlmMoeDsa;    // arch_glm_moe_dsa.cpp
extern const SynthArch kSynthKimiLinear;   // arch_kimi_linear.cpp

namespace {
const SynthArch* const kArchs[] = {&kSynthOlmoe,       &kSynthKimiK3,    &kSynthDeepseekV4, &kSynthDeepseekV3,
                                   &kSynthDeepseekV32, &kSynthGlmMoeDsa, &kSynthKimiLinear};
}  // namespace

const SynthArch& synth_arch_find(std::string_view name) {
    for (const SynthArch* a : kArchs)
        if (a->name == name) return *a;
    fail("coli synth: unknown --arch '{}'; known: {}", name, fmt::join(synth_arch_names(), ", "));
}

std::vector<std::string_view> synth_arch_names() {
    std::vector<std::string_view> names;
    for (const SynthArch* a : kArchs) names.push_back(a->name);
    return names;
}

int64_t synth_scaled(int64_t value, int scale, std::string_view what) {
    check(scale >= 1 && value % scale == 0, "--scale {} does not divide {} {}; use a power of two", scale,
          what, value);
    return value / scale;
}

ValueDist synth_matrix_dist(float gain, int64_t fan_in) {
    return {0.0f, gain / std::sqrt(static_cast<float>(fan_in))};
}

std::string synth_torch_dtype(DType t) {
    switch (t) {
        case DType::bf16:
            return "bfloat16";
        case DType::f16:
            return "float16";
        case DType::f32:
            return "float32";
        default:
            fail("coli synth writes bf16, f16 or f32 weights, not {}", dtype_name(t));
    }
}

}  // namespace coli
