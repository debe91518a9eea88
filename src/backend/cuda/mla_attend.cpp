// mla_attend (mla_attend.h): queries in passes that fit a scratch budget; per pass
//   scores = scale (latents q_abs + rope_keys q_pe)   one product over every (query, head) at once
//   p      = masked softmax of each score row          mla_softmax
//   mixed  = p latents                                split over key chunks when the product alone would
//                                                     leave most SMs idle (decode), the chunks then summed
// DSA's selection first gathers each query's selected rows (mla_gather), then runs the same steps as
// products batched per query.
#include "backend/cuda/mla_attend.h"

#include <algorithm>

#include "backend/cuda/blas.h"
#include "core/error.h"

namespace coli::cuda {
namespace {

constexpr int64_t kScratchFloats = int64_t{64} << 20;  // scores and gathered rows of one pass: 256 MB
constexpr int64_t kMinChunkKeys = 256;                 // keys per split-K chunk of the mix, at least
constexpr int64_t kBlasTile = 128;  // edge of a cuBLAS output tile, to count the blocks a product runs
constexpr int64_t kTilesPerSm = 2;  // the mix is split until it has this many output tiles per SM

// Column-major C = alpha op(A) B + beta C, batch times at the given strides (all in floats).
struct Product {
    bool transpose_a = false;     // op(A) = A^T with A stored [k, m], else A stored [m, k]
    int64_t m = 0, n = 0, k = 0;  // C is [m, n]; the products' inner size is k
    const float* a = nullptr;     // A, leading dimension lda, next batch stride_a further
    int64_t lda = 0, stride_a = 0;
    const float* b = nullptr;  // B [k, n], leading dimension ldb, next batch stride_b further
    int64_t ldb = 0, stride_b = 0;
    float* c = nullptr;  // C, leading dimension ldc, next batch stride_c further
    int64_t ldc = 0, stride_c = 0;
    int64_t batch = 1;  // products
};

void product_run(cublasHandle_t h, const Product& p, float alpha, float beta) {
    const cublasStatus_t st = blas_api().sgemm_strided_batched(
        h, p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p.m),
        static_cast<int>(p.n), static_cast<int>(p.k), &alpha, p.a, static_cast<int>(p.lda), p.stride_a, p.b,
        static_cast<int>(p.ldb), p.stride_b, &beta, p.c, static_cast<int>(p.ldc), p.stride_c,
        static_cast<int>(p.batch));
    check(st == CUBLAS_STATUS_SUCCESS, "cuda mla_attention: cublasSgemmStridedBatched failed ({})",
          blas_api().status_text(st));
}

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// Key chunks that the mix of rows score rows over keys is split into: enough output tiles for every SM.
int64_t mix_chunks(const Context& ctx, int64_t rows, int64_t keys, int64_t kv_lora) {
    const int64_t tiles = ceil_div(kv_lora, kBlasTile) * ceil_div(rows, kBlasTile);
    return std::max<int64_t>(
        1, std::min(kTilesPerSm * ctx.props.multiProcessorCount / tiles, keys / kMinChunkKeys));
}

// mixed = p latents, split over key chunks (mix_chunks) whose parts are then summed in chunk order.
//   latents: [keys, kv_lora]; p: [rows, keys]; mixed: [rows, kv_lora]
void mix(const std::shared_ptr<Context>& ctx, const float* latents, const float* p, int64_t rows,
         int64_t keys, int64_t kv_lora, float* mixed) {
    const int64_t chunks = mix_chunks(*ctx, rows, keys, kv_lora);
    const int64_t chunk = keys / chunks, rest = keys - chunks * chunk, count = rows * kv_lora;
    Scratch<float> parts(ctx, chunks > 1 ? chunks * count : 0);
    float* dst = chunks > 1 ? parts.get() : mixed;
    product_run(ctx->blas,
                {false, kv_lora, rows, chunk, latents, kv_lora, chunk * kv_lora, p, keys, chunk, dst, kv_lora,
                 count, chunks},
                1.0f, 0.0f);
    if (rest > 0)  // the keys past the last whole chunk, into the first chunk's part
        product_run(ctx->blas,
                    {false, kv_lora, rows, rest, latents + chunks * chunk * kv_lora, kv_lora, 0,
                     p + chunks * chunk, keys, 0, dst, kv_lora, 0},
                    1.0f, 1.0f);
    if (chunks > 1) sum_chunks(parts.get(), chunks, count, mixed, ctx->compute);
}

// Queries [i0, i0 + g) over every causal key: keys = pos0 + i0 + g, scores [g H, keys].
void dense_pass(const std::shared_ptr<Context>& ctx, const MlaAttendIo& io, int64_t i0, int64_t g,
                int64_t pos0, const MlaArgs& a, float* scores) {
    const int64_t keys = pos0 + i0 + g, rows = g * a.n_heads, qw = a.nope_dim + a.rope_dim;
    const int64_t rope_dim = a.rope_dim;
    product_run(ctx->blas,
                {true, keys, rows, a.kv_lora, io.latents, a.kv_lora, 0, io.q_abs + i0 * a.n_heads * a.kv_lora,
                 a.kv_lora, 0, scores, keys, 0},
                a.scale, 0.0f);
    product_run(ctx->blas,
                {true, keys, rows, rope_dim, io.rope_keys, rope_dim, 0,
                 io.q + i0 * a.n_heads * qw + a.nope_dim, qw, 0, scores, keys, 0},
                a.scale, 1.0f);
    mla_softmax(scores, g, a.n_heads, keys, pos0 + i0, nullptr, ctx->compute);
    mix(ctx, io.latents, scores, rows, keys, a.kv_lora, io.mixed + i0 * a.n_heads * a.kv_lora);
}

// Queries [i0, i0 + g) over their selected keys: products batched per query over the gathered rows.
void sparse_pass(const std::shared_ptr<Context>& ctx, const MlaAttendIo& io, int64_t i0, int64_t g,
                 const MlaArgs& a, float* scores, float* latent_rows, float* rope_rows) {
    const int64_t keys = io.sel_cols, heads = a.n_heads, qw = a.nope_dim + a.rope_dim;
    const int64_t rope_dim = a.rope_dim;
    const float* sel = io.selection + i0 * keys;
    float* mixed = io.mixed + i0 * heads * a.kv_lora;
    mla_gather(io.latents, io.rope_keys, sel, g, keys, a, latent_rows, rope_rows, ctx->compute);
    product_run(
        ctx->blas,
        {true, keys, heads, a.kv_lora, latent_rows, a.kv_lora, keys * a.kv_lora,
         io.q_abs + i0 * heads * a.kv_lora, a.kv_lora, heads * a.kv_lora, scores, keys, heads * keys, g},
        a.scale, 0.0f);
    product_run(ctx->blas,
                {true, keys, heads, rope_dim, rope_rows, rope_dim, keys * rope_dim,
                 io.q + i0 * heads * qw + a.nope_dim, qw, heads * qw, scores, keys, heads * keys, g},
                a.scale, 1.0f);
    mla_softmax(scores, g, a.n_heads, keys, 0, sel, ctx->compute);
    if (mix_chunks(*ctx, g * heads, keys, a.kv_lora) > 1) {  // few queries (decode): split each one's keys
        for (int64_t q = 0; q < g; ++q)
            mix(ctx, latent_rows + q * keys * a.kv_lora, scores + q * heads * keys, heads, keys, a.kv_lora,
                mixed + q * heads * a.kv_lora);
        return;
    }
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
