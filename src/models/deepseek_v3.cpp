// DeepSeek-V3 (deepseek_v3, docs/models.md 2), DeepSeek-V3.2 (deepseek_v32, 3) and GLM-5.x
// (glm_moe_dsa, 4), one code: a pre-norm decoder with multi-head latent attention
// (q and kv LoRA, one rope key shared by all heads, YaRN), the first layers dense, then MoE layers with a
// sigmoid router (selection bias, group-limited choice, routed scaling) over SwiGLU experts plus shared
// experts. The cache keeps the compressed latent and the rope key: kv_lora + rope_dim floats per token.
// Weights as stored: bf16/f32, or block FP8 (F8_E4M3 + weight_scale_inv, read in place). V3.2 and GLM add
// DSA: a lightning indexer scores the cached positions per query and MLA attends to the top index_topk only;
// GLM-5.2's "shared" layers reuse the selection of the last "full" one (IndexShare).
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "models/decoder.h"
#include "models/deepseek_config.h"
#include "models/registry.h"
#include "nn/mla.h"
#include "nn/moe.h"

namespace coli {
namespace {

constexpr float kIndexerNormEps = 1e-6f;  // the DSA indexer's key LayerNorm

struct DeepseekLayerWeights {
    Weight input_norm;
    MlaWeights mla;
    Weight post_norm;
    Weight router, router_bias;  // MoE layers
    ExpertWeights mlp;           // the dense MLP (dense layers) or the shared experts (MoE layers)
    bool has_mlp = false;        // false: an MoE layer without shared experts
    Weight index_q, index_k, index_k_norm, index_k_bias, index_weights;  // DSA indexer (full layers)
};

class DeepseekState final : public ModelState {
public:
    std::vector<KvCache> kv;    // one per layer: latents and rope keys
    std::vector<Tensor> index;  // DSA: one per full-indexer layer (empty otherwise): indexer keys

    std::vector<StateTensor> tensors() override {
        std::vector<StateTensor> t;
        for (KvCache& c : kv) t.insert(t.end(), {{&c.k, 1}, {&c.v, 1}});
        for (Tensor& keys : index) t.push_back({&keys, 1});
        return t;
    }
};

class DeepseekV3 final : public Decoder {
public:
    DeepseekV3(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts)
        : Decoder(ops),
          cfg_(ckpt.config()),
          mla_{.shape = {cfg_.n_heads, cfg_.nope_dim, cfg_.rope_dim, cfg_.v_dim, cfg_.kv_lora,
                         cfg_.softmax_scale},
               .q_lora = cfg_.q_lora,
               .rope_q = cfg_.rope_q,
               .rope_k = cfg_.rope_k} {
        check(
            !opts.draft || cfg_.mtp_layers > 0,
            "{}: this checkpoint has no multi-token-prediction layer to draft with (num_nextn_predict_layers "
            "is 0)",
            cfg_.family);
        const auto load_layers = [this, &opts](WeightLoader& load) {
            for (int l = 0; l < cfg_.n_layers; ++l) layers_.push_back(layer_load(load, l));
            if (!opts.draft) return;  // the MTP layer's tensors stay unread
            layers_.push_back(layer_load(load, cfg_.n_layers));
            mtp_ = mtp_load(load, fmt::format("model.layers.{}.", cfg_.n_layers), cfg_.d_model);
        };
        const auto expert_tensors = [this, &ckpt](int layer, int e) {
            if (!cfg_.is_moe(layer)) return std::vector<std::string>{};
            return swiglu_expert_tensors(ckpt, fmt::format("model.layers.{}.mlp.experts.{}.", layer, e));
        };
        int first_moe = 0;
        while (first_moe < cfg_.n_layers && !cfg_.is_moe(first_moe)) ++first_moe;
        const std::string experts =
            first_moe < cfg_.n_layers
                ? std::string(dtype_name(
                      ckpt.get(fmt::format("model.layers.{}.mlp.experts.0.gate_proj.weight", first_moe))
                          .dtype))
                : "none";
        const DecoderSpec spec{.family = cfg_.family,
                               .n_layers = cfg_.n_layers,
                               .vocab = cfg_.vocab,
                               .rms_eps = cfg_.rms_eps,
                               .max_ctx = cfg_.max_ctx,
                               .n_experts = cfg_.n_experts,
                               .top_k = cfg_.top_k,
                               .dense = ckpt.get("model.layers.0.self_attn.o_proj.weight").dtype,
                               .experts = experts,
                               .d_model = cfg_.d_model,
                               .expert_ff = cfg_.d_expert,
                               .expert_ff_key = "moe_intermediate_size",
                               .draft_layers = opts.draft ? 1 : 0};
        load_weights(ckpt, opts, spec, load_layers, expert_tensors);
        summarize();
    }

