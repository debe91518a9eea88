// DeepSeek-V4 (deepseek_v4, docs/models.md 8): a decoder whose residual is hc_mult parallel streams mixed by
// hyper-connections (8.7); attention with one shared K=V head, a sliding window, attention sinks and, in CSA
// / HCA layers, compressed entries pooled from windows of past positions (8.2, 8.4), CSA choosing its entries
// with a lightning indexer (8.5); a sqrt(softplus)-scored MoE whose first layers route by a token hash table,
// with clamped SwiGLU experts and one shared expert (8.6). Both checkpoint layouts load: transformers'
// names (fp32 / bf16) and the original release's (block FP8 with E8M0 scales, MXFP4 routed experts),
// docs/models.md 8.9. The cache per layer is the sliding ring, the compressed entries (and indexer keys) and
// the compressors' last raw rows (8.8).
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "models/config.h"
#include "models/decoder.h"
#include "models/deepseek_v4_config.h"
#include "models/registry.h"
#include "nn/moe.h"

namespace coli {
namespace {

using Attn = DeepseekV4Config::Attn;

// A layer tensor's name after its layer's prefix (docs/models.md 8.9): the same in the original release
// (under layers.L.) and in what transformers' save_pretrained writes (under model.layers.L.).
using LayerName = const char*;
constexpr LayerName kAttnNorm = "attn_norm.weight", kFfnNorm = "ffn_norm.weight";
constexpr LayerName kHcAttnFn = "hc_attn_fn", kHcAttnBase = "hc_attn_base", kHcAttnScale = "hc_attn_scale";
constexpr LayerName kHcFfnFn = "hc_ffn_fn", kHcFfnBase = "hc_ffn_base", kHcFfnScale = "hc_ffn_scale";
constexpr LayerName kWqA = "attn.wq_a.weight", kQNorm = "attn.q_norm.weight", kWqB = "attn.wq_b.weight";
constexpr LayerName kWkv = "attn.wkv.weight", kKvNorm = "attn.norm.weight", kSinks = "attn.attn_sink";
constexpr LayerName kWoA = "attn.wo_a.weight", kWoB = "attn.wo_b.weight";
// The compressors: the attention's, and the CSA indexer's own.
struct CompressorNames {
    LayerName wkv, wgate, ape, norm;
};
constexpr CompressorNames kCompressor{"attn.compressor.wkv.weight", "attn.compressor.wgate.weight",
                                      "attn.compressor.ape", "attn.compressor.norm.weight"};
constexpr CompressorNames kIndexCompressor{
    "attn.indexer.compressor.wkv.weight", "attn.indexer.compressor.wgate.weight",
    "attn.indexer.compressor.ape", "attn.indexer.compressor.norm.weight"};
constexpr LayerName kIndexWq = "attn.indexer.wq_b.weight", kIndexWeights = "attn.indexer.weights_proj.weight";
constexpr LayerName kRouter = "ffn.gate.weight", kRouterBias = "ffn.gate.bias", kTid2eid = "ffn.gate.tid2eid";
constexpr LayerName kShared = "ffn.shared_experts.", kExperts = "ffn.experts.";
// Every MLP's projections: w1 (gate), w3 (up), w2 (down).
const SwigluNames kExpertNames{"w1", "w3", "w2"};

constexpr int64_t kHcScales = 3;  // a layer's hyper-connection scales: of the pre, post and comb mixes

// Hyper-connection weights (docs/models.md 8.7): fn [(2+S)S, S D], base [1, (2+S)S], scale [1, 3]; the head's
// fn [S, S D], base [1, S], scale [1, 1].
struct HcWeights {
    Weight fn, base, scale;
};

// A compressor (docs/models.md 8.4): wkv, wgate [series hd, D], ape [ratio, series hd] f32, norm [1, hd].
struct CompressorWeights {
    Weight wkv, wgate, ape, norm;
};

struct V4LayerWeights {
    HcWeights hc_attn, hc_ffn;
    Weight attn_norm, ffn_norm;
    Weight wq_a, q_norm, wq_b;           // [q_lora, D], [1, q_lora], [H hd, q_lora]
    Weight wkv, kv_norm;                 // [hd, D], [1, hd]
    Weight sinks;                        // [1, H] f32
    Weight wo_a, wo_b;                   // [g o_lora, H hd / g], [D, g o_lora]
    CompressorWeights compressor;        // CSA and HCA layers
    CompressorWeights index_compressor;  // CSA: the indexer's keys
    Weight index_wq, index_weights;      // CSA: [nI dI, q_lora], [nI, D]
    Weight router, router_bias;          // [E, D], [1, E] (hash layers: no bias)
    std::vector<int32_t> tid2eid;        // hash layers: [vocab, top_k]
    ExpertWeights shared;                // the shared expert (clamped SwiGLU)
};

// The cache of one layer (docs/models.md 8.8). Rows of the ring and the compressor states are positions
// modulo their row count; entries and keys are indexed by window.
struct V4LayerCache {
    Tensor ring;                  // [max(window - 1, 1), hd]: kv of the last positions
    Tensor entries;               // [ctx / ratio, hd]: compressed entries (empty: sliding layer)
    Tensor state_kv, state_gate;  // [series ratio, series hd]: the compressor's raw rows
    Tensor index_keys;            // CSA: [ctx / ratio, dI]
    Tensor index_kv, index_gate;  // CSA: [2 ratio, 2 dI]: the indexer compressor's raw rows
    int64_t ratio = 0;            // positions per entry (0: sliding layer)
};

class V4State final : public ModelState {
public:
    std::vector<V4LayerCache> layers;

