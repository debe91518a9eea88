// Helpers for the io tests: hand-made safetensors bytes and random data (see common/test_util.h for the
// rest).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"

namespace coli::test {

// A safetensors file made by hand: length prefix, `header` verbatim, then `data_bytes` zero bytes.
inline std::string raw_safetensors(std::string_view header, size_t data_bytes = 0) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(uint64_t(header.size()) >> (8 * i));
    out += header;
    out.append(data_bytes, '\0');
    return out;
}

// Deterministic pseudo-random bytes.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

}  // namespace coli::test
