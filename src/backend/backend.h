// The op contract (docs/design.md): a backend runs ops and owns the memory they read and write. A backend
// knows ops, never models. Model code calls ops through Ops (ops.h), which asks supports() first and
// falls back to the CPU, counted, when the answer is no.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/tensor.h"

namespace coli {

// Every op of the contract. Keep in sync with op_name().
enum class OpKind : uint8_t {
    embedding,
    rms_norm,
    matmul,
    add,
    clamp,
    rope,
    attention,
    route_softmax_topk,
    moe_experts,
    slice_cols,
    mla_attention,
    route_sigmoid_topk,
    layer_norm,
    dsa_select,
    short_conv,
    kda,
    mul_sigmoid,
    res_mix,
    copy_rows,
    compress_kv,
    compressed_attention,
    index_topk,
    hc_weights,
    hc_collapse,
    hc_expand,
    repeat_cols,
    count_  // number of ops
};
std::string_view op_name(OpKind op);

// What a backend is asked before running an op (supports, host_step): the op and its real parameters, so
// that a backend declines what its kernels cannot take (a latent rank, a top-k size) before the call, and
// the op runs on the CPU as a counted fallback instead of failing on the device. Ops fills, for each op,
// n, and format and weight when the op has a weight, and the fields of its row below (their values in the
// call's arguments); the other fields stay 0.
//   embedding                     rows = vocabulary, cols = width (of the table)
//   matmul                        rows, cols (of the weight), groups (1: dense; more: block-diagonal)
//   moe_experts                   rows, cols (of an expert's gate: [ffn width, input width]), glu; the
//                                 weight is the first expert's gate
//   rms_norm, layer_norm          width; the weight is the gain
//   add, clamp, mul_sigmoid       width
//   slice_cols                    width (of the input)
//   rope                          width, head_dim (the stride of the heads in a row)
//   attention                     heads, kv_heads, head_dim, context (the cache's rows)
//   mla_attention                 heads, head_dim (nope + rope dims), latent (kv_lora), context, top_k (the
//                                 selection's keys per query; 0: no selection); the weight is w_kvb
//   route_softmax_topk            experts, top_k
//   route_sigmoid_topk            experts, top_k
//   dsa_select                    heads, head_dim, top_k, context
//   short_conv                    width (channels), taps
//   kda                           heads, head_dim
//   res_mix                       width, entries
//   copy_rows                     width (cols), context (the destination's rows)
//   compress_kv                   width (series * head_dim), head_dim, ratio
//   compressed_attention          heads, head_dim, context (the ring's rows), window, ratio, top_k (the
//                                 selection's entries per query; 0: no selection)
//   index_topk                    heads, head_dim, context (the key entries' rows), ratio, top_k
//   hc_weights                    width (of mix), streams
//   hc_collapse, hc_expand        width (of x: streams * D), streams
//   repeat_cols                   width (of the input), streams (the copies)
struct OpDesc {
    OpKind op;
    int64_t n = 0;                   // tokens (rows of the activations)
    Format format = Format::f32;     // the weight's format, f32 when the op has none
    int64_t rows = 0, cols = 0;      // the weight matrix's shape
    const Weight* weight = nullptr;  // the op's weight when it has one (residency checks), else nullptr
    GluKind glu = GluKind::silu;     // the experts' gate activation
    int64_t width = 0;               // the activations' row width
    int64_t heads = 0;               // query heads; dsa_select: indexer heads
    int64_t kv_heads = 0;            // key / value heads
    int64_t head_dim = 0;            // per-head width of queries and keys
    int64_t latent = 0;              // MLA's compressed key / value width (kv_lora_rank)
    int64_t context = 0;             // rows of the cache the op writes and reads
    int64_t experts = 0;             // routed experts (router logits per token)
    int64_t top_k = 0;               // experts per token; keys kept per query
    int64_t taps = 0;                // the convolution's kernel width
    int64_t entries = 0;             // tensors mixed
    int64_t groups = 0;              // matmul's blocks of the block-diagonal weight (1: a plain matmul)
    int64_t ratio = 0;               // positions per compressed entry
    int64_t window = 0;              // raw positions a sliding-window query sees
    int64_t streams = 0;             // hyper-connection streams; repeat_cols' copies
};
// "heads=128 head_dim=192 ...": the fields that are set, by name (format and weight left out).
std::string op_params_text(const OpDesc& d);

// Checks that a tensor has the expected shape; the message names the op and the operand. Backends call it
// (and attention_args_check) on their inputs so that every backend rejects the same calls the same way.
void check_shape(const Tensor& t, int64_t rows, int64_t cols, const char* what);
// The shapes of an attention call (see Backend::attention), and that the new rows fit in the cache.
void attention_args_check(const Tensor& q, const Tensor& k, const Tensor& v, const KvCache& cache,
                          const AttentionShape& s, int64_t pos0, const Tensor& out);
// The same for mla_attention (selection: null, or [n, top_k] key positions).
void mla_args_check(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                    const KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection,
                    const Tensor& out);
// The same for dsa_select.
void dsa_args_check(const Tensor& q, const Tensor& weights, const Tensor& k, const Tensor& cache,
                    const DsaShape& s, int64_t pos0, const Tensor& out);
// The top_k positions of the largest scores among positions [0, visible) (ties to the lower position), as
// floats, padded with -1 when visible < top_k: dsa_select's selection rule, shared by every backend.
void dsa_topk_row(const float* scores, int64_t visible, int top_k, float* out);
// The same for kda.
void kda_args_check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                    const Weight& a_log, const Weight& dt_bias, const KdaShape& s, const Tensor& state,
                    const Tensor& out);
