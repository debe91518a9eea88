// KDA prefill in chunks (docs/models.md 5.1). With S0 the state before the chunk and D(s,t] = prod_{s<u<=t}
// alpha_u the per-channel decay from token s to token t, the recurrence
//   S_t = (I - b_t k_t k_t^T) Diag(alpha_t) S_{t-1} + b_t k_t v_t^T,   o_t = S_t^T q_t
// becomes a plain delta rule in S'_t = Diag(D(0,t])^-1 S_t, which over the chunk reads
//   u_t = b_t (v_t - S0^T (k_t D(0,t]) - sum_{s<t} M[t,s] u_s),   M[t,s] = sum_i k_t[i] k_s[i] D(s,t][i]
//   o_t = S0^T (q_t D(0,t]) + sum_{s<=t} P[t,s] u_s,              P[t,s] = sum_i q_t[i] k_s[i] D(s,t][i]
//   S_n = Diag(D(0,n]) S0 + sum_s (k_s D(s,n]) u_s^T
// The u_t solve a unit lower-triangular system (forward substitution); the rest are matrix products over
// the chunk. Every decay is a product of alphas in [0, 1]: it may underflow to 0 (as the true value does)
// but never overflows, which 1 / D(0,t] would for long chunks of strong decay.
// M and P are built per sub-chunk of kSub rows starting at token r: for the earlier tokens s < r the decay
// splits as D(s,t] = D(s,r] D(r,t], both factors <= 1, and the block is one matrix product; within the
// sub-chunk the decays are running products.
#include "backend/cpu/cpu_kda_chunk.h"

#include <algorithm>
#include <cstring>

// The matrix products vectorize with the widest instructions the CPU has (GCC and clang pick the clone at
// load time); the rest of the build targets baseline x86-64.
#if defined(__x86_64__) && defined(__linux__)
#define COLI_KDA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define COLI_KDA_CLONES
#endif

// The 64-byte vectors below only live inside always-inlined helpers, never passed between functions built
// for different instruction sets, so GCC's note on their ABI does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace coli::cpu {