    std::vector<StateTensor> tensors() override {
        std::vector<StateTensor> t;
        for (V4LayerCache& c : layers)
            t.insert(t.end(), {{&c.ring, 0},
                               {&c.entries, c.ratio},
                               {&c.state_kv, 0},
                               {&c.state_gate, 0},
                               {&c.index_keys, c.ratio},
                               {&c.index_kv, 0},
                               {&c.index_gate, 0}});
        return t;
    }
};

class DeepseekV4 final : public Decoder {
public:
    DeepseekV4(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts)
        : Decoder(ops), cfg_(ckpt.config()), orig_(ckpt.find("embed.weight") != nullptr) {
        const auto load_layers = [this](WeightLoader& load) {
            ones_streams_ = load.f32(std::vector<float>(size_t(cfg_.hc_mult * cfg_.d_model), 1.0f), 1,
                                     cfg_.hc_mult * cfg_.d_model);
            ones_head_ = load.f32(std::vector<float>(size_t(cfg_.head_dim), 1.0f), 1, cfg_.head_dim);
            for (int l = 0; l < cfg_.n_layers; ++l) layers_.push_back(layer_load(load, l));
            const int64_t s = cfg_.hc_mult;
            hc_head_ = {f32_matrix(load, global("model.hc_head.hc_fn", "hc_head_fn"),
                                   {{s, s * cfg_.d_model}, "hc_mult and hidden_size"}),
                        load.vector(global("model.hc_head.hc_base", "hc_head_base"), {{s}, "hc_mult"}),
                        load.vector(global("model.hc_head.hc_scale", "hc_head_scale"))};
        };
        const auto expert_tensors = [this, &ckpt](int layer, int e) { return expert_parts(ckpt, layer, e); };
        const std::string gate0 = expert_parts(ckpt, 0, 0)[0];  // for the summary: the experts' dtype
        const TensorInfo* first_gate = ckpt.find(gate0.substr(0, gate0.find('[')));
        const DecoderSpec spec{.family = cfg_.family,
                               .n_layers = cfg_.n_layers,
                               .vocab = cfg_.vocab,
                               .rms_eps = cfg_.rms_eps,
                               .max_ctx = cfg_.max_ctx,
                               .n_experts = cfg_.n_experts,
                               .top_k = cfg_.top_k,
                               .dense = ckpt.get(layer_name(0, kWqA)).dtype,
                               .experts = !first_gate ? "missing"
                                          : first_gate->dtype == DType::i8
                                              ? "MXFP4 (I8 + E8M0 scales)"
                                              : std::string(dtype_name(first_gate->dtype)),
                               .embed_name = orig_ ? "embed.weight" : "model.embed_tokens.weight",
                               .norm_name = orig_ ? "norm.weight" : "model.norm.weight",
                               .head_name = "head.weight",
                               .d_model = cfg_.d_model,
                               .expert_ff = cfg_.d_expert,
                               .expert_ff_key = "moe_intermediate_size"};
        load_weights(ckpt, opts, spec, load_layers, expert_tensors);
        summarize(ckpt);
    }

