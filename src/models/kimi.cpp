// Kimi Linear (kimi_linear, docs/models.md 5) and Kimi K3 (kimi_k3, 7), one code: a pre-norm decoder
// whose layers are Kimi delta attention (KDA: a short causal convolution, then a gated delta rule with a
// per-channel forget gate on a fixed-size recurrent state) or NoPE multi-head latent attention (absorbed
// MLA on the compressed latent cache, no rotary embedding); the first layers dense, then MoE layers with a
// sigmoid router over SwiGLU experts plus shared experts. K3 adds: the lower-bounded forget gate and a
// full-rank KDA output gate, an MLA output gate, LatentMoE (routed experts in a narrower latent space, with
// an RMSNorm on their sum), the SiTU activation, and attention residuals (AttnRes: the residual stream is
// replaced by learned softmax mixes of block snapshots). K3's routed experts are MXFP4, read in place.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "models/decoder.h"
#include "models/kimi_config.h"
#include "models/registry.h"
#include "nn/mla.h"
#include "nn/moe.h"

namespace coli {
namespace {

struct KdaWeights {
    Weight q, k, v;                   // [P, D] projections, P = heads * head_dim
    Weight q_conv, k_conv, v_conv;    // [P, K] f32 short convolutions
    Weight f_a, f_b, dt_bias, a_log;  // forget gate: [dim, D], [P, dim], [1, P], [1, heads]
    Weight beta;                      // [heads, D]
    Weight g_a, g_b;                  // output gate: W_gb W_ga (g_a empty: g_b is K3's full-rank W_g)
    Weight o_norm, o;                 // [1, head_dim] gated RMSNorm; [D, P]
};

struct KimiLayerWeights {
    Weight input_norm, post_norm;
    KdaWeights kda;                              // KDA layers
    MlaWeights mla;                              // MLA layers
    Weight router, router_bias;                  // MoE layers
    Weight latent_down, latent_up, latent_norm;  // K3 LatentMoE (empty otherwise)
    ExpertWeights mlp;         // the dense MLP (dense layers) or the shared experts (MoE layers)
    bool has_mlp = false;      // false: an MoE layer without shared experts
    Weight attn_res, mlp_res;  // K3 AttnRes: norm gain times projection, [1, D]
};

class KimiState final : public ModelState {
public:
    std::vector<KvCache> kv;                     // MLA layers: latents and rope keys (else empty)
    std::vector<Tensor> conv_q, conv_k, conv_v;  // KDA layers: the last K - 1 projections [K - 1, P]
    std::vector<Tensor> kda;                     // KDA layers: recurrent state [P, head_dim]

    std::vector<StateTensor> tensors() override {
        std::vector<StateTensor> t;
        for (KvCache& c : kv) t.insert(t.end(), {{&c.k, 1}, {&c.v, 1}});
        for (auto* states : {&conv_q, &conv_k, &conv_v, &kda})
            for (Tensor& s : *states) t.push_back({&s, 0});
        return t;
    }
};

class Kimi final : public Decoder {
public:
    Kimi(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts)
        : Decoder(ops),
          cfg_(ckpt.config()),
          mla_{.shape = {cfg_.n_heads, cfg_.nope_dim, cfg_.rope_dim, cfg_.v_dim, cfg_.kv_lora,
                         1.0f / std::sqrt(static_cast<float>(cfg_.nope_dim + cfg_.rope_dim))},
               .q_lora = cfg_.q_lora,
               // NoPE (docs/models.md 5.2): no rotation, the rope dims of q dot the raw shared key.
               .rope_q = std::nullopt,
               .rope_k = std::nullopt,
               .output_gate = cfg_.mla_output_gate} {
        const std::string& p = cfg_.prefix;
        const auto load_layers = [&](WeightLoader& load) {
            for (int l = 0; l < cfg_.n_layers; ++l) layers_.push_back(layer_load(ckpt, load, l));
            if (cfg_.attn_res_block > 0)
                out_res_ = res_weight(load, p + "model.output_attn_res_norm.weight",
                                      p + "model.output_attn_res_proj.weight");
        };
        const auto expert_tensors = [this, &ckpt](int layer, int e) {
            if (!cfg_.is_moe(layer)) return std::vector<std::string>{};
            return swiglu_expert_tensors(ckpt, expert_prefix(layer, e), kKimiExpertNames);
        };
        std::string experts = "none";
        for (int l = 0; l < cfg_.n_layers && experts == "none"; ++l)
            if (cfg_.is_moe(l)) {
                const TensorInfo* t = ckpt.find(expert_prefix(l, 0) + "w1.weight");
                experts = t ? std::string(dtype_name(t->dtype)) : "MXFP4 (compressed-tensors)";
            }
        const DecoderSpec spec{.family = cfg_.family,
                               .prefix = p,
                               .n_layers = cfg_.n_layers,
                               .vocab = cfg_.vocab,
                               .rms_eps = cfg_.rms_eps,
                               .max_ctx = cfg_.max_ctx,
                               .n_experts = cfg_.n_experts,
                               .top_k = cfg_.top_k,
                               .dense = ckpt.get(layer_prefix(0) + "self_attn.o_proj.weight").dtype,
                               .experts = experts,
                               .d_model = cfg_.d_model,
                               .expert_ff = cfg_.d_expert,
                               .expert_ff_key = "moe_intermediate_size",
                               .expert_d = cfg_.d_latent,
                               .expert_d_key = "routed_expert_hidden_size"};
        load_weights(ckpt, opts, spec, load_layers, expert_tensors);
        summarize();
    }

