// Oracle fixtures (tests/fixtures/<name>/): a checkpoint written by transformers plus oracle.safetensors
// with the input ids, the reference logits and the greedy continuation (tools/make_olmoe_oracles.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace coli::test {

struct Fixture {
    std::filesystem::path dir;
    std::vector<int32_t> input_ids;  // [T]
    std::vector<float> logits;       // [T, vocab]
    int64_t vocab = 0;
    std::vector<int32_t> greedy;  // the 8 tokens transformers' generate() chose
    // A fixture with a multi-token-prediction layer: its draft logits for the prompt's pairs (h_i,
    // t_{i+1}), i < T - 1 (docs/models.md 2.5); empty for the others.              [T - 1, vocab]
    std::vector<float> mtp_logits;
};

// Every transformers oracle fixture under tests/fixtures (tests/models checks the list against the folder).
inline constexpr const char* kOracleFixtures[] = {
    "olmoe_base",  "olmoe_gqa",       "olmoe_bf16",      "olmoe_sharded",   "olmoe_clip",
    "deepseek_v3", "deepseek_v3_noq", "deepseek_v3_fp8", "deepseek_v3_mtp", "deepseek_v32",
    "glm_moe_dsa", "kimi_linear",     "kimi_k3",         "deepseek_v4",     "deepseek_v4_orig"};

// The CPU's bound on max|logit diff| / max|logit| against an oracle. Measured: kimi_k3 1.45e-5 (its
// reference's chunked KDA differs from the exact recurrence), every other fixture 2.5e-6 at most; the oracle
// test prints each fixture's figure.
inline constexpr double kCpuLogitTolerance = 5e-5;

std::filesystem::path fixtures_dir();
// A fixture by name under tests/fixtures, or by a path relative to the repository root ("models/demo").
Fixture fixture_load(const std::string& name);

// max|a - b| / max|b| (infinite when a holds a NaN or the sizes differ).
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b);
// Argmax of each row of [rows, cols].
std::vector<int32_t> argmax_rows(const std::vector<float>& m, int64_t cols);

}  // namespace coli::test