    std::unique_ptr<ModelState> state_new() override {
        auto s = std::make_unique<V4State>();
        const int hd = cfg_.head_dim;
        for (int l = 0; l < cfg_.n_layers; ++l) {
            V4LayerCache c;
            c.ring = ops_.tensor(ring_rows(), hd);
            if (cfg_.compressed(l)) {
                const int r = cfg_.ratio[l], series = cfg_.series(l);
                c.ratio = r;
                c.entries = ops_.tensor(entry_rows(l), hd);
                c.state_kv = ops_.tensor(int64_t(series) * r, int64_t(series) * hd);
                c.state_gate = ops_.tensor(int64_t(series) * r, int64_t(series) * hd);
                if (cfg_.attn[l] == Attn::csa) {
                    c.index_keys = ops_.tensor(entry_rows(l), cfg_.index_dim);
                    c.index_kv = ops_.tensor(2 * int64_t(r), 2 * int64_t(cfg_.index_dim));
                    c.index_gate = ops_.tensor(2 * int64_t(r), 2 * int64_t(cfg_.index_dim));
                }
            }
            s->layers.push_back(std::move(c));
        }
        return s;
    }

private:
    // The ring keeps the window's earlier positions: window - 1 rows (at least one, so it is a tensor).
    int64_t ring_rows() const { return std::max(cfg_.window - 1, 1); }
    // Compressed entries a layer can close within the context.
    int64_t entry_rows(int l) const { return std::max<int64_t>(max_ctx() / cfg_.ratio[l], 1); }

    std::string layer_name(int l, LayerName n) const {
        return fmt::format("{}layers.{}.{}", orig_ ? "" : "model.", l, n);
    }
    std::string global(const char* hf, const char* orig) const { return orig_ ? orig : hf; }
    std::string expert_prefix(int l, int e) const { return fmt::format("{}{}.", layer_name(l, kExperts), e); }

    // The tensors of routed expert e in layer l (docs/models.md 8.9): w1, w3, w2 per expert.
    std::vector<std::string> expert_parts(const Checkpoint& ckpt, int l, int e) const {
        return swiglu_expert_tensors(ckpt, expert_prefix(l, e), kExpertNames);
    }

    // An f32 matrix of the [rows, cols] the config gives it, kept exact whatever --dense-bits says
    // (hyper-connection fn, compressor ape).
    static Weight f32_matrix(WeightLoader& load, const std::string& name, const ConfigShape& expect) {
        return load.f32(load.floats(name, expect), expect.dims[0], expect.dims[1]);
    }

    HcWeights hc_load(WeightLoader& load, int l, LayerName fn, LayerName base, LayerName scale) const {
        const int64_t s = cfg_.hc_mult, mix = (2 + s) * s;
        HcWeights w{f32_matrix(load, layer_name(l, fn), {{mix, s * cfg_.d_model}, "hc_mult and hidden_size"}),
                    load.vector(layer_name(l, base), {{mix}, "hc_mult"}), load.vector(layer_name(l, scale))};
        check(w.scale.cols() == kHcScales, "{} holds {} values, expected {}", layer_name(l, scale),
              w.scale.cols(), kHcScales);
        return w;
    }

