// Fast, reproducible random weights for synthetic checkpoints: xoshiro256+ streams, each element a pure
// function of (seed, element index), so that values do not depend on how a tensor is cut into write
// chunks or on the number of threads that fill it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace coli {

class ThreadPool;

// Elements per independent random stream. Each block of this many elements has its own generator
// (seeded from the tensor seed and the block index), which is what makes the fill parallel and
// chunk-independent.
inline constexpr int64_t kRandomBlock = 1 << 16;

// How a tensor's values are drawn.
struct ValueDist {
    float center = 0;  // mean
    float std = 0;     // standard deviation; values are uniform in center +- std * sqrt(3)
};

// Integer codes uniform in [lo, hi], for U8 / I8 / E8M0 / I64 tensors: the interval [lo, hi + 1) as a
// ValueDist.
ValueDist uniform_codes(int lo, int hi);

// A 64-bit seed for one tensor: the run seed mixed with the tensor name.
uint64_t tensor_seed(uint64_t run_seed, std::string_view name);

// Writes elements [first, first + count) of the tensor seeded by `seed` into dst, encoded as dtype
// (f32, bf16, f16, or f8_e4m3 rounded to the nearest code; u8, i8 and f8_e8m0 store byte codes uniform
// over the whole numbers of dist's interval, its ends rounded and clamped to [0, 256); i64 stores the
// integers of dist's interval, as uniform_codes gives it, rounded down), count * dtype_size(dtype) bytes.
// Runs on the pool's threads.
void random_fill(void* dst, DType dtype, int64_t first, int64_t count, uint64_t seed, ValueDist dist,
                 ThreadPool& pool);

// Fills dst[0, n) with random bytes from `seed` (codes of quantized formats, which are valid for any
// byte value except the few a caller then patches). Runs on the pool's threads.
void random_fill_bytes(void* dst, size_t n, uint64_t seed, ThreadPool& pool);

// A random permutation of [0, n) from `seed` (Fisher-Yates on the same generator): the same on every
// platform, unlike std::shuffle.
std::vector<int> random_permutation(int n, uint64_t seed);

}  // namespace coli