namespace {

constexpr int kSub = 16;  // rows of a sub-chunk of M and P
constexpr int kVec = 16;  // floats in one vector
// A tile of the matrix product: kTileRows rows of kTileVecs vectors, held in registers over the inner sum
// (4 x 2 zmm accumulators: each loaded b vector feeds 4 multiply-adds).
constexpr int kTileRows = 4;
constexpr int kTileVecs = 2;

using f32x16 = float __attribute__((vector_size(kVec * sizeof(float))));

[[gnu::always_inline]] inline f32x16 load(const float* p) {
    f32x16 v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

[[gnu::always_inline]] inline void store(float* p, const f32x16& v) {
    std::memcpy(p, &v, sizeof(v));
}

// c += a b over R rows and V vectors of columns.        a: [R, k] (lda); b: [k, V kVec] (ldb); c (ldc)
template <int R, int V>
[[gnu::always_inline]] inline void gemm_tile(int k, const float* a, int64_t lda, const float* b, int64_t ldb,
                                             float* c, int64_t ldc) {
    f32x16 acc[R][V] = {};
    for (int p = 0; p < k; ++p) {
        f32x16 bv[V];
        for (int v = 0; v < V; ++v) bv[v] = load(b + p * ldb + v * kVec);
        for (int r = 0; r < R; ++r) {
            const float ar = a[r * lda + p];
            for (int v = 0; v < V; ++v) acc[r][v] += ar * bv[v];
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) store(c + r * ldc + v * kVec, load(c + r * ldc + v * kVec) + acc[r][v]);
}

// gemm_tile over all rows of c for the V vectors of columns at c, b.
template <int V>
[[gnu::always_inline]] inline void gemm_columns(int m, int k, const float* a, int64_t lda, const float* b,
                                                int64_t ldb, float* c, int64_t ldc) {
    int i = 0;
    for (; i + kTileRows <= m; i += kTileRows)
        gemm_tile<kTileRows, V>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
    for (; i < m; ++i) gemm_tile<1, V>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
}

// c += a b, row-major.                               a: [m, k] (lda); b: [k, n] (ldb); c: [m, n] (ldc)
[[gnu::always_inline]] inline void gemm_acc(int m, int n, int k, const float* a, int64_t lda, const float* b,
                                            int64_t ldb, float* c, int64_t ldc) {
    int j = 0;
    for (; j + kTileVecs * kVec <= n; j += kTileVecs * kVec)
        gemm_columns<kTileVecs>(m, k, a, lda, b + j, ldb, c + j, ldc);
    for (; j + kVec <= n; j += kVec) gemm_columns<1>(m, k, a, lda, b + j, ldb, c + j, ldc);
    for (; j < n; ++j)  // head dims that are not a multiple of kVec
        for (int i = 0; i < m; ++i) {
            float sum = 0;
            for (int p = 0; p < k; ++p) sum += a[i * lda + p] * b[p * ldb + j];
            c[i * ldc + j] += sum;
        }
}

// sum_i a[i] b[i].                                                                           a, b: [d]
[[gnu::always_inline]] inline float dot(const float* a, const float* b, int d) {
    f32x16 acc = {};
    int i = 0;
    for (; i + kVec <= d; i += kVec) acc += load(a + i) * load(b + i);
    float sum = 0;
    for (int l = 0; l < kVec; ++l) sum += acc[l];
    for (; i < d; ++i) sum += a[i] * b[i];
    return sum;
}

}  // namespace

KdaChunkScratch::KdaChunkScratch(int d)
    : decay_in(size_t{kKdaChunk} * d),
      decay_out(size_t{kKdaChunk} * d),
      q_in(size_t{kKdaChunk} * d),
      k_in(size_t{kKdaChunk} * d),
      k_out_t(size_t{kKdaChunk} * d),
      ks(size_t{kKdaChunk} * d),
      u(size_t{kKdaChunk} * d),
      m(size_t{kKdaChunk} * kKdaChunk),
      p(size_t{kKdaChunk} * kKdaChunk),
      q_rel(size_t{kSub} * d),
      k_rel(size_t{kSub} * d),
      k_left_t(size_t{kKdaChunk} * d),
      carry(d) {}

COLI_KDA_CLONES void kda_chunk(const KdaChunkIn& x, float* state, KdaChunkScratch& w) {
    const int n = x.n, d = x.d;
    constexpr int ld = kKdaChunk;  // row stride of the [.., chunk] matrices
    const float *q = x.q, *k = x.k, *alpha = x.alpha;
    float *decay_in = w.decay_in.data(), *decay_out = w.decay_out.data(), *carry = w.carry.data();

    // decay_in[t] = D(0,t], decay_out[t] = D(t,n].                                                [n, d]
    for (int t = 0; t < n; ++t)
        for (int i = 0; i < d; ++i)
            decay_in[t * d + i] = (t > 0 ? decay_in[(t - 1) * d + i] : 1.0f) * alpha[t * d + i];
    std::fill_n(decay_out + (n - 1) * d, d, 1.0f);
    for (int t = n - 2; t >= 0; --t)
        for (int i = 0; i < d; ++i)
            decay_out[t * d + i] = decay_out[(t + 1) * d + i] * alpha[(t + 1) * d + i];

    // q_in, k_in = q, k times D(0,t] [n, d]; k_out_t = (k_t D(t,n]) as columns [d, n] (ld).
    float *q_in = w.q_in.data(), *k_in = w.k_in.data(), *k_out_t = w.k_out_t.data();
    for (int t = 0; t < n; ++t)
        for (int i = 0; i < d; ++i) {
            q_in[t * d + i] = q[t * d + i] * decay_in[t * d + i];
            k_in[t * d + i] = k[t * d + i] * decay_in[t * d + i];
            k_out_t[i * ld + t] = k[t * d + i] * decay_out[t * d + i];
        }

    // What S0 contributes: ks = k_in S0 (to the updates), out = q_in S0.                          [n, d]
    float* ks = w.ks.data();
    std::fill_n(ks, n * d, 0.0f);
    gemm_acc(n, d, d, k_in, d, state, d, ks, d);
    for (int t = 0; t < n; ++t) std::fill_n(x.out + t * x.out_stride, d, 0.0f);
    gemm_acc(n, d, d, q_in, d, state, d, x.out, x.out_stride);

    // M (strictly lower) and P (lower), one sub-chunk of rows [r, e) at a time.                 [n, n] (ld)
    float *m = w.m.data(), *p = w.p.data(), *q_rel = w.q_rel.data(), *k_rel = w.k_rel.data(),
          *k_left_t = w.k_left_t.data();
    std::fill_n(m, n * ld, 0.0f);
    std::fill_n(p, n * ld, 0.0f);
    for (int r = 0; r < n; r += kSub) {
        const int e = std::min(r + kSub, n), rows = e - r;
        if (r > 0) {
            // Right factors q_t, k_t times D(r,t] for t in [r, e) [rows, d]; left factors k_s D(s,r] for
            // s < r as columns [d, r] (ld).
            std::fill_n(carry, d, 1.0f);
            for (int t = r; t < e; ++t) {
                if (t > r)
                    for (int i = 0; i < d; ++i) carry[i] *= alpha[t * d + i];
                for (int i = 0; i < d; ++i) {
                    q_rel[(t - r) * d + i] = q[t * d + i] * carry[i];
                    k_rel[(t - r) * d + i] = k[t * d + i] * carry[i];
                }
            }
            std::fill_n(carry, d, 1.0f);
            for (int s = r - 1; s >= 0; --s)
                for (int i = 0; i < d; ++i) {
                    carry[i] *= alpha[(s + 1) * d + i];
                    k_left_t[i * ld + s] = k[s * d + i] * carry[i];
                }
            gemm_acc(rows, r, d, k_rel, d, k_left_t, ld, m + r * ld, ld);
            gemm_acc(rows, r, d, q_rel, d, k_left_t, ld, p + r * ld, ld);
        }
        // Within the sub-chunk: carry = k_s D(s,t], advanced one token at a time.
        for (int s = r; s < e; ++s) {
            std::copy_n(k + s * d, d, carry);
            p[s * ld + s] = dot(q + s * d, carry, d);
            for (int t = s + 1; t < e; ++t) {
                for (int i = 0; i < d; ++i) carry[i] *= alpha[t * d + i];
                p[t * ld + s] = dot(q + t * d, carry, d);
                m[t * ld + s] = dot(k + t * d, carry, d);
            }
        }
    }

    // Forward substitution: u_t = b_t (v_t - ks_t - sum_{s<t} M[t,s] u_s).                        [n, d]
    float* u = w.u.data();
    for (int t = 0; t < n; ++t) {
        float* ut = u + t * d;
        const float* vt = x.v + t * x.v_stride;
        for (int j = 0; j < d; ++j) ut[j] = vt[j] - ks[t * d + j];
        for (int s = 0; s < t; ++s) {
            const float mts = m[t * ld + s];
            for (int j = 0; j < d; ++j) ut[j] -= mts * u[s * d + j];
        }
        for (int j = 0; j < d; ++j) ut[j] *= x.beta[t];
    }

    // out += P u, each sub-chunk of rows over the tokens up to its end (P is zero above).
    for (int r = 0; r < n; r += kSub) {
        const int e = std::min(r + kSub, n);
        gemm_acc(e - r, d, e, p + r * ld, ld, u, d, x.out + r * x.out_stride, x.out_stride);
    }

    // S = Diag(D(0,n]) S0 + k_out^T u.                                                            [d, d]
    for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) state[i * d + j] *= decay_in[(n - 1) * d + i];
    gemm_acc(d, d, n, k_out_t, ld, u, d, state, d);
}

}  // namespace coli::cpu