    // width: head_dim (the attention's compressor) or index_head_dim (the indexer's), named by width_key.
    CompressorWeights compressor_load(WeightLoader& load, int l, const CompressorNames& n, int width,
                                      const char* width_key) const {
        const int64_t out = int64_t{cfg_.series(l)} * width;  // CSA compresses two overlapping series
        const std::string keys = fmt::format("layer {}'s compress ratio ({}, {}) and {}", l, cfg_.ratio[l],
                                             attn_name(cfg_.attn[l]), width_key);
        return {load.matrix(layer_name(l, n.wkv), {{out, cfg_.d_model}, keys + " and hidden_size"}),
                load.matrix(layer_name(l, n.wgate), {{out, cfg_.d_model}, keys + " and hidden_size"}),
                f32_matrix(load, layer_name(l, n.ape), {{cfg_.ratio[l], out}, keys}),
                load.vector(layer_name(l, n.norm), {{width}, width_key})};
    }

    V4LayerWeights layer_load(WeightLoader& load, int l) {
        V4LayerWeights w;
        w.hc_attn = hc_load(load, l, kHcAttnFn, kHcAttnBase, kHcAttnScale);
        const int64_t d = cfg_.d_model, hd = cfg_.head_dim, heads = cfg_.n_heads;
        const int64_t o_width = int64_t{cfg_.o_groups} * cfg_.o_lora;
        w.attn_norm = load.vector(layer_name(l, kAttnNorm), {{d}, "hidden_size"});
        w.wq_a = load.matrix(layer_name(l, kWqA), {{cfg_.q_lora, d}, "q_lora_rank and hidden_size"});
        w.q_norm = load.vector(layer_name(l, kQNorm), {{cfg_.q_lora}, "q_lora_rank"});
        w.wq_b = load.matrix(layer_name(l, kWqB),
                             {{heads * hd, cfg_.q_lora}, "num_attention_heads, head_dim and q_lora_rank"});
        w.wkv = load.matrix(layer_name(l, kWkv), {{hd, d}, "head_dim and hidden_size"});
        w.kv_norm = load.vector(layer_name(l, kKvNorm), {{hd}, "head_dim"});
        w.sinks = load.vector(layer_name(l, kSinks), {{heads}, "num_attention_heads"});
        w.wo_a =
            load.matrix(layer_name(l, kWoA), {{o_width, heads * hd / cfg_.o_groups},
                                              "o_groups, o_lora_rank, num_attention_heads and head_dim"});
        w.wo_b = load.matrix(layer_name(l, kWoB), {{d, o_width}, "hidden_size, o_groups and o_lora_rank"});
        if (cfg_.compressed(l))
            w.compressor = compressor_load(load, l, kCompressor, cfg_.head_dim, "head_dim");
        if (cfg_.attn[l] == Attn::csa) {
            w.index_compressor = compressor_load(load, l, kIndexCompressor, cfg_.index_dim, "index_head_dim");
            w.index_wq = load.matrix(layer_name(l, kIndexWq),
                                     {{int64_t{cfg_.index_heads} * cfg_.index_dim, cfg_.q_lora},
                                      "index_n_heads, index_head_dim and q_lora_rank"});
            w.index_weights = load.matrix(layer_name(l, kIndexWeights),
                                          {{cfg_.index_heads, d}, "index_n_heads and hidden_size"});
        }
        w.hc_ffn = hc_load(load, l, kHcFfnFn, kHcFfnBase, kHcFfnScale);
        w.ffn_norm = load.vector(layer_name(l, kFfnNorm), {{d}, "hidden_size"});
        w.router =
            load.matrix(layer_name(l, kRouter), {{cfg_.n_experts, d}, "n_routed_experts and hidden_size"});
        if (cfg_.hash[l]) {
            const std::string name = layer_name(l, kTid2eid);
            const std::vector<int64_t> ids = load.integers(name);
            check(ids.size() == size_t(cfg_.vocab) * size_t(cfg_.top_k),
                  "deepseek_v4: {} holds {} ids, expected [{}, {}]", name, ids.size(), cfg_.vocab,
                  cfg_.top_k);
            w.tid2eid.reserve(ids.size());
            for (int64_t id : ids) {
                check(id >= 0 && id < cfg_.n_experts, "deepseek_v4: {} names expert {} of {}", name, id,
                      cfg_.n_experts);
                w.tid2eid.push_back(static_cast<int32_t>(id));
            }
        } else {
            w.router_bias = load.vector(layer_name(l, kRouterBias), {{cfg_.n_experts}, "n_routed_experts"});
        }
        const std::string shared = layer_name(l, kShared);
        const SwigluNames& names = kExpertNames;
        const int64_t shared_ff = int64_t{cfg_.n_shared} * cfg_.d_expert;
        const std::string shared_keys = "n_shared_experts, moe_intermediate_size and hidden_size";
        w.shared = {cfg_.n_experts,
                    load.matrix(shared + names.gate + ".weight", {{shared_ff, d}, shared_keys}),
                    load.matrix(shared + names.up + ".weight", {{shared_ff, d}, shared_keys}),
                    load.matrix(shared + names.down + ".weight", {{d, shared_ff}, shared_keys}),
                    l,
                    glu()};
        return w;
    }

