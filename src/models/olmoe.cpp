// OLMoE (OlmoeForCausalLM), docs/models.md 1: pre-norm decoder, QK-norm over the full projection width,
// neox RoPE, softmax top-k router over SwiGLU experts, no shared expert, no biases.
#include <cmath>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "models/config.h"
#include "models/decoder.h"
#include "models/registry.h"
#include "nn/moe.h"

namespace coli {
namespace {

struct OlmoeConfig {
    int64_t vocab, d_model, d_ff;  // d_ff: intermediate size of one expert
    int n_layers, n_heads, n_kv_heads, head_dim;
    int n_experts, top_k;
    bool norm_topk_prob;
    float rms_eps, rope_theta;
    std::optional<float> clip_qkv;
    int64_t max_ctx;

    explicit OlmoeConfig(const nlohmann::json& c) {
        vocab = config_get<int64_t>(c, "vocab_size");
        d_model = config_get<int64_t>(c, "hidden_size");
        d_ff = config_get<int64_t>(c, "intermediate_size");
        n_layers = config_get<int>(c, "num_hidden_layers");
        n_heads = config_get<int>(c, "num_attention_heads");
        n_kv_heads = config_get_or<int>(c, "num_key_value_heads", n_heads);
        n_experts = config_get<int>(c, "num_experts");
        top_k = config_get<int>(c, "num_experts_per_tok");
        norm_topk_prob = config_get_or<bool>(c, "norm_topk_prob", false);
        rms_eps = static_cast<float>(config_get_or<double>(c, "rms_norm_eps", 1e-5));
        rope_theta = static_cast<float>(config_rope_theta(c, 10000.0));
        if (c.contains("clip_qkv") && !c["clip_qkv"].is_null())
            clip_qkv = static_cast<float>(config_get<double>(c, "clip_qkv"));
        max_ctx = config_get_or<int64_t>(c, "max_position_embeddings", 4096);
        check(vocab > 0 && d_model > 0 && d_ff > 0 && n_layers > 0, "config.json: sizes must be positive");
        check(n_heads > 0 && d_model % n_heads == 0,
              "config.json: hidden_size {} is not a multiple of {} heads", d_model, n_heads);
        check(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "config.json: {} heads over {} key/value heads",
              n_heads, n_kv_heads);
        head_dim = static_cast<int>(d_model / n_heads);
        check(top_k > 0 && top_k <= n_experts, "config.json: num_experts_per_tok {} of {} experts", top_k,
              n_experts);
        const std::string act = config_get_or<std::string>(c, "hidden_act", "silu");
        check(act == "silu", "config.json: hidden_act '{}' is not supported by olmoe (silu only)", act);
    }
    int64_t kv_width() const { return int64_t{n_kv_heads} * head_dim; }
};

struct OlmoeLayerWeights {
    Weight input_norm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;  // attention
    Weight post_norm, router;                                           // MoE (experts are in the store)
};

class OlmoeState final : public ModelState {
public:
    std::vector<KvCache> kv;  // one per layer

    std::vector<StateTensor> tensors() override {
        std::vector<StateTensor> t;
        for (KvCache& c : kv) t.insert(t.end(), {{&c.k, 1}, {&c.v, 1}});
        return t;
    }
};

class Olmoe final : public Decoder {
public:
    Olmoe(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) : Decoder(ops), cfg_(ckpt.config()) {
        const DecoderSpec spec{
            .family = "olmoe",
            .n_layers = cfg_.n_layers,
            .vocab = cfg_.vocab,
            .rms_eps = cfg_.rms_eps,
            .max_ctx = cfg_.max_ctx,
            .n_experts = cfg_.n_experts,
            .top_k = cfg_.top_k,
            .dense = ckpt.get("model.layers.0.self_attn.q_proj.weight").dtype,
            .experts =
                std::string(dtype_name(ckpt.get("model.layers.0.mlp.experts.0.gate_proj.weight").dtype)),
            .d_model = cfg_.d_model,
            .expert_ff = cfg_.d_ff,
            .expert_ff_key = "intermediate_size"};
        const auto load_layers = [this](WeightLoader& load) {
            for (int l = 0; l < cfg_.n_layers; ++l) layers_.push_back(layer_load(load, l));
        };
        const auto expert_tensors = [&ckpt](int layer, int e) {
            return swiglu_expert_tensors(ckpt, fmt::format("model.layers.{}.mlp.experts.{}.", layer, e));
        };
        load_weights(ckpt, opts, spec, load_layers, expert_tensors);
        summary_.architecture = fmt::format(
            "{} layers, d_model {}, {} heads ({} kv, head_dim {}), {} experts top-{} (d_ff {}), vocab {}",
            cfg_.n_layers, cfg_.d_model, cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim, cfg_.n_experts,
            cfg_.top_k, cfg_.d_ff, cfg_.vocab);
        summary_.expert_count = uint64_t(cfg_.n_layers) * cfg_.n_experts;
        summary_.kv_bytes_per_token = uint64_t(cfg_.n_layers) * 2 * cfg_.kv_width() * sizeof(float);
    }