    std::unique_ptr<ModelState> state_new() override {
        auto s = std::make_unique<KimiState>();
        const int64_t p = int64_t{cfg_.kda_heads} * cfg_.kda_dim, hist = cfg_.conv_kernel - 1;
        for (int l = 0; l < cfg_.n_layers; ++l) {
            const bool mla = cfg_.mla_layer[l];
            s->kv.push_back(mla ? mla_cache_new(ops_, mla_, max_ctx()) : KvCache{});
            s->conv_q.push_back(mla ? Tensor{} : ops_.tensor(hist, p));
            s->conv_k.push_back(mla ? Tensor{} : ops_.tensor(hist, p));
            s->conv_v.push_back(mla ? Tensor{} : ops_.tensor(hist, p));
            s->kda.push_back(mla ? Tensor{} : ops_.tensor(p, cfg_.kda_dim));
        }
        return s;
    }

private:
    std::string layer_prefix(int l) const { return fmt::format("{}model.layers.{}.", cfg_.prefix, l); }
    std::string expert_prefix(int l, int e) const {
        return fmt::format("{}block_sparse_moe.experts.{}.", layer_prefix(l), e);
    }

    // AttnRes's score weight: the entry norm's gain times the [1, D] projection, applied as one vector.
    Weight res_weight(WeightLoader& load, const std::string& norm, const std::string& proj) {
        std::vector<float> w = load.floats(norm);
        const std::vector<float> pw = load.floats(proj);
        check(w.size() == pw.size() && static_cast<int64_t>(w.size()) == cfg_.d_model,
              "{} and {} must both hold {} values", norm, proj, cfg_.d_model);
        for (size_t i = 0; i < w.size(); ++i) w[i] *= pw[i];
        return load.f32(std::move(w), 1, cfg_.d_model);
    }