    // Every V4 expert, routed or shared: SwiGLU with the gate clamped above and up clamped both ways.
    GluActivation glu() const { return {GluKind::silu_clamp, cfg_.swiglu_limit}; }

    Tensor layers_forward(Tensor h, std::span<const int32_t> ids, Batch batch,
                          std::span<ModelState* const> states) override {
        Tensor x = ops_.repeat_cols(h, cfg_.hc_mult);  // [n, S D]: every stream starts as the embedding
        for (int l = 0; l < cfg_.n_layers; ++l) x = layer_forward(l, x, ids, batch, states);
        return hc_head(x);  // [n, D]
    }

    HcShape hc_shape() const { return {cfg_.hc_mult, cfg_.hc_iters, cfg_.hc_eps}; }

    // The mixing weights of a hyper-connection from the streams (docs/models.md 8.7).
    //                                                     x: [n, S D]; returns [n, (2+S)S] (head: [n, S])
    Tensor hc_mix(const HcWeights& hc, const Tensor& x) {
        Tensor f =
            ops_.rms_norm(x, ones_streams_, cfg_.rms_eps);  // [n, S D]: unweighted RMS over all streams
        return ops_.hc_weights(ops_.matmul(hc.fn, f), hc.base, hc.scale, hc_shape());
    }

    // The last streams collapsed into one row per token.                      x: [n, S D] -> [n, D]
    Tensor hc_head(const Tensor& x) { return ops_.hc_collapse(x, hc_mix(hc_head_, x), cfg_.hc_mult); }

    // One layer (docs/models.md 8): attention, then MoE, each between a hyper-connection's collapse and
    // expand.                                                                  x: [n, S D] -> [n, S D]
    Tensor layer_forward(int l, const Tensor& x, std::span<const int32_t> ids, Batch batch,
                         std::span<ModelState* const> states) {
        const V4LayerWeights& w = layers_[l];
        Tensor mix = hc_mix(w.hc_attn, x);                                                    // [n, (2+S)S]
        Tensor u = ops_.hc_collapse(x, mix, cfg_.hc_mult);                                    // [n, D]
        Tensor a = attention(l, ops_.rms_norm(u, w.attn_norm, cfg_.rms_eps), batch, states);  // [n, D]
        Tensor x1 = ops_.hc_expand(x, a, mix, cfg_.hc_mult);                                  // [n, S D]

        mix = hc_mix(w.hc_ffn, x1);
        Tensor u2 =
            ops_.rms_norm(ops_.hc_collapse(x1, mix, cfg_.hc_mult), w.ffn_norm, cfg_.rms_eps);  // [n, D]
        Tensor y = routed(l, u2, ids);                                                         // [n, D]
        mlp_add(ops_, w.shared, u2, y);
        return ops_.hc_expand(x1, y, mix, cfg_.hc_mult);
    }

    // The rope of a layer's attention heads and kv: its set (main or compress) on the trailing rope_dim of
    // each head of `width`, interleaved pairs (docs/models.md 8.3).
    RopeParams rope_heads(int l, int width, bool inverse = false, int stride = 1) const {
        RopeParams r = cfg_.rope_of(l);
        r.head_dim = width;
        r.rotary_dim = cfg_.rope_dim;
        r.rotary_offset = width - cfg_.rope_dim;
        r.inverse = inverse;
        r.position_stride = stride;
        return r;
    }

