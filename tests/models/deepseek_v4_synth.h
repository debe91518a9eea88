// A DeepSeek-V4 checkpoint written by `coli synth --arch deepseek_v4` (the original FP8 / MXFP4 layout with
// random weights) into a temp dir once per test process, for the tests that need no transformers oracle:
// 4 layers (sliding, sliding, CSA ratio 4, HCA ratio 128; the first 3 hash-routed), real per-head widths,
// window 128, 16 experts, and a prompt long enough to close two HCA windows and wrap the sliding ring.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace coli::test {

struct SynthModel {
    std::filesystem::path dir;
    std::vector<int32_t> input_ids;  // [T], T = kV4SynthTokens
    int64_t vocab = 0;
};

inline constexpr int kV4SynthWindow = 128, kV4SynthCsa = 4, kV4SynthHca = 128;
inline constexpr size_t kV4SynthTokens = 2 * kV4SynthHca + 20;

// Written on first use; removed when the process exits.
const SynthModel& deepseek_v4_synth();

}  // namespace coli::test