    KimiLayerWeights layer_load(const Checkpoint& ckpt, WeightLoader& load, int l) {
        const std::string p = layer_prefix(l), a = p + "self_attn.";
        const int64_t d = cfg_.d_model;
        KimiLayerWeights w;
        w.input_norm = load.vector(p + "input_layernorm.weight", {{d}, "hidden_size"});
        w.post_norm = load.vector(p + "post_attention_layernorm.weight", {{d}, "hidden_size"});
        if (cfg_.mla_layer[l]) {
            w.mla = mla_load(load, a, mla_, d);
        } else {
            KdaWeights& k = w.kda;
            const int64_t width = int64_t{cfg_.kda_heads} * cfg_.kda_dim, dim = cfg_.kda_dim;
            // linear_attn_config's keys.
            const std::string in = "num_heads, head_dim and hidden_size", low = "head_dim and hidden_size";
            k.q = load.matrix(a + "q_proj.weight", {{width, d}, in});
            k.k = load.matrix(a + "k_proj.weight", {{width, d}, in});
            k.v = load.matrix(a + "v_proj.weight", {{width, d}, in});
            // Depthwise convolutions, stored [width, 1, kernel].
            const auto conv = [&](const std::string& name) {
                const ConfigShape shape{{width, 1, cfg_.conv_kernel},
                                        "num_heads, head_dim and short_conv_kernel_size"};
                return load.f32(load.floats(name, shape), width, cfg_.conv_kernel);
            };
            k.q_conv = conv(a + "q_conv1d.weight");
            k.k_conv = conv(a + "k_conv1d.weight");
            k.v_conv = conv(a + "v_conv1d.weight");
            k.f_a = load.matrix(a + "f_a_proj.weight", {{dim, d}, low});
            k.f_b = load.matrix(a + "f_b_proj.weight", {{width, dim}, "num_heads and head_dim"});
            k.dt_bias = load.f32(load.floats(a + "dt_bias", {{width}, "num_heads and head_dim"}), 1, width);
            // Stored [1, 1, H, 1] (Kimi Linear) or zero-padded past the heads (K3): the first H values.
            std::vector<float> a_log = load.floats(a + "A_log");
            check(static_cast<int64_t>(a_log.size()) >= cfg_.kda_heads,
                  "{}A_log holds {} values for {} heads", a, a_log.size(), cfg_.kda_heads);
            a_log.resize(cfg_.kda_heads);
            k.a_log = load.f32(std::move(a_log), 1, cfg_.kda_heads);
            k.beta = load.matrix(a + "b_proj.weight", {{cfg_.kda_heads, d}, "num_heads and hidden_size"});
            if (cfg_.full_rank_gate) {
                k.g_b = load.matrix(a + "g_proj.weight", {{width, d}, in});
            } else {
                k.g_a = load.matrix(a + "g_a_proj.weight", {{dim, d}, low});
                k.g_b = load.matrix(a + "g_b_proj.weight", {{width, dim}, "num_heads and head_dim"});
            }
            k.o_norm = load.vector(a + "o_norm.weight", {{dim}, "head_dim"});
            k.o = load.matrix(a + "o_proj.weight", {{d, width}, "hidden_size, num_heads and head_dim"});
        }
        if (cfg_.attn_res_block > 0) {
            w.attn_res =
                res_weight(load, p + "self_attention_res_norm.weight", p + "self_attention_res_proj.weight");
            w.mlp_res = res_weight(load, p + "mlp_res_norm.weight", p + "mlp_res_proj.weight");
        }
        const std::string moe = p + "block_sparse_moe.";
        std::string mlp = p + "mlp.";
        if (cfg_.is_moe(l)) {
            w.router = load.matrix(moe + "gate.weight", {{cfg_.n_experts, d}, "num_experts and hidden_size"});
            w.router_bias =
                load.vector(moe + "gate.e_score_correction_bias", {{cfg_.n_experts}, "num_experts"});
            if (cfg_.d_latent > 0) {
                const std::string keys = "routed_expert_hidden_size and hidden_size";
                w.latent_down =
                    load.matrix(moe + "routed_expert_down_proj.weight", {{cfg_.d_latent, d}, keys});
                w.latent_up = load.matrix(moe + "routed_expert_up_proj.weight", {{d, cfg_.d_latent}, keys});
                if (cfg_.latent_norm)
                    w.latent_norm = load.vector(moe + "routed_expert_norm.weight",
                                                {{cfg_.d_latent}, "routed_expert_hidden_size"});
            }
            mlp = moe + "shared_experts.";
        } else if (ckpt.find(mlp + "gate_proj.weight") == nullptr) {
            mlp = moe;  // transformers' layer-0 MLP name: block_sparse_moe (docs/models.md 0.1)
        }
        if (!cfg_.is_moe(l) || cfg_.n_shared > 0) {
            const MlpWidths widths = cfg_.is_moe(l) ? MlpWidths{d, cfg_.n_shared * cfg_.d_expert,
                                                                "num_shared_experts, moe_intermediate_size"}
                                                    : MlpWidths{d, cfg_.d_ff, "intermediate_size"};
            w.mlp = mlp_load(load, mlp, widths, cfg_.n_experts, l, cfg_.act);
            w.has_mlp = true;
        }
        return w;
    }

    Tensor layers_forward(Tensor h, std::span<const int32_t>, Batch batch,
                          std::span<ModelState* const> states) override {
        return cfg_.attn_res_block > 0 ? attn_res_forward(h, batch, states)
                                       : residual_forward(h, batch, states);
    }

    // Plain pre-norm residual stream (Kimi Linear).                                      h: [n, d_model]
    Tensor residual_forward(Tensor h, Batch batch, std::span<ModelState* const> states) {
        for (int l = 0; l < cfg_.n_layers; ++l) {
            const KimiLayerWeights& w = layers_[l];
            h = ops_.add(h, attention(l, ops_.rms_norm(h, w.input_norm, cfg_.rms_eps), batch, states));
            h = ops_.add(h, mlp(l, ops_.rms_norm(h, w.post_norm, cfg_.rms_eps)));
        }
        return h;
    }