    // Attention (docs/models.md 8.2): the projections over every row, then each segment at its positions
    // over its own ring, compressed entries and indexer.                   x: [n, D]; returns [n, D]
    Tensor attention(int l, const Tensor& x, Batch batch, std::span<ModelState* const> states) {
        const V4LayerWeights& w = layers_[l];
        const int64_t n = x.rows(), hd = cfg_.head_dim, heads = cfg_.n_heads;
        Tensor c_q = ops_.rms_norm(ops_.matmul(w.wq_a, x), w.q_norm, cfg_.rms_eps);  // [n, q_lora]
        Tensor q = ops_.matmul(w.wq_b, c_q);                                         // [n, H hd]
        q = ops_.rms_norm(q.reshaped(n * heads, hd), ones_head_, cfg_.rms_eps).reshaped(n, heads * hd);
        Tensor kv = ops_.rms_norm(ops_.matmul(w.wkv, x), w.kv_norm, cfg_.rms_eps);  // [n, hd]: key = value
        Tensor comp_kv, comp_gate, index_kv, index_gate, index_q, index_weights;    // empty where unused
        const bool csa = cfg_.attn[l] == Attn::csa;
        if (cfg_.compressed(l)) {
            comp_kv = ops_.matmul(w.compressor.wkv, x);      // [n, series hd]
            comp_gate = ops_.matmul(w.compressor.wgate, x);  // [n, series hd]
        }
        if (csa) {
            index_kv = ops_.matmul(w.index_compressor.wkv, x);      // [n, 2 dI]
            index_gate = ops_.matmul(w.index_compressor.wgate, x);  // [n, 2 dI]
            index_q = ops_.matmul(w.index_wq, c_q);                 // [n, nI dI]
            index_weights = ops_.matmul(w.index_weights, x);        // [n, nI]
        }
        const CompressedAttentionShape shape{int(heads), int(hd), cfg_.window, cfg_.ratio[l],
                                             1.0f / std::sqrt(static_cast<float>(hd))};
        Tensor o = per_segment(  // [n, H hd]
            ops_, batch, {q, kv, comp_kv, comp_gate, index_kv, index_gate, index_q, index_weights},
            [&](const Segment& g, std::span<const Tensor> t) {
                V4LayerCache& c = state_of<V4State>(states, g.seq).layers[l];
                Tensor qs = t[0], kvs = t[1];
                ops_.rope(qs, rope_heads(l, int(hd)), g.pos0);
                ops_.rope(kvs, rope_heads(l, int(hd)), g.pos0);
                Tensor selection;  // CSA: [rows, index_topk] entry ids
                if (cfg_.compressed(l))
                    compress(l, w.compressor, int(hd), cfg_.series(l), t[2], t[3], c.entries, c.state_kv,
                             c.state_gate, g.pos0);
                if (csa) {
                    compress(l, w.index_compressor, cfg_.index_dim, 2, t[4], t[5], c.index_keys, c.index_kv,
                             c.index_gate, g.pos0);
                    selection = index_select(l, t[6], t[7], c, g.pos0);
                }
                Tensor os = ops_.compressed_attention(qs, kvs, c.ring, c.entries, csa ? &selection : nullptr,
                                                      w.sinks, shape, g.pos0);
                ops_.copy_rows(c.ring, kvs, g.pos0);                  // the window's raw keys for later calls
                ops_.rope(os, rope_heads(l, int(hd), true), g.pos0);  // values carried the keys' rotation
                return os;
            });
        Tensor y = ops_.matmul(w.wo_a, o, cfg_.o_groups);  // [n, g o_lora]: each group of heads on its own
        return ops_.matmul(w.wo_b, y);                     // [n, D]
    }