    std::unique_ptr<ModelState> state_new() override {
        auto s = std::make_unique<DeepseekState>();
        for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {  // the MTP layer's too, where loaded
            s->kv.push_back(mla_cache_new(ops_, mla_, max_ctx()));
            s->index.push_back(cfg_.dsa() && cfg_.index_full[l] ? ops_.tensor(max_ctx(), cfg_.index_dim)
                                                                : Tensor{});
        }
        return s;
    }

private:
    DeepseekLayerWeights layer_load(WeightLoader& load, int l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        const int64_t d = cfg_.d_model;
        DeepseekLayerWeights w;
        w.input_norm = load.vector(p + "input_layernorm.weight", {{d}, "hidden_size"});
        w.mla = mla_load(load, p + "self_attn.", mla_, d);
        if (cfg_.dsa() && cfg_.index_full[l]) {
            const std::string ix = p + "self_attn.indexer.";
            const int64_t width = int64_t{cfg_.index_heads} * cfg_.index_dim;
            w.index_q = load.matrix(ix + "wq_b.weight",
                                    {{width, cfg_.q_lora}, "index_n_heads, index_head_dim and q_lora_rank"});
            w.index_k =
                load.matrix(ix + "wk.weight", {{cfg_.index_dim, d}, "index_head_dim and hidden_size"});
            w.index_k_norm = load.vector(ix + "k_norm.weight", {{cfg_.index_dim}, "index_head_dim"});
            w.index_k_bias = load.vector(ix + "k_norm.bias", {{cfg_.index_dim}, "index_head_dim"});
            w.index_weights = load.matrix(ix + "weights_proj.weight",
                                          {{cfg_.index_heads, d}, "index_n_heads and hidden_size"});
        }
        w.post_norm = load.vector(p + "post_attention_layernorm.weight", {{d}, "hidden_size"});
        if (cfg_.is_moe(l)) {
            w.router =
                load.matrix(p + "mlp.gate.weight", {{cfg_.n_experts, d}, "n_routed_experts and hidden_size"});
            w.router_bias =
                load.vector(p + "mlp.gate.e_score_correction_bias", {{cfg_.n_experts}, "n_routed_experts"});
        }
        if (!cfg_.is_moe(l) || cfg_.n_shared > 0) {
            const MlpWidths widths = cfg_.is_moe(l) ? MlpWidths{d, cfg_.n_shared * cfg_.d_expert,
                                                                "n_shared_experts, moe_intermediate_size"}
                                                    : MlpWidths{d, cfg_.d_ff, "intermediate_size"};
            w.mlp = mlp_load(load, cfg_.is_moe(l) ? p + "mlp.shared_experts." : p + "mlp.", widths,
                             cfg_.n_experts, l);
            w.has_mlp = true;
        }
        return w;
    }

    Tensor layers_forward(Tensor h, std::span<const int32_t>, Batch batch,
                          std::span<ModelState* const> states) override {
        Tensor selection;  // DSA: the last full layer's top-k key positions [n, top_k]
        for (int l = 0; l < cfg_.n_layers; ++l) h = layer_forward(l, h, batch, states, selection);
        return h;
    }

    // The MTP layer: one more decoder layer, after the model's (docs/models.md 2.5).
    Tensor draft_layer_forward(Tensor h, Batch batch, std::span<ModelState* const> states) override {
        Tensor selection;
        return layer_forward(cfg_.n_layers, h, batch, states, selection);
    }

    // One decoder layer (docs/models.md 2, 3). h: [n, d_model], each segment at its positions. selection:
    // DSA's choice of keys, made by full-indexer layers and reused by shared ones.
    Tensor layer_forward(int l, const Tensor& h, Batch batch, std::span<ModelState* const> states,
                         Tensor& selection) {
        const DeepseekLayerWeights& w = layers_[l];
        Tensor x = ops_.rms_norm(h, w.input_norm, cfg_.rms_eps);  // [n, d]
        Tensor c_q = mla_query_latent(ops_, mla_, w.mla, x);      // [n, q_lora]
        if (cfg_.dsa() && cfg_.index_full[l]) selection = index_select(l, x, c_q, batch, states);
        const auto cache = [&](int seq) -> KvCache& { return state_of<DeepseekState>(states, seq).kv[l]; };
        Tensor a = mla_forward(ops_, mla_, w.mla, x, c_q, batch, cache,
                               cfg_.dsa() ? &selection : nullptr);  // [n, d]
        Tensor h1 = ops_.add(h, a);                                 // [n, d]

        Tensor x2 = ops_.rms_norm(h1, w.post_norm, cfg_.rms_eps);                         // [n, d]
        Tensor y = cfg_.is_moe(l) ? routed(l, x2) : ops_.tensor(h.rows(), cfg_.d_model);  // [n, d]
        if (w.has_mlp) mlp_add(ops_, w.mlp, x2, y);
        return ops_.add(h1, y);
    }