    // Attention residuals (K3, docs/models.md 7.1): each sublayer reads a softmax mix of the block snapshots
    // and the running block sum p; a new block starts every attn_res_block layers with p as its snapshot.
    Tensor attn_res_forward(Tensor p, Batch batch, std::span<ModelState* const> states) {
        std::vector<Tensor> entries;  // block snapshots, then p: [n, d_model] each
        const auto mix = [&](const Weight& w) {
            entries.push_back(p);
            Tensor m = ops_.res_mix(entries, w, cfg_.rms_eps);
            entries.pop_back();
            return m;
        };
        for (int l = 0; l < cfg_.n_layers; ++l) {
            const KimiLayerWeights& w = layers_[l];
            const Tensor h = entries.empty() ? p : mix(w.attn_res);
            const bool block_start = l % cfg_.attn_res_block == 0;
            if (block_start) entries.push_back(p);
            Tensor a = attention(l, ops_.rms_norm(h, w.input_norm, cfg_.rms_eps), batch, states);
            p = block_start ? a : ops_.add(p, a);
            p = ops_.add(p, mlp(l, ops_.rms_norm(mix(w.mlp_res), w.post_norm, cfg_.rms_eps)));
        }
        return mix(out_res_);
    }

    // The token mixer of layer l on its normed input x: NoPE MLA (docs/models.md 5.2) or KDA, each segment
    // on its own caches.                                                 x: [n, d_model] -> [n, d_model]
    Tensor attention(int l, const Tensor& x, Batch batch, std::span<ModelState* const> states) {
        if (!cfg_.mla_layer[l]) return kda(l, x, batch, states);
        const MlaWeights& w = layers_[l].mla;
        const auto cache = [&](int seq) -> KvCache& { return state_of<KimiState>(states, seq).kv[l]; };
        return mla_forward(ops_, mla_, w, x, mla_query_latent(ops_, mla_, w, x), batch, cache);
    }

    // Kimi delta attention (docs/models.md 5.1).                        x: [n, d_model] -> [n, d_model]
    Tensor kda(int l, const Tensor& x, Batch batch, std::span<ModelState* const> states) {
        const KdaWeights& w = layers_[l].kda;
        const int64_t n = x.rows();
        Tensor q = ops_.matmul(w.q, x);                        // [n, P]
        Tensor k = ops_.matmul(w.k, x);                        // [n, P]
        Tensor v = ops_.matmul(w.v, x);                        // [n, P]
        Tensor g = ops_.matmul(w.f_b, ops_.matmul(w.f_a, x));  // [n, P]
        Tensor beta = ops_.matmul(w.beta, x);                  // [n, heads]
        const KdaShape shape{cfg_.kda_heads, cfg_.kda_dim, cfg_.gate_lower_bound};
        // [n, P]: each sequence's rows through its own convolution and recurrent states
        Tensor o =
            per_segment(ops_, batch, {q, k, v, g, beta}, [&](const Segment& seg, std::span<const Tensor> t) {
                KimiState& s = state_of<KimiState>(states, seg.seq);
                Tensor qs = ops_.short_conv(t[0], w.q_conv, s.conv_q[l]);
                Tensor ks = ops_.short_conv(t[1], w.k_conv, s.conv_k[l]);
                Tensor vs = ops_.short_conv(t[2], w.v_conv, s.conv_v[l]);
                return ops_.kda(qs, ks, vs, t[3], t[4], w.a_log, w.dt_bias, shape, s.kda[l]);
            });
        Tensor gate = w.g_a.rows() > 0 ? ops_.matmul(w.g_b, ops_.matmul(w.g_a, x)) : ops_.matmul(w.g_b, x);
        // The output norm is per head: [n, P] viewed as [n heads, head_dim].
        Tensor y = ops_.rms_norm(o.reshaped(n * cfg_.kda_heads, cfg_.kda_dim), w.o_norm, cfg_.rms_eps)
                       .reshaped(n, o.cols());
        return ops_.matmul(w.o, ops_.mul_sigmoid(y, gate));
    }

    // The MLP of layer l on its normed input x (docs/models.md 5.3): dense, or routed experts (in the
    // latent width for K3) plus shared experts.                         x: [n, d_model] -> [n, d_model]
    Tensor mlp(int l, const Tensor& x) {
        const KimiLayerWeights& w = layers_[l];
        Tensor y = cfg_.is_moe(l) ? routed(l, x) : ops_.tensor(x.rows(), cfg_.d_model);  // [n, d_model]
        if (w.has_mlp) mlp_add(ops_, w.mlp, x, y);
        return y;
    }