    // A compressor (docs/models.md 8.4) over one sequence's rows at pos0 ...: pools each window that closes
    // in this call into an entry (RMSNorm, rope at the window's first position), appended to `entries`; then
    // keeps this call's raw rows.          kv, gate: [n, series width] (its projections); entries: [windows,
    // width]
    void compress(int l, const CompressorWeights& w, int width, int series, const Tensor& kv,
                  const Tensor& gate, Tensor& entries, Tensor& state_kv, Tensor& state_gate, int64_t pos0) {
        const int ratio = cfg_.ratio[l];
        if (windows_closing(pos0, kv.rows(), ratio) > 0) {
            Tensor e = ops_.compress_kv(kv, gate, w.ape, state_kv, state_gate, {ratio, width, series}, pos0);
            e = ops_.rms_norm(e, w.norm, cfg_.rms_eps);  // [windows, width]
            const int64_t w0 = pos0 / ratio;             // the first window closing now
            ops_.rope(e, rope_heads(l, width, false, ratio), w0);
            ops_.copy_rows(entries, e, w0);
        }
        ops_.copy_rows(state_kv, kv, pos0);
        ops_.copy_rows(state_gate, gate, pos0);
    }

    // CSA's lightning indexer (docs/models.md 8.5) over one sequence's rows: the top index_topk visible
    // entries of its indexer keys per query.     q: [n, nI dI] (index_wq c_q), weights: [n, nI]; returns [n,
    // top_k]
    Tensor index_select(int l, const Tensor& q, const Tensor& weights, V4LayerCache& c, int64_t pos0) {
        Tensor qs = q;
        ops_.rope(qs, rope_heads(l, cfg_.index_dim), pos0);
        const DsaShape shape{.n_heads = cfg_.index_heads,
                             .head_dim = cfg_.index_dim,
                             .top_k = cfg_.index_topk,
                             .scale = 1.0f / std::sqrt(static_cast<float>(cfg_.index_dim)),
                             .weight_scale = 1.0f / std::sqrt(static_cast<float>(cfg_.index_heads)),
                             .ratio = cfg_.ratio[l]};
        return ops_.index_topk(qs, weights, c.index_keys, shape, pos0);
    }

    // The routed experts of layer l (docs/models.md 8.6).               x: [n, D]; returns [n, D]
    Tensor routed(int l, const Tensor& x, std::span<const int32_t> ids) {
        const auto weights_of = [this](const ExpertHandle& h) {
            ExpertWeights e = swiglu_expert_weights(h);
            e.act = glu();
            return e;
        };
        const auto prefetch_next = [&] {
            if (l + 1 < cfg_.n_layers) moe_prefetch(*store_, l + 1, [&] { return route(l + 1, x, ids); });
        };
        return moe_routed(ops_, *store_, l, x, route(l, x, ids), weights_of, prefetch_next);
    }

    // Layer l's router: sqrt(softplus) scores; top-k of score + bias, or the token's hash-table experts.
    Routing route(int l, const Tensor& x, std::span<const int32_t> ids) {
        const V4LayerWeights& w = layers_[l];
        const SigmoidRouting rp{
            .k = cfg_.top_k,
            .n_group = 1,
            .topk_group = 1,
            .renormalize = true,
            .scaling = cfg_.routed_scaling,
            .score = cfg_.sqrt_softplus ? RouterScore::sqrt_softplus : RouterScore::sigmoid};
        Tensor logits = ops_.matmul(w.router, x);  // [n, E]
        if (!cfg_.hash[l]) return ops_.route_sigmoid_topk(logits, w.router_bias, rp);
        std::vector<int32_t> fixed;  // [n, top_k] from tid2eid[token]
        fixed.reserve(ids.size() * size_t(cfg_.top_k));
        for (int32_t id : ids) {
            check(id >= 0 && id < cfg_.vocab, "deepseek_v4: token {} is outside the vocabulary of {}", id,
                  cfg_.vocab);
            const auto* row = &w.tid2eid[size_t(id) * size_t(cfg_.top_k)];
            fixed.insert(fixed.end(), row, row + cfg_.top_k);
        }
        return ops_.route_sigmoid_topk(logits, w.router_bias, rp, fixed);
    }

