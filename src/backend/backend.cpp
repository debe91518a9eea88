#include "backend/backend.h"

#include <array>

#include "core/error.h"

namespace coli {

std::string_view op_name(OpKind op) {
    static constexpr std::array<std::string_view, static_cast<size_t>(OpKind::count_)> kNames = {
        "embedding", "rms_norm",           "matmul",      "add", "clamp", "rope",
        "attention", "route_softmax_topk", "moe_experts",
    };
    return kNames[static_cast<size_t>(op)];
}

void check_shape(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
    check(t.rows() == rows && t.cols() == cols, "{}: shape [{}, {}], expected [{}, {}]", what, t.rows(),
          t.cols(), rows, cols);
}

void attention_args_check(const Tensor& q, const Tensor& k, const Tensor& v, const KvCache& cache,
                          const AttentionShape& s, int64_t pos0, const Tensor& out) {
    const int64_t n = q.rows(), hd = s.head_dim;
    const int64_t kv_width = static_cast<int64_t>(s.n_kv_heads) * hd;
    check(s.n_kv_heads > 0 && s.n_heads % s.n_kv_heads == 0, "attention: {} heads over {} kv heads",
          s.n_heads, s.n_kv_heads);
    check_shape(q, n, s.n_heads * hd, "attention q");
    check_shape(k, n, kv_width, "attention k");
    check_shape(v, n, kv_width, "attention v");
    check_shape(out, n, s.n_heads * hd, "attention out");
    check_shape(cache.k, cache.k.rows(), kv_width, "attention k cache");
    check_shape(cache.v, cache.k.rows(), kv_width, "attention v cache");
    check(pos0 + n <= cache.k.rows(), "context full: {} tokens do not fit in a cache of {}", pos0 + n,
          cache.k.rows());
}

}  // namespace coli
