// A random weight matrix in any weight format, made directly as codes and scales (not by encoding f32
// values, which for a matrix larger than the caches would take seconds and four bytes per element).
// For benchmarks: every code is valid (no NaN), values are of order 1, and equal seeds give equal bytes.
#pragma once

#include <cstdint>

#include "formats/format.h"

namespace coli {

class ThreadPool;

EncodedWeight random_weight(Format f, int64_t rows, int64_t cols, uint64_t seed, ThreadPool& pool);

}  // namespace coli
