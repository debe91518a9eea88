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
};

std::filesystem::path fixtures_dir();
// A fixture by name under tests/fixtures, or by a path relative to the repository root ("models/demo").
Fixture fixture_load(const std::string& name);

// max|a - b| / max|b|.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b);
// Argmax of each row of [rows, cols].
std::vector<int32_t> argmax_rows(const std::vector<float>& m, int64_t cols);

}  // namespace coli::test