    // The routed experts of MoE layer l (docs/models.md 2.4).           x: [n, d_model] -> [n, d_model]
    Tensor routed(int l, const Tensor& x) {
        const auto prefetch_next = [&] {
            for (int next = l + 1; next < cfg_.n_layers; ++next)
                if (cfg_.is_moe(next)) return moe_prefetch(*store_, next, [&] { return route(next, x); });
        };
        return moe_routed(ops_, *store_, l, x, route(l, x), swiglu_expert_weights, prefetch_next);
    }

    // Layer l's router: sigmoid scores with a selection bias, group-limited top-k.         x: [n, d_model]
    Routing route(int l, const Tensor& x) {
        const SigmoidRouting rp{cfg_.top_k, cfg_.n_group, cfg_.topk_group, cfg_.norm_topk_prob,
                                cfg_.routed_scaling};
        return ops_.route_sigmoid_topk(ops_.matmul(layers_[l].router, x), layers_[l].router_bias, rp);
    }

    // DSA lightning indexer (docs/models.md 3): the top index_topk cached positions per query, each
    // segment over its own indexer keys.                       x: [n, d_model]; returns [n, top_k]
    Tensor index_select(int l, const Tensor& x, const Tensor& c_q, Batch batch,
                        std::span<ModelState* const> states) {
        const DeepseekLayerWeights& w = layers_[l];
        Tensor q = ops_.matmul(w.index_q, c_q);  // [n, heads * dim], rope dims first in each head
        Tensor k = ops_.layer_norm(ops_.matmul(w.index_k, x), w.index_k_norm, w.index_k_bias,
                                   kIndexerNormEps);       // [n, dim]
        Tensor weights = ops_.matmul(w.index_weights, x);  // [n, heads]
        const DsaShape shape{cfg_.index_heads, cfg_.index_dim, cfg_.index_topk,
                             1.0f / std::sqrt(static_cast<float>(cfg_.index_dim)),
                             1.0f / std::sqrt(static_cast<float>(cfg_.index_heads))};
        return per_segment(ops_, batch, {q, weights, k}, [&](const Segment& g, std::span<const Tensor> t) {
            Tensor qs = t[0], ks = t[2];
            ops_.rope(qs, cfg_.rope_index, g.pos0);
            ops_.rope(ks, cfg_.rope_index, g.pos0);
            return ops_.dsa_select(qs, t[1], ks, state_of<DeepseekState>(states, g.seq).index[l], shape,
                                   g.pos0);
        });
    }

    // The summary's family fields (the skeleton fills the rest).
    void summarize() {
        summary_.architecture = fmt::format(
            "{} layers ({} dense), d_model {}, {} heads (MLA: q_lora {}, kv_lora {}, nope {}, rope {}, v "
            "{}), "
            "{} experts top-{} in {} groups keep {} (d_ff {}) + {} shared, vocab {}{}{}",
            cfg_.n_layers, cfg_.n_dense, cfg_.d_model, cfg_.n_heads, cfg_.q_lora, cfg_.kv_lora, cfg_.nope_dim,
            cfg_.rope_dim, cfg_.v_dim, cfg_.n_experts, cfg_.top_k, cfg_.n_group, cfg_.topk_group,
            cfg_.d_expert, cfg_.n_shared, cfg_.vocab,
            cfg_.dsa() ? fmt::format(", DSA top-{} ({} indexer heads of {})", cfg_.index_topk,
                                     cfg_.index_heads, cfg_.index_dim)
                       : "",
            mtp_ ? ", + MTP layer (drafts)" : "");
        int moe_layers = 0, index_layers = 0;  // layers with their own indexer keep its keys too
        const int layers = static_cast<int>(layers_.size());  // the MTP layer's too, where loaded
        for (int l = 0; l < layers; ++l) {
            moe_layers += cfg_.is_moe(l);
            index_layers += cfg_.dsa() && cfg_.index_full[l];
        }
        summary_.expert_count = uint64_t(moe_layers) * cfg_.n_experts;
        summary_.kv_bytes_per_token =
            (uint64_t(layers) * mla_.cache_width() + uint64_t(index_layers) * cfg_.index_dim) * sizeof(float);
    }

    DeepseekConfig cfg_;
    Mla mla_;
    std::vector<DeepseekLayerWeights> layers_;
};

}  // namespace

std::unique_ptr<Model> deepseek_v3_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) {
    return std::make_unique<DeepseekV3>(ckpt, ops, opts);
}

}  // namespace coli
