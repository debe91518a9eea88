// Deterministic random test data (op tests, benchmarks): the same seed gives the same values everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace coli {

// n values drawn from N(0, scale^2) by a mt19937 seeded with seed.
std::vector<float> random_normal(size_t n, uint32_t seed, float scale = 1.0f);

}  // namespace coli
