// The reference matmul and the definition of the canonical dot product (summary in kernels.h).
//
// Why one fixed order: the engine promises that the SIMD level and the thread count never change a
// result (docs/design.md, rule 2). Floating-point sums depend on their order, so every path computes each
// dot product in exactly this order, with the same fused multiply-adds and the same weight values:
//
//   lanes[l] = +0 for l in [0, 16)
//   for c = 0, 1, ..., cols-1:  lanes[c % 16] = fma(x[c], w[c], lanes[c % 16])
//   y = (((l0+l8) + (l4+l12)) + ((l2+l10) + (l6+l14))) + (((l1+l9) + (l5+l13)) + ((l3+l11) + (l7+l15)))
//       i.e. the pairwise tree 16 -> 8 -> 4 -> 2 -> 1 with partner offsets 8, 4, 2, 1
//
// w[c] is the weight_decode_row value. 16 lanes are one AVX-512 register or two AVX2 registers, so the
// SIMD paths need no reordering; the tail (cols % 16) is the same rule, the SIMD paths zero-pad it.
#include "core/error.h"
#include "formats/format.h"
#include "formats/kernels.h"

#include <cmath>
#include <vector>

namespace coli {

namespace formats_internal {

float lanes_reduce(const float* lanes) {
    float v[kLanes];
    for (int l = 0; l < kLanes; ++l) v[l] = lanes[l];
    for (int width = kLanes / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; ++l) v[l] = v[l] + v[l + width];
    return v[0];
}

float dot_canonical(const float* x, const float* w, int64_t cols) {
    float lanes[kLanes] = {};
    for (int64_t c = 0; c < cols; ++c) lanes[c % kLanes] = std::fma(x[c], w[c], lanes[c % kLanes]);
    return lanes_reduce(lanes);
}

// The scalar "fast" path: decode each row once, then one canonical dot per token.
void rows_scalar(const WeightView& w, const float* x, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
        weight_decode_span(w, r, 0, w.cols, row.data());
        for (int t = 0; t < nt; ++t) y[t * ldy + r] = dot_canonical(x + t * w.cols, row.data(), w.cols);
    }
}

}  // namespace formats_internal

void matmul_ref(const WeightView& w, const float* x, int64_t n, float* y) {
    formats_internal::weight_view_check(w);
    check(n >= 0, "matmul_ref: negative token count {}", n);
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
        weight_decode_row(w, r, row.data());
        for (int64_t t = 0; t < n; ++t)
            y[t * w.rows + r] = formats_internal::dot_canonical(x + t * w.cols, row.data(), w.cols);
    }
}

}  // namespace coli