    // The routed experts of MoE layer l.                               x: [n, d_model] -> [n, d_model]
    Tensor routed(int l, const Tensor& x) {
        const KimiLayerWeights& w = layers_[l];
        const Routing r = route(l, x);
        const auto prefetch_next = [&] {
            if (l + 1 < cfg_.n_layers && cfg_.is_moe(l + 1))
                moe_prefetch(*store_, l + 1, [&] { return route(l + 1, x); });
        };
        const GluActivation act = cfg_.act;
        const auto weights_of = [act](const ExpertHandle& e) {
            ExpertWeights ew = swiglu_expert_weights(e);
            ew.act = act;
            return ew;
        };
        const Tensor z = cfg_.d_latent > 0 ? ops_.matmul(w.latent_down, x) : x;    // [n, latent]
        Tensor u = moe_routed(ops_, *store_, l, z, r, weights_of, prefetch_next);  // [n, latent]
        if (cfg_.latent_norm) u = ops_.rms_norm(u, w.latent_norm, cfg_.rms_eps);
        return cfg_.d_latent > 0 ? ops_.matmul(w.latent_up, u) : u;
    }

    // Layer l's router: sigmoid scores with a selection bias, top-k of one group.          x: [n, d_model]
    Routing route(int l, const Tensor& x) {
        const SigmoidRouting rp{cfg_.top_k, 1, 1, cfg_.renormalize, cfg_.routed_scaling};
        return ops_.route_sigmoid_topk(ops_.matmul(layers_[l].router, x), layers_[l].router_bias, rp);
    }

    // The summary's family fields (the skeleton fills the rest).
    void summarize() {
        int mla_layers = 0, moe_layers = 0;
        for (int l = 0; l < cfg_.n_layers; ++l) {
            mla_layers += cfg_.mla_layer[l];
            moe_layers += cfg_.is_moe(l);
        }
        summary_.architecture = fmt::format(
            "{} layers ({} KDA: {} heads of {}, {} MLA: {} heads, kv_lora {}; {} dense), d_model {}, {} "
            "experts "
            "top-{} (d_ff {}{}) + {} shared, {}{}, vocab {}",
            cfg_.n_layers, cfg_.n_layers - mla_layers, cfg_.kda_heads, cfg_.kda_dim, mla_layers, cfg_.n_heads,
            cfg_.kv_lora, cfg_.n_dense, cfg_.d_model, cfg_.n_experts, cfg_.top_k, cfg_.d_expert,
            cfg_.d_latent > 0 ? fmt::format(" in a latent of {}", cfg_.d_latent) : "", cfg_.n_shared,
            cfg_.act.kind == GluKind::situ ? "SiTU" : "SwiGLU",
            cfg_.attn_res_block > 0
                ? fmt::format(", attention residuals every {} layers", cfg_.attn_res_block)
                : "",
            cfg_.vocab);
        summary_.expert_count = uint64_t(moe_layers) * cfg_.n_experts;
        // MLA layers keep the latent and the rope key per token; KDA layers a fixed-size state.
        summary_.kv_bytes_per_token = uint64_t(mla_layers) * mla_.cache_width() * sizeof(float);
        // Each KDA layer: a [dk, dv] state per head and the last K - 1 inputs of its three convolutions.
        const uint64_t width = uint64_t(cfg_.kda_heads) * cfg_.kda_dim;
        summary_.state_bytes = uint64_t(cfg_.n_layers - mla_layers) *
                               (width * cfg_.kda_dim + 3 * uint64_t(cfg_.conv_kernel - 1) * width) *
                               sizeof(float);
    }

    KimiConfig cfg_;
    Mla mla_;
    Weight out_res_;  // K3 AttnRes: the output mix's score weight
    std::vector<KimiLayerWeights> layers_;
};

}  // namespace

// The ops Kimi::forward calls for Kimi Linear 48B (kimi_k3 is recorded at its real size by `coli backends`,
// runtime/op_record.cpp; Kimi Linear has no `coli synth` architecture to record it from yet). Keep in sync
// with forward(); tests/models/op_list_test.cpp checks it against the forward on fixtures.
std::unique_ptr<Model> kimi_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) {
    return std::make_unique<Kimi>(ckpt, ops, opts);
}

}  // namespace coli
