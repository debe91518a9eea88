// Naive references of the op contract (backend.h), which `coli test-ops` holds the CPU backend to: each op as
// plain loops straight from its definition in backend.h, in double where that makes it obviously right. They
// share no code with the CPU backend but the formats' weight decode (weight_decode_row) and the helpers that
// define an op's semantics (rope_inv_freq, dsa_topk_row). Slow on purpose; host vectors, row-major.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/tensor.h"

namespace coli::op_reference {

using Floats = std::vector<float>;
using In = std::span<const float>;

// Row ids[i] of table, decoded.                                           out: [n, table.cols]
Floats embedding(const WeightView& table, std::span<const int32_t> ids);
// x / sqrt(mean(x^2) + eps) * w per row.                                   x, out: [n, d]; w: [1, d]
Floats rms_norm(In x, int64_t d, const WeightView& w, float eps);
// a + b; min(max(x, lo), hi).                                              all [n, d]
Floats add(In a, In b);
Floats clamp(In x, float lo, float hi);
// x rotated, row i at position pos0 + i.                                   x, out: [n, cols]
Floats rope(In x, int64_t cols, const RopeParams& p, int64_t pos0);
// Causal attention after writing k, v into rows [pos0, pos0 + n) of the caches (updated here).
//   q, out: [n, H hd]; k, v: [n, Hkv hd]; cache_k, cache_v: [ctx, Hkv hd]
Floats attention(In q, In k, In v, Floats& cache_k, Floats& cache_v, const AttentionShape& s, int64_t pos0);
// Softmax over each row, top k (ties to the lower id), optionally renormalized.   logits: [n, n_experts]
Routing route_softmax_topk(In logits, int64_t n_experts, int k, bool renormalize);
// y + the routed experts' weighted gated MLPs, for the experts listed.      x, y, out: [n, d_model]
Floats moe_experts(std::span<const ExpertWeights> experts, const Routing& r, In x, In y);
// Columns [c0, c0 + width) of x.                                           x: [n, cols]; out: [n, width]
Floats slice_cols(In x, int64_t cols, int64_t c0, int64_t width);
// Multi-head latent attention after writing latent, k_pe into rows [pos0, pos0 + n) of the caches (updated
// here), keys reconstructed per head (W_UK[h] latent(s)), the values W_UV[h] latent(s).
//   selection: empty, or [n, top_k] key positions (-1: none); out: [n, H dv]
Floats mla_attention(In q, In latent, In k_pe, const WeightView& w_kvb, Floats& cache_latent,
                     Floats& cache_pe, const MlaShape& s, int64_t pos0, In selection);
// Sigmoid routing: groups ranked by their two best biased scores, all but the best topk_group masked to 0,
// top k of the biased scores (ties to the lower id), weighted by the unbiased ones.   logits: [n, n_experts]
// The score is p.score's (sigmoid or sqrt(softplus)); an empty bias (rows 0) is no bias; with `fixed`
// ([n, k] ids) those experts are taken instead of the top k, weighted the same way.
Routing route_sigmoid_topk(In logits, int64_t n_experts, const WeightView& bias, const SigmoidRouting& p,
                           std::span<const int32_t> fixed = {});
// (x - mean) / sqrt(var + eps) * w + b per row.                           x, out: [n, d]; w, b: [1, d]
Floats layer_norm(In x, int64_t d, const WeightView& w, const WeightView& b, float eps);
// The DSA index I(s) of each key s <= pos0 + i for query i, after writing k into rows [pos0, pos0 + n) of
// cache (updated here).             q: [n, H hd]; weights: [n, H]; k: [n, hd]; out: [n][pos0 + i + 1]
std::vector<std::vector<double>> dsa_scores(In q, In weights, In k, Floats& cache, const DsaShape& s,
                                            int64_t pos0);
// The top_k positions of each row of scores (dsa_topk_row).                 out: [n, top_k]
Floats dsa_select(const std::vector<std::vector<double>>& scores, int top_k);
// Causal depthwise convolution then SiLU, the state advanced (updated here).
//   x, out: [n, C]; w: [C, K]; state: [K - 1, C]
Floats short_conv(In x, int64_t c, const WeightView& w, Floats& state);
// Kimi delta attention, token by token from the state (updated here).
//   q, k, v, g, out: [n, H d]; beta: [n, H]; a_log: [1, H]; dt_bias: [1, H d]; state: [H d, d]
Floats kda(In q, In k, In v, In g, In beta, const WeightView& a_log, const WeightView& dt_bias,
           const KdaShape& s, Floats& state);
// a * sigmoid(b).                                                          all [n, d]
Floats mul_sigmoid(In a, In b);
// Attention residuals: per token, the entries mixed by the softmax of their rms-normed projections on w.
//   entries: m of [n, d]; w: [1, d]; out: [n, d]
Floats res_mix(std::span<const Floats> entries, int64_t d, const WeightView& w, float eps);

// Grouped matmul: group g's rows of w (w.rows / groups of them) against its w.cols columns of x.
//   x: [n, groups w.cols]; out: [n, w.rows]
Floats matmul_grouped(const WeightView& w, In x, int groups);
// dst after copy_rows: row (row0 + i) mod R = src row i, for the last min(m, R) rows i of src.
//   dst: [R, c] (a copy is returned); src: [m, c]
Floats copy_rows(In dst, In src, int64_t cols, int64_t row0);
// KV compression of the windows that close among positions [pos0, pos0 + n), from the definition:
// a per-channel softmax over the window's slots (series 2: and the previous window's).
//   kv, gate: [n, series hd]; ape: [ratio, series hd]; state_kv, state_gate: [series ratio, series hd];
//   out: [windows_closing(pos0, n, ratio), hd]
Floats compress_kv(In kv, In gate, const WeightView& ape, In state_kv, In state_gate, const CompressShape& s,
                   int64_t pos0);
// Sliding-window attention over raw keys (kv, or ring for earlier positions) plus compressed entries (all
// visible ones, or those in selection), values = keys, with a per-head sink in the softmax's denominator.
//   q, out: [n, H hd]; kv: [n, hd]; ring: [R, hd]; entries: [cap, hd] (empty when ratio 0);
//   selection: empty, or [n, top_k] entry ids (-1: none); sinks: [1, H]
Floats compressed_attention(In q, In kv, In ring, In entries, In selection, const WeightView& sinks,
                            const CompressedAttentionShape& s, int64_t pos0);
// The indexer's score of each visible compressed key w < (pos0 + i + 1) / ratio for query i; index_topk is
// dsa_select of these.                         q: [n, H hd]; weights: [n, H]; keys: [cap, hd]
std::vector<std::vector<double>> index_scores(In q, In weights, In keys, const DsaShape& s, int64_t pos0);
// Hyper-connection weights: [pre | post | comb] per row (or pre only when cols == S), comb
// Sinkhorn-normalized.
//   mix, out: [n, cols]; base: [1, cols]; scale: [1, 3] or [1, 1]
Floats hc_weights(In mix, int64_t cols, const WeightView& base, const WeightView& scale, const HcShape& s);
// sum_j pre[t][j] x[t][j].                       x: [n, S d]; weights: [n, wcols >= S]; out: [n, d]
Floats hc_collapse(In x, In weights, int64_t wcols, int streams, int64_t d);
// post[t][k] y[t] + sum_j comb[t][j][k] x[t][j].  x, out: [n, S d]; y: [n, d]; weights: [n, (2 + S) S]
Floats hc_expand(In x, In y, In weights, int streams, int64_t d);
// Each row repeated `times` times.               x: [n, d]; out: [n, times d]
Floats repeat_cols(In x, int64_t d, int times);

}  // namespace coli::op_reference
