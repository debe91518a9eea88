#include "backend/record_backend.h"

#include <algorithm>
#include <memory>

namespace coli {
namespace {

// Experts 0 .. k-1 with equal weights for each of n tokens: a routing that needs no logits.
Routing first_experts(int64_t n, int k) {
    Routing r{n, k, std::vector<int32_t>(static_cast<size_t>(n * k)),
              std::vector<float>(static_cast<size_t>(n * k), 1.0f / static_cast<float>(k))};
    for (int64_t t = 0; t < n; ++t)
        for (int j = 0; j < k; ++j) r.experts[t * k + j] = j;
    return r;
}

}  // namespace

Tensor RecordBackend::tensor_new(int64_t rows, int64_t cols) {
    // Every tensor shares one byte: Tensor::empty() means "no tensor", and these are tensors without data.
    static const std::shared_ptr<void> kNoData = std::make_shared<char>(0);
    return Tensor(this, rows, cols, kNoData);
}

void RecordBackend::tensor_read(const Tensor&, std::span<float> dst) {
    std::fill(dst.begin(), dst.end(), 0.0f);
}

Routing RecordBackend::route_softmax_topk(const Tensor& logits, int k, bool) {
    return first_experts(logits.rows(), k);
}

Routing RecordBackend::route_sigmoid_topk(const Tensor& logits, const Weight&, const SigmoidRouting& p,
                                          std::span<const int32_t> fixed) {
    Routing r = first_experts(logits.rows(), p.k);
    if (!fixed.empty()) r.experts.assign(fixed.begin(), fixed.end());  // hash routing: the table's experts
    return r;
}

}  // namespace coli
