// matmul: y[n][rows] = x[n][cols] · wᵀ on the thread pool with the active SIMD kernels.
//
// Work split (none of it changes a result, since each (token, row) dot product is computed whole, in the
// canonical order, by one kernel call):
//   - threads take contiguous ranges of rows (ThreadPool::parallel_for); a reduction is never split;
//   - within a range, rows are walked in tiles of about kRowTileBytes of weights, and for each tile the
//     tokens in groups of kTokenGroup: a group's activations stay in L1/L2 while the tile streams past,
//     and the tile stays in L2 for the next group, so the weights come from memory once per tile
//     (with a single token group there is nothing to reuse, and the whole range is one tile);
//   - the kernels compute a few rows at once (independent FMA chains) and prefetch the next rows.
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/format.h"
#include "formats/kernels.h"

#include <algorithm>
#include <vector>

namespace coli {

namespace {

using formats_internal::kLanes;
using formats_internal::kTokenGroup;
using formats_internal::RowsKernel;

// Weights per chunk below which another thread costs more than it saves.
constexpr int64_t kMinChunkBytes = 64 * 1024;
// Weights per row tile: well inside a 1 MB L2 next to one token group's activations.
constexpr int64_t kRowTileBytes = 256 * 1024;

RowsKernel kernel_for(Simd s) {
    switch (s) {
        case Simd::avx512:
            return formats_internal::rows_avx512;
        case Simd::avx2:
            return formats_internal::rows_avx2;
        case Simd::scalar:
            break;
    }
    return formats_internal::rows_scalar;
}

}  // namespace

namespace formats_internal {

const float* x_permute_nibble_order(const float* x, int nt, int64_t cols) {
    thread_local std::vector<float> permuted;
    const int64_t n = nt * cols;
    if (static_cast<int64_t>(permuted.size()) < n) permuted.resize(n);
    for (int64_t i = 0; i < n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) permuted[i + j] = x[i + kNibblePerm[j]];
    return permuted.data();
}

}  // namespace formats_internal

void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
    formats_internal::weight_view_check(w);
    check(n >= 0, "matmul: negative token count {}", n);
    if (n == 0 || w.rows == 0) return;

    const RowsKernel kernel = kernel_for(simd_active());
    const int64_t row_bytes = std::max<int64_t>(1, static_cast<int64_t>(w.data_bytes()) / w.rows);
    const int64_t grain = std::max<int64_t>(1, kMinChunkBytes / row_bytes);
    // One token group needs no tiling: each row is read once anyway.
    const int64_t tile = n <= kTokenGroup ? w.rows : std::max<int64_t>(1, kRowTileBytes / row_bytes);

    pool.parallel_for(w.rows, grain, [&](int64_t begin, int64_t end) {
        for (int64_t r0 = begin; r0 < end; r0 += tile) {
            const int64_t r1 = std::min(end, r0 + tile);
            for (int64_t t = 0; t < n; t += kTokenGroup) {
                const int nt = static_cast<int>(std::min<int64_t>(kTokenGroup, n - t));
                kernel(w, x + t * w.cols, nt, y + t * w.rows, w.rows, r0, r1);
            }
        }
    });
}

}  // namespace coli