// The same for short_conv.
void short_conv_args_check(const Tensor& x, const Weight& w, const Tensor& state, const Tensor& out);
// The same for res_mix.
void res_mix_args_check(std::span<const Tensor> entries, const Weight& w, const Tensor& out);
// Checks the rope parameters against x's width.
void rope_args_check(const Tensor& x, const RopeParams& p);
// The inverse frequencies every backend rotates with, in f32 as transformers computes them:
// theta^(-2i/rotary_dim), or YaRN's blend of interpolated and extrapolated frequencies.   [rotary_dim / 2]
std::vector<float> rope_inv_freq(const RopeParams& p);
// Sigmoid routing (docs/models.md 2.4) of n tokens from their logits [n, n_experts] on the host and the
// selection bias (a [1, n_experts] weight, or an empty one: no bias): k expert ids and weights per token.
// With `fixed` ([n, k] expert ids) those are the experts, weighted by their scores as the top-k path
// weights its choice (hash routing). Shared by every backend (the routing result lives on the host).
Routing route_sigmoid_host(int64_t n, int64_t n_experts, std::span<const float> logits, const Weight& bias,
                           const SigmoidRouting& p, std::span<const int32_t> fixed = {});
// The windows of `ratio` positions that close among positions [pos0, pos0 + n): their count,
// (pos0 + n) / ratio - pos0 / ratio; the first is pos0 / ratio.
int64_t windows_closing(int64_t pos0, int64_t n, int ratio);
// The shapes of the compressed-attention ops' calls (see Backend), checked alike by every backend.
void copy_rows_args_check(const Tensor& dst, const Tensor& src, int64_t row0);
void compress_kv_args_check(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                            const Tensor& state_gate, const CompressShape& s, int64_t pos0,
                            const Tensor& out);
void compressed_attention_args_check(const Tensor& q, const Tensor& kv, const Tensor& ring,
                                     const Tensor& entries, const Tensor* selection, const Weight& sinks,
                                     const CompressedAttentionShape& s, int64_t pos0, const Tensor& out);
