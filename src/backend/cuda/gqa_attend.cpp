#include "backend/cuda/gqa_attend.h"

#include <algorithm>

#include "backend/cuda/product.h"

namespace coli::cuda {
namespace {

constexpr int64_t kScratchFloats = int64_t{64} << 20;  // scores of one pass: 256 MB

}  // namespace

void gqa_attend(const std::shared_ptr<Context>& ctx, const float* q, const float* k_cache,
                const float* v_cache, int64_t n, int64_t pos0, const AttentionArgs& a, float* out) {
    if (n == 0) return;
    const int64_t heads = a.n_heads, kv_heads = a.n_kv_heads, group = heads / kv_heads, hd = a.head_dim;
    const int64_t q_width = heads * hd, kv_width = kv_heads * hd;
    const int64_t pass = std::clamp<int64_t>(kScratchFloats / (heads * (pos0 + n)), 1, n);
    Scratch<float> scores(ctx, pass * heads * (pos0 + n));  // [g, H, keys] per pass
    for (int64_t i0 = 0; i0 < n; i0 += pass) {
        const int64_t g = std::min(pass, n - i0), keys = pos0 + i0 + g;
        // Head h = kvh group + j: one batched product per j over the kv heads.
        for (int64_t j = 0; j < group; ++j)
            product_run(ctx->blas,
                        {true, keys, g, hd, k_cache, kv_width, hd, q + i0 * q_width + j * hd, q_width,
                         group * hd, scores.get() + j * keys, heads * keys, group * keys, kv_heads},
                        a.scale, 0.0f);
        mla_softmax(scores.get(), g, a.n_heads, keys, pos0 + i0, nullptr, ctx->compute);
        for (int64_t j = 0; j < group; ++j)
            product_run(ctx->blas,
                        {false, hd, g, keys, v_cache, kv_width, hd, scores.get() + j * keys, heads * keys,
                         group * keys, out + i0 * q_width + j * hd, q_width, group * hd, kv_heads},
                        1.0f, 0.0f);
    }
}

}  // namespace coli::cuda