    std::unique_ptr<ModelState> state_new() override {
        auto s = std::make_unique<OlmoeState>();
        for (int l = 0; l < cfg_.n_layers; ++l)
            s->kv.push_back(
                {ops_.tensor(max_ctx(), cfg_.kv_width()), ops_.tensor(max_ctx(), cfg_.kv_width())});
        return s;
    }

private:
    OlmoeLayerWeights layer_load(WeightLoader& load, int l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        const int64_t d = cfg_.d_model, q_width = int64_t{cfg_.n_heads} * cfg_.head_dim, kv = cfg_.kv_width();
        const std::string heads = "num_attention_heads and hidden_size";
        const std::string kv_heads = "num_key_value_heads, num_attention_heads and hidden_size";
        return {
            load.vector(p + "input_layernorm.weight", {{d}, "hidden_size"}),
            load.matrix(p + "self_attn.q_proj.weight", {{q_width, d}, heads}),
            load.matrix(p + "self_attn.k_proj.weight", {{kv, d}, kv_heads}),
            load.matrix(p + "self_attn.v_proj.weight", {{kv, d}, kv_heads}),
            load.matrix(p + "self_attn.o_proj.weight", {{d, q_width}, heads}),
            load.vector(p + "self_attn.q_norm.weight", {{q_width}, heads}),
            load.vector(p + "self_attn.k_norm.weight", {{kv}, kv_heads}),
            load.vector(p + "post_attention_layernorm.weight", {{d}, "hidden_size"}),
            load.matrix(p + "mlp.gate.weight", {{cfg_.n_experts, d}, "num_experts and hidden_size"}),
        };
    }

    Tensor layers_forward(Tensor h, std::span<const int32_t>, Batch batch,
                          std::span<ModelState* const> states) override {
        for (int l = 0; l < cfg_.n_layers; ++l) h = layer_forward(l, h, batch, states);
        return h;
    }

    // One decoder layer (docs/models.md 1).                 h: [n, d_model], each segment at its positions
    Tensor layer_forward(int l, const Tensor& h, Batch batch, std::span<ModelState* const> states) {
        const OlmoeLayerWeights& w = layers_[l];
        Tensor x = ops_.rms_norm(h, w.input_norm, cfg_.rms_eps);  // [n, d]
        Tensor q =
            ops_.rms_norm(ops_.matmul(w.q_proj, x), w.q_norm, cfg_.rms_eps);  // [n, H*hd], norm over H*hd
        Tensor k = ops_.rms_norm(ops_.matmul(w.k_proj, x), w.k_norm, cfg_.rms_eps);  // [n, Hkv*hd]
        Tensor v = ops_.matmul(w.v_proj, x);                                         // [n, Hkv*hd]
        if (cfg_.clip_qkv) {
            for (Tensor* t : {&q, &k, &v}) ops_.clamp(*t, -*cfg_.clip_qkv, *cfg_.clip_qkv);
        }
        const RopeParams rope{RopeStyle::neox, cfg_.head_dim, cfg_.head_dim, cfg_.rope_theta, 1.0f, 0, {}};
        const AttentionShape shape{cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                                   1.0f / std::sqrt(static_cast<float>(cfg_.head_dim))};
        // [n, H*hd]: each sequence's rows over its own cache
        Tensor a = per_segment(ops_, batch, {q, k, v}, [&](const Segment& g, std::span<const Tensor> t) {
            Tensor qs = t[0], ks = t[1];
            ops_.rope(qs, rope, g.pos0);
            ops_.rope(ks, rope, g.pos0);
            return ops_.attention(qs, ks, t[2], state_of<OlmoeState>(states, g.seq).kv[l], shape, g.pos0);
        });
        Tensor h1 = ops_.add(h, ops_.matmul(w.o_proj, a));  // [n, d]

        Tensor x2 = ops_.rms_norm(h1, w.post_norm, cfg_.rms_eps);  // [n, d]
        const auto prefetch_next = [&] {
            if (l + 1 < cfg_.n_layers) moe_prefetch(*store_, l + 1, [&] { return route(l + 1, x2); });
        };
        Tensor y = moe_routed(ops_, *store_, l, x2, route(l, x2), swiglu_expert_weights, prefetch_next);
        return ops_.add(h1, y);  // [n, d]
    }

    // Layer l's router: softmax over the experts, the top k.                                x: [n, d_model]
    Routing route(int l, const Tensor& x) {
        return ops_.route_softmax_topk(ops_.matmul(layers_[l].router, x), cfg_.top_k, cfg_.norm_topk_prob);
    }

    OlmoeConfig cfg_;
    std::vector<OlmoeLayerWeights> layers_;
};

}  // namespace

std::unique_ptr<Model> olmoe_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) {
    return std::make_unique<Olmoe>(ckpt, ops, opts);
}

}  // namespace coli