void index_topk_args_check(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                           int64_t pos0, const Tensor& out);
// The same for the hyper-connection ops.
void hc_weights_args_check(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                           const Tensor& out);
void hc_collapse_args_check(const Tensor& x, const Tensor& weights, int streams, const Tensor& out);
void hc_expand_args_check(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                          const Tensor& out);

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string_view name() const = 0;          // "cpu", "cuda", "vulkan", "metal"
    virtual std::string description() const = 0;        // device and build details, one line
    virtual bool supports(const OpDesc& op) const = 0;  // false: Ops runs it on the CPU, counted
    // true: the backend runs this op (when it supports it) by reading a result back and finishing on the
    // host (routing from the logits); Ops counts it as a host step, apart from native ops and fallbacks.
    virtual bool host_step(const OpDesc&) const { return false; }
    virtual std::string stats() const { return {}; }  // one line of placement statistics, or empty
    // The device memory's rate in a large device-to-device copy, measured now (GB/s of bytes read + written):
    // the bound of a step that reads its weights there. 0: the weights are host memory (the caller measures).
    virtual double copy_gbps_measure() { return 0; }

    // Memory.
    virtual Tensor tensor_new(int64_t rows, int64_t cols) = 0;  // zero-filled
    // An op's output, which the op writes in full: its contents before are undefined, so that a backend may
    // skip tensor_new's fill (on Vulkan a command and a barrier per op).
    virtual Tensor tensor_new_unfilled(int64_t rows, int64_t cols) { return tensor_new(rows, cols); }
    virtual void tensor_write(Tensor& t, std::span<const float> src) = 0;  // host -> t (numel floats)
    virtual void tensor_read(const Tensor& t, std::span<float> dst) = 0;   // t -> host
    virtual Weight weight_upload(const Weight& w) = 0;                     // make w usable here

    // Ops. Outputs are preallocated by Ops with the shapes given in the comments.
    // out[i] = row ids[i] of table, decoded to f32.                        out: [n, table.cols]
    virtual void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) = 0;
    // out = x / sqrt(mean(x^2) + eps) * w, per row, in f32.                x, out: [n, d]; w: [1, d]
    virtual void rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) = 0;
    // y = x w^T.                                                           x: [n, w.cols]; y: [n, w.rows]
    // Grouped (block-diagonal) when x has groups = x.cols / w.cols > 1 blocks of w.cols: with
    // r = w.rows / groups, y[:, g r + j] = x[:, g w.cols : (g + 1) w.cols] . w[g r + j].
    //                                                       x: [n, groups * w.cols]; y: [n, w.rows]
    virtual void matmul(const Weight& w, const Tensor& x, Tensor& y) = 0;
    // out = a + b.                                                         all [n, d]
    virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
    // x = min(max(x, lo), hi), in place.                                  x: [n, d]
    virtual void clamp(Tensor& x, float lo, float hi) = 0;
    // Rotates x in place; row i is at position (pos0 + i) p.position_stride, by minus the angle when
    // p.inverse; each row holds cols / head_dim heads.
    virtual void rope(Tensor& x, const RopeParams& p, int64_t pos0) = 0;
    // Writes k, v into rows [pos0, pos0 + n) of the cache, then causal softmax attention of q over
    // cache rows [0, pos0 + i] for query i.        q, out: [n, H*hd]; k, v: [n, Hkv*hd]
    virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                           const AttentionShape& s, int64_t pos0, Tensor& out) = 0;
    // Softmax over each row of logits (f32), top k, optionally renormalized to sum 1. Result on host,
    // because the expert store needs it.                                  logits: [n, n_experts]
    virtual Routing route_softmax_topk(const Tensor& logits, int k, bool renormalize) = 0;
    // y[t] += sum over the routed (t, e) with e in experts, in ascending expert id, of
    // weight * down(silu(gate x[t]) * up x[t]).     x, y: [n, d_model]; experts sorted by id
    virtual void moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                             Tensor& y) = 0;
    // out = columns [c0, c0 + out.cols) of x.                               x: [n, *]; out: [n, width]
    virtual void slice_cols(const Tensor& x, int64_t c0, Tensor& out) = 0;
    // Multi-head latent attention, absorbed form (docs/models.md 2.2). Writes latent and k_pe into rows
    // [pos0, pos0 + n) of the cache (k: latents, v: rope keys), then for query i and head h, over cache rows
    // s <= pos0 + i (only those listed in row i of selection when it is given: DSA):
    //   score(s) = scale (q_nope_h W_UK[h] . latent(s) + q_pe_h . k_pe(s)),  o_h = W_UV[h] sum_s p(s)
    //   latent(s)
    // with W_UK[h], W_UV[h] the rows [h (dn + dv), + dn) and [h (dn + dv) + dn, + dv) of w_kvb.
    //   q: [n, H (dn + dr)] (nope then rope dims per head, rope applied); latent: [n, kv_lora] (normed);
    //   k_pe: [n, dr] (rope applied); w_kvb: [H (dn + dv), kv_lora]; out: [n, H dv];
    //   selection: [n, top_k] key positions as floats, -1 for none
    virtual void mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                               KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection,
                               Tensor& out) = 0;
    // route_sigmoid_host of logits [n, n_experts], with bias [1, n_experts] (or empty) and the fixed experts
    // ([n, k] or empty). Result on the host.
    virtual Routing route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                                       std::span<const int32_t> fixed) = 0;
    // out = (x - mean) / sqrt(var + eps) * w + b per row, in f32.          x, out: [n, d]; w, b: [1, d]
    virtual void layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) = 0;
    // DSA lightning indexer (docs/models.md 3): writes k into rows [pos0, pos0 + n) of cache, then for
    // query i scores every key s <= pos0 + i as
    // I(s) = weight_scale sum_h weights[i][h] relu(scale q_h(i) . cache(s))
    // and writes the top_k positions (dsa_topk_row) into row i of out.
    //   q: [n, n_heads head_dim]; weights: [n, n_heads]; k: [n, head_dim]; cache: [max_ctx, head_dim];
    //   out: [n, top_k]
    virtual void dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                            const DsaShape& s, int64_t pos0, Tensor& out) = 0;
    // Causal depthwise convolution over time, then SiLU (KDA's short convolution, docs/models.md 5.1):
    // channel c of row t is silu(sum_j w[c][j] x[t - K + 1 + j][c]), rows before the first taken from state,
    // which holds the K - 1 inputs before x (oldest first) and is advanced to the last K - 1 inputs.
    //   x, out: [n, C]; w: [C, K] f32; state: [K - 1, C]
    virtual void short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) = 0;
    // Kimi delta attention (docs/models.md 5.1), as token by token from state S (per head [dk, dv], f32; a
    // prefill may go by chunks of tokens, the same up to rounding, leaving the same state): with
    // q = l2norm(q_h) / sqrt(dk), k = l2norm(k_h), alpha = exp(kda_log_decay(g_h + dt_bias_h, A_log[h])),
    // b = sigmoid(beta[h]):  S = Diag(alpha) S;  S += k (b (v - S^T k))^T;  out_h = S^T q.
    //   q, k, v, g, out: [n, H d]; beta: [n, H]; a_log: [1, H]; dt_bias: [1, H d]; state: [H d, d]
    virtual void kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                     const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state,
                     Tensor& out) = 0;
    // out = a * sigmoid(b), elementwise (output gates).                    all [n, d]
    virtual void mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) = 0;
    // Attention residuals (Kimi K3, docs/models.md 7.1): per token t, score_e = sum_d entries[e][t][d] /
    // rms(entries[e][t]) w[d] with rms(v) = sqrt(mean(v^2) + eps), then out[t] = sum_e softmax(score)_e
    // entries[e][t].
    //   entries: m tensors [n, d]; w: [1, d] (the norm gain times the projection); out: [n, d]
    virtual void res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) = 0;

    // The ops below have a default that throws ("<backend> has no kernel for <op>"): a backend that does not
    // implement one declines it in supports(), and Ops runs it on the CPU, counted.

    // dst row (row0 + i) mod dst.rows = src row i, for the last min(src.rows, dst.rows) rows i of src: an
    // append, or a ring when dst is shorter than what is written.        src: [m, c]; dst: [R, c]
    virtual void copy_rows(Tensor& dst, const Tensor& src, int64_t row0);
    // KV compression: one pooled row per window w of s.ratio positions that closes among positions
    // [pos0, pos0 + n) (windows_closing of them, from pos0 / ratio). Row j means kv / gate row j - pos0 when
    // j >= pos0, else state row j mod (series ratio). Per channel d, the softmax over the window's slots of
    // the logits gate_j[d] + ape[r][d] weights the values kv_j[d] (j = w ratio + r); series 2 also pools
    // the slots of window w - 1 from the first hd channels (weight 0 for w = 0), and window w's from the
    // second hd channels.
    //   kv, gate: [n, series hd]; ape: [ratio, series hd] f32; state_kv, state_gate: [series ratio,
    //   series hd] (raw rows of earlier positions, row = position mod (series ratio)); out: [windows, hd]
    virtual void compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                             const Tensor& state_gate, const CompressShape& s, int64_t pos0, Tensor& out);
    // Attention of query i (position t = pos0 + i) and head h over the raw keys at positions
    // t - window < s <= t (kv rows for s >= pos0, else ring row s mod R) plus the compressed entries
    // w < (t + 1) / ratio (all, or those listed in row i of selection), keys = values, with a sink:
    // p(key) = exp(scale q_h . key) / (sum over keys exp(scale q_h . key) + exp(sinks[h])),
    // out_h = sum p(key) key.
    //   q, out: [n, H hd]; kv: [n, hd]; ring: [R >= window - 1, hd]; entries: [cap, hd] (empty when
    //   ratio = 0); selection: [n, top_k] entry ids as floats, -1 for none; sinks: [1, H] f32
    virtual void compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring,
                                      const Tensor& entries, const Tensor* selection, const Weight& sinks,
                                      const CompressedAttentionShape& s, int64_t pos0, Tensor& out);
    // The DSA indexer over compressed keys: for query i, scores of the entries w < (pos0 + i + 1) / ratio,
    // weight_scale sum_h weights[i][h] relu(scale q_h(i) . keys[w]), and their top_k (dsa_topk_row).
    //   q: [n, H hd]; weights: [n, H]; keys: [cap, hd]; out: [n, top_k]
    virtual void index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                            int64_t pos0, Tensor& out);
    // Hyper-connection weights from the mixing logits, per row: pre_j = sigmoid(mix_j scale0 + base_j) + eps,
    // post_k = 2 sigmoid(mix_{S+k} scale1 + base_{S+k}), comb[j][k] = softmax over k of
    // (mix_{2S+jS+k} scale2 + base_{2S+jS+k}) + eps, then Sinkhorn: columns normalized, then
    // (iters - 1) times rows then columns (each sum + eps). With mix.cols == S only pre.
    //   mix, out: [n, (2 + S) S] ([pre | post | comb]) or [n, S]; base: [1, mix.cols]; scale: [1, 3] or [1,
    //   1]
    virtual void hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                            Tensor& out);
    // out[t] = sum_j pre[t][j] x[t][j] (the streams collapsed), pre = the first S columns of weights.
    //   x: [n, S D]; weights: [n, >= S]; out: [n, D]
    virtual void hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out);
    // out[t][k] = post[t][k] y[t] + sum_j comb[t][j][k] x[t][j] (the sublayer's output spread back).
    //   x, out: [n, S D]; y: [n, D]; weights: [n, (2 + S) S]
    virtual void hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams, Tensor& out);
    // Each row of x repeated `times` times.                                 x: [n, D]; out: [n, times D]
    virtual void repeat_cols(const Tensor& x, int times, Tensor& out);
};

}  // namespace coli
