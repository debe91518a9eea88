// matmul: y[n][rows] = x[n][cols] · wᵀ on the thread pool with the active SIMD kernels.
//
// Work split (none of it changes a result, since each (token, row) dot product is computed whole, in the
// canonical order, by one kernel call):
//   - threads take contiguous ranges of rows (ThreadPool::parallel_for), of one matmul or of a batch of
//     them laid end to end (matmul_batch); a reduction is never split;
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
#include <span>
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
    const MatmulTask task{w, x, n, y};
    matmul_batch(&task, 1, pool);
}

void matmul_batch(const MatmulTask* task_list, size_t count, ThreadPool& pool) {
    const std::span<const MatmulTask> tasks(task_list, count);
    // The tasks' rows laid end to end: task i owns [first[i], first[i + 1]).
    std::vector<int64_t> first(tasks.size() + 1, 0);
    int64_t bytes = 0;
    for (size_t i = 0; i < tasks.size(); ++i) {
        const MatmulTask& t = tasks[i];
        formats_internal::weight_view_check(t.w);
        check(t.n >= 0, "matmul: negative token count {}", t.n);
        first[i + 1] = first[i] + (t.n == 0 ? 0 : t.w.rows);
        if (t.n > 0) bytes += static_cast<int64_t>(t.w.data_bytes());
    }
    const int64_t rows = first.back();
    if (rows == 0) return;

    const RowsKernel kernel = kernel_for(simd_active());
    const int64_t grain = std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, bytes / rows));
    // Rows [r0, r1) of one task: in tiles of about kRowTileBytes, each tile against every token group (one
    // token group needs no tiling: each row is read once anyway).
    const auto run = [&](const MatmulTask& t, int64_t r0, int64_t r1) {
        const int64_t row_bytes = std::max<int64_t>(1, static_cast<int64_t>(t.w.data_bytes()) / t.w.rows);
        const int64_t tile = t.n <= kTokenGroup ? r1 - r0 : std::max<int64_t>(1, kRowTileBytes / row_bytes);
        for (int64_t a = r0; a < r1; a += tile) {
            const int64_t b = std::min(r1, a + tile);
            for (int64_t k = 0; k < t.n; k += kTokenGroup) {
                const int nt = static_cast<int>(std::min<int64_t>(kTokenGroup, t.n - k));
                kernel(t.w, t.x + k * t.w.cols, nt, t.y + k * t.w.rows, t.w.rows, a, b);
            }
        }
    };
    pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
        // The tasks this chunk overlaps, each over its part of the chunk.
        size_t i = std::upper_bound(first.begin(), first.end(), begin) - first.begin() - 1;
        for (; i < tasks.size() && first[i] < end; ++i) {
            const int64_t r0 = std::max(begin, first[i]) - first[i],
                          r1 = std::min(end, first[i + 1]) - first[i];
            if (r0 < r1) run(tasks[i], r0, r1);
        }
    });
}

}  // namespace coli
