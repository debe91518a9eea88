// mla_attend (mla_attend.h): queries in passes that fit a scratch budget; per pass
//   scores = scale (latents q_abs + rope_keys q_pe)   one product over every (query, head) at once
//   p      = masked softmax of each score row          mla_softmax
//   mixed  = p latents
// each product split along its inner size when alone it would leave most SMs idle (decode), the parts then
// summed.
// DSA's selection first gathers each query's selected rows (mla_gather), then runs the same steps one query
// at a time when the queries are few (decode), else as products batched over the queries.
#include "backend/cuda/mla_attend.h"

#include <algorithm>

#include "backend/cuda/product.h"
#include "core/error.h"

namespace coli::cuda {
namespace {

constexpr int64_t kScratchFloats = int64_t{64} << 20;  // scores and gathered rows of one pass: 256 MB
constexpr int64_t kMinChunkInner = 64;                 // inner size of one split-K chunk, at least
constexpr int64_t kBlasTile = 128;  // edge of a cuBLAS output tile, to count the blocks a product runs
constexpr int64_t kTilesPerSm = 2;  // products are split until they have this many output tiles per SM

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// Whether a product of C [m, n] (times batch) runs too few output tiles to fill the device.
bool few_tiles(const Context& ctx, int64_t m, int64_t n, int64_t batch) {
    return ceil_div(m, kBlasTile) * ceil_div(n, kBlasTile) * batch <
           kTilesPerSm * ctx.props.multiProcessorCount;
}

// p (one product, ldc = m) with its inner size k split into chunks, run as one batched product into parts
// that are then added in chunk order: the same C from as many more output tiles as it takes to fill the
// device (decode's products are [keys or kv_lora] x 128 heads).
void product_split(const std::shared_ptr<Context>& ctx, const Product& p, float alpha) {
    const int64_t tiles = ceil_div(p.m, kBlasTile) * ceil_div(p.n, kBlasTile);
    const int64_t chunks = std::max<int64_t>(
        1, std::min(kTilesPerSm * ctx->props.multiProcessorCount / tiles, p.k / kMinChunkInner));
    if (chunks == 1) return product_run(ctx->blas, p, alpha, 0.0f);
    const int64_t chunk = p.k / chunks, rest = p.k - chunks * chunk, count = p.m * p.n;
    const int64_t a_step = p.transpose_a ? 1 : p.lda;  // A's floats between consecutive k
    Scratch<float> parts(ctx, chunks * count);
    Product split = p;
    split.k = chunk;
    split.stride_a = chunk * a_step;
    split.stride_b = chunk;
    split.c = parts.get();
    split.ldc = p.m;
    split.stride_c = count;
    split.batch = chunks;
    product_run(ctx->blas, split, alpha, 0.0f);
    if (rest > 0) {  // the inner indices past the last whole chunk, into the first chunk's part
        Product tail = split;
        tail.k = rest;
        tail.a = p.a + chunks * chunk * a_step;
        tail.b = p.b + chunks * chunk;
        tail.batch = 1;
        product_run(ctx->blas, tail, alpha, 1.0f);
    }
    sum_chunks(parts.get(), chunks, count, p.c, ctx->compute);
}

// The rows of q_abs and q (leading dimension qw) against keys contiguous latent and rope-key rows:
// scores [rows, keys] then, after mla_softmax, mixed [rows, kv_lora] = p latents.
struct Rows {
    const float* latents = nullptr;    // [keys, kv_lora]
    const float* rope_keys = nullptr;  // [keys, rope_dim]
    const float* q_abs = nullptr;      // [rows, kv_lora]
    const float* q_rope = nullptr;     // [rows, qw]: the rope part of each (query, head) row
    int64_t rows = 0, keys = 0;        // score rows (queries x heads) and key columns
    float* scores = nullptr;           // [rows, keys] scratch
    float* mixed = nullptr;            // [rows, kv_lora]
};

// The three steps over r's rows; the softmax masks keys past causal0 + query, or the selection's -1 slots.
void rows_attend(const std::shared_ptr<Context>& ctx, const Rows& r, const MlaArgs& a, int64_t causal0,
                 const float* selection) {
    const int64_t qw = a.nope_dim + a.rope_dim, rope_dim = a.rope_dim;
    product_split(ctx,
                  {true, r.keys, r.rows, a.kv_lora, r.latents, a.kv_lora, 0, r.q_abs, a.kv_lora, 0, r.scores,
                   r.keys, 0},
                  a.scale);
    product_run(
        ctx->blas,
        {true, r.keys, r.rows, rope_dim, r.rope_keys, rope_dim, 0, r.q_rope, qw, 0, r.scores, r.keys, 0},
        a.scale, 1.0f);
    mla_softmax(r.scores, r.rows / a.n_heads, a.n_heads, r.keys, causal0, selection, ctx->compute);
    product_split(ctx,
                  {false, a.kv_lora, r.rows, r.keys, r.latents, a.kv_lora, 0, r.scores, r.keys, 0, r.mixed,
                   a.kv_lora, 0},
                  1.0f);
}

// Queries [i0, i0 + g) over every causal key: keys = pos0 + i0 + g, scores [g H, keys].
void dense_pass(const std::shared_ptr<Context>& ctx, const MlaAttendIo& io, int64_t i0, int64_t g,
                int64_t pos0, const MlaArgs& a, float* scores) {
    const int64_t qw = a.nope_dim + a.rope_dim, first = i0 * a.n_heads;
    const Rows r{io.latents,
                 io.rope_keys,
                 io.q_abs + first * a.kv_lora,
                 io.q + first * qw + a.nope_dim,
                 g * a.n_heads,
                 pos0 + i0 + g,
                 scores,
                 io.mixed + first * a.kv_lora};
    rows_attend(ctx, r, a, pos0 + i0, nullptr);
}

// Queries [i0, i0 + g) over their selected keys, gathered contiguous per query: each query alone when
// they are few (decode), else products batched over the queries.
void sparse_pass(const std::shared_ptr<Context>& ctx, const MlaAttendIo& io, int64_t i0, int64_t g,
                 const MlaArgs& a, float* scores, float* latent_rows, float* rope_rows) {
    const int64_t keys = io.sel_cols, heads = a.n_heads, qw = a.nope_dim + a.rope_dim;
    const int64_t rope_dim = a.rope_dim;
    const float* sel = io.selection + i0 * keys;
    const float* q_abs = io.q_abs + i0 * heads * a.kv_lora;
    const float* q_rope = io.q + i0 * heads * qw + a.nope_dim;
    float* mixed = io.mixed + i0 * heads * a.kv_lora;
    mla_gather(io.latents, io.rope_keys, sel, g, keys, a, latent_rows, rope_rows, ctx->compute);
    if (few_tiles(*ctx, keys, heads, g)) {
        for (int64_t q = 0; q < g; ++q) {
            const Rows r{latent_rows + q * keys * a.kv_lora,
                         rope_rows + q * keys * rope_dim,
                         q_abs + q * heads * a.kv_lora,
                         q_rope + q * heads * qw,
                         heads,
                         keys,
                         scores + q * heads * keys,
                         mixed + q * heads * a.kv_lora};
            rows_attend(ctx, r, a, 0, sel + q * keys);
        }
        return;
    }
    product_run(ctx->blas,
                {true, keys, heads, a.kv_lora, latent_rows, a.kv_lora, keys * a.kv_lora, q_abs, a.kv_lora,
                 heads * a.kv_lora, scores, keys, heads * keys, g},
                a.scale, 0.0f);
    product_run(ctx->blas,
                {true, keys, heads, rope_dim, rope_rows, rope_dim, keys * rope_dim, q_rope, qw, heads * qw,
                 scores, keys, heads * keys, g},
                a.scale, 1.0f);
    mla_softmax(scores, g, a.n_heads, keys, 0, sel, ctx->compute);
    product_run(ctx->blas,
                {false, a.kv_lora, heads, keys, latent_rows, a.kv_lora, keys * a.kv_lora, scores, keys,
                 heads * keys, mixed, a.kv_lora, heads * a.kv_lora, g},
                1.0f, 0.0f);
}

}  // namespace

void mla_attend(const std::shared_ptr<Context>& ctx, const MlaAttendIo& io, int64_t n, int64_t pos0,
                const MlaArgs& a) {
    if (n == 0) return;
    const bool sparse = io.selection != nullptr;
    const int64_t keys = sparse ? io.sel_cols : pos0 + n;  // score columns per query, at most
    if (keys == 0) return;
    const int64_t per_query = a.n_heads * keys + (sparse ? keys * (a.kv_lora + a.rope_dim) : 0);
    const int64_t group = std::clamp<int64_t>(kScratchFloats / per_query, 1, n);
    Scratch<float> scores(ctx, group * a.n_heads * keys);
    Scratch<float> latent_rows(ctx, sparse ? group * keys * a.kv_lora : 0);
    Scratch<float> rope_rows(ctx, sparse ? group * keys * a.rope_dim : 0);
    for (int64_t i0 = 0; i0 < n; i0 += group) {
        const int64_t g = std::min(group, n - i0);
        if (sparse)
            sparse_pass(ctx, io, i0, g, a, scores.get(), latent_rows.get(), rope_rows.get());
        else
            dense_pass(ctx, io, i0, g, pos0, a, scores.get());
    }
}

}  // namespace coli::cuda