    // The summary's family fields and the cache sizes (docs/models.md 8.8).
    void summarize(const Checkpoint& ckpt) {
        int counts[3] = {0, 0, 0}, hash_layers = 0;
        for (int l = 0; l < cfg_.n_layers; ++l) {
            ++counts[static_cast<int>(cfg_.attn[l])];
            hash_layers += cfg_.hash[l];
        }
        // MTP layers are in the checkpoint (mtp.*, or transformers' model.layers.N.*) and never read.
        int mtp_tensors = 0;
        const std::string hf_mtp = fmt::format("model.layers.{}.", cfg_.n_layers);
        for (const TensorInfo& t : ckpt.tensors())
            mtp_tensors += t.name.starts_with("mtp.") || t.name.starts_with(hf_mtp);
        summary_.architecture = fmt::format(
            "{} layers ({} sliding, {} CSA, {} HCA; {} hash-routed), d_model {}, {} heads of {} (rope {}, "
            "window "
            "{}, q_lora {}, {} output groups of {}), indexer {} heads of {} top-{}, {} hyper-connection "
            "streams, "
            "{} experts top-{} (d_ff {}) + shared, vocab {}{}",
            cfg_.n_layers, counts[0], counts[1], counts[2], hash_layers, cfg_.d_model, cfg_.n_heads,
            cfg_.head_dim, cfg_.rope_dim, cfg_.window, cfg_.q_lora, cfg_.o_groups, cfg_.o_lora,
            cfg_.index_heads, cfg_.index_dim, cfg_.index_topk, cfg_.hc_mult, cfg_.n_experts, cfg_.top_k,
            cfg_.d_expert, cfg_.vocab,
            mtp_tensors
                ? fmt::format("; MTP ({} layer{}, {} tensor{}) not loaded", cfg_.mtp_layers,
                              cfg_.mtp_layers == 1 ? "" : "s", mtp_tensors, mtp_tensors == 1 ? "" : "s")
                : "");
        summary_.expert_count = uint64_t(cfg_.n_layers) * cfg_.n_experts;
        // Per token: each compressed layer grows by one entry (and CSA one indexer key) every ratio tokens.
        // Fixed per session: the sliding rings and the compressors' raw rows.
        double per_token = 0;
        uint64_t fixed = 0;
        const uint64_t f = sizeof(float), hd = cfg_.head_dim, di = cfg_.index_dim;
        for (int l = 0; l < cfg_.n_layers; ++l) {
            fixed += uint64_t(ring_rows()) * hd * f;
            if (!cfg_.compressed(l)) continue;
            const uint64_t series = cfg_.series(l), r = cfg_.ratio[l];
            const uint64_t entry = (hd + (cfg_.attn[l] == Attn::csa ? di : 0)) * f;
            per_token += double(entry) / double(r);
            fixed += 2 * series * r * series * hd * f;
            if (cfg_.attn[l] == Attn::csa) fixed += 2 * 2 * r * 2 * di * f;
        }
        summary_.kv_bytes_per_token = static_cast<uint64_t>(std::ceil(per_token));
        summary_.state_bytes = fixed;
        std::string detail =
            fmt::format("sliding window {} ({} B per layer per token in the ring)", cfg_.window, hd * f);
        if (counts[1])
            detail += fmt::format("; CSA: one entry of {} B + indexer key of {} B per {} tokens", hd * f,
                                  di * f, first_ratio(Attn::csa));
        if (counts[2])
            detail += fmt::format("; HCA: one entry of {} B per {} tokens", hd * f, first_ratio(Attn::hca));
        summary_.kv_detail = detail;
    }

    int first_ratio(Attn a) const {
        for (int l = 0; l < cfg_.n_layers; ++l)
            if (cfg_.attn[l] == a) return cfg_.ratio[l];
        return 0;
    }

    DeepseekV4Config cfg_;
    bool orig_;  // the original release's names (else transformers')
    std::vector<V4LayerWeights> layers_;
    HcWeights hc_head_;
    Weight ones_streams_, ones_head_;  // [1, S D], [1, hd]: the unweighted RMSNorms' gains
};

}  // namespace

std::unique_ptr<Model> deepseek_v4_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) {
    return std::make_unique<DeepseekV4>(ckpt, ops, opts);
}

}  // namespace coli
