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
#include "models/deepseek_config.h"
#include "models/registry.h"
#include "nn/moe.h"
#include "nn/rows.h"
#include "nn/weights.h"

namespace coli {
namespace {

// transformers builds the q_a and kv_a RMSNorms with their class default, not config.rms_norm_eps.
constexpr float kMlaNormEps = 1e-6f;
constexpr float kIndexerNormEps = 1e-6f;  // the DSA indexer's key LayerNorm

struct DeepseekLayerWeights {
    Weight input_norm, q_a, q_a_norm, q_b;  // q_a / q_a_norm empty without q LoRA (q_b is then q_proj)
    Weight kv_a, kv_a_norm, kv_b, o_proj;   // attention
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
};

class DeepseekV3 final : public Model {
public:
    DeepseekV3(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts)
        : cfg_(ckpt.config()), ops_(ops), max_ctx_(opts.max_ctx > 0 ? opts.max_ctx : cfg_.max_ctx) {
        WeightLoader load(ckpt, ops, opts.dense_bits);
        embed_ = load.table("model.embed_tokens.weight");
        for (int l = 0; l < cfg_.n_layers; ++l) layers_.push_back(layer_load(load, l));
        final_norm_ = load.vector("model.norm.weight");
        lm_head_ = load.matrix("lm_head.weight");
        load.finish();

        ExpertLayout layout{cfg_.n_layers, cfg_.n_experts, cfg_.top_k, [this, &ckpt](int layer, int e) {
                                if (!cfg_.is_moe(layer)) return std::vector<std::string>{};
                                return swiglu_expert_tensors(
                                    ckpt, fmt::format("model.layers.{}.mlp.experts.{}.", layer, e));
                            }};
        store_ = std::make_unique<ExpertStore>(ckpt, layout, opts.store);
        summarize(ckpt, load);
    }

    const ModelSummary& summary() const override { return summary_; }
    ExpertStore& store() override { return *store_; }
    Ops& ops() override { return ops_; }

    std::unique_ptr<ModelState> state_new() override {
        auto s = std::make_unique<DeepseekState>();
        for (int l = 0; l < cfg_.n_layers; ++l) {
            s->kv.push_back({ops_.tensor(max_ctx_, cfg_.kv_lora), ops_.tensor(max_ctx_, cfg_.rope_dim)});
            s->index.push_back(cfg_.dsa() && cfg_.index_full[l] ? ops_.tensor(max_ctx_, cfg_.index_dim)
                                                                : Tensor{});
        }
        return s;
    }

    Tensor forward(std::span<const int32_t> ids, ModelState& state, bool all_logits) override {
        auto& s = static_cast<DeepseekState&>(state);
        const auto n = static_cast<int64_t>(ids.size());
        check(s.n_past + n <= max_ctx_, "context full: {} + {} tokens exceed the context of {}", s.n_past, n,
              max_ctx_);
        Tensor h = ops_.embedding(embed_, ids);  // [n, d_model]
        Tensor selection;                        // DSA: the last full layer's top-k key positions [n, top_k]
        for (int l = 0; l < cfg_.n_layers; ++l) h = layer_forward(l, h, s, selection);
        if (!all_logits) h = row_last(ops_, h);
        Tensor x = ops_.rms_norm(h, final_norm_, cfg_.rms_eps);
        s.n_past += n;
        return ops_.matmul(lm_head_, x);  // [n or 1, vocab]
    }

private:
    DeepseekLayerWeights layer_load(WeightLoader& load, int l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        DeepseekLayerWeights w;
        w.input_norm = load.vector(p + "input_layernorm.weight");
        if (cfg_.q_lora > 0) {
            w.q_a = load.matrix(p + "self_attn.q_a_proj.weight");
            w.q_a_norm = load.vector(p + "self_attn.q_a_layernorm.weight");
            w.q_b = load.matrix(p + "self_attn.q_b_proj.weight");
        } else {
            w.q_b = load.matrix(p + "self_attn.q_proj.weight");
        }
        if (cfg_.dsa() && cfg_.index_full[l]) {
            const std::string ix = p + "self_attn.indexer.";
            w.index_q = load.matrix(ix + "wq_b.weight");
            w.index_k = load.matrix(ix + "wk.weight");
            w.index_k_norm = load.vector(ix + "k_norm.weight");
            w.index_k_bias = load.vector(ix + "k_norm.bias");
            w.index_weights = load.matrix(ix + "weights_proj.weight");
        }
        w.kv_a = load.matrix(p + "self_attn.kv_a_proj_with_mqa.weight");
        w.kv_a_norm = load.vector(p + "self_attn.kv_a_layernorm.weight");
        w.kv_b = load.matrix(p + "self_attn.kv_b_proj.weight");
        w.o_proj = load.matrix(p + "self_attn.o_proj.weight");
        w.post_norm = load.vector(p + "post_attention_layernorm.weight");
        const std::string mlp = cfg_.is_moe(l) ? p + "mlp.shared_experts." : p + "mlp.";
        if (cfg_.is_moe(l)) {
            w.router = load.matrix(p + "mlp.gate.weight");
            w.router_bias = load.vector(p + "mlp.gate.e_score_correction_bias");
        }
        if (!cfg_.is_moe(l) || cfg_.n_shared > 0) {
            // Named for device expert tiers by an id past the routed experts.
            w.mlp = {cfg_.n_experts, load.matrix(mlp + "gate_proj.weight"),
                     load.matrix(mlp + "up_proj.weight"), load.matrix(mlp + "down_proj.weight"), l};
            w.has_mlp = true;
        }
        return w;
    }

    // One decoder layer. h: [n, d_model] at positions s.n_past ... selection: DSA's choice of keys, made by
    // full-indexer layers and reused by shared ones.
    Tensor layer_forward(int l, const Tensor& h, DeepseekState& s, Tensor& selection) {
        const DeepseekLayerWeights& w = layers_[l];
        const int64_t n = h.rows();
        Tensor x = ops_.rms_norm(h, w.input_norm, cfg_.rms_eps);  // [n, d]
        Tensor c_q = cfg_.q_lora > 0 ? ops_.rms_norm(ops_.matmul(w.q_a, x), w.q_a_norm, kMlaNormEps)
                                     : x;    // [n, q_lora]
        Tensor q = ops_.matmul(w.q_b, c_q);  // [n, H (dn + dr)]
        if (cfg_.dsa() && cfg_.index_full[l]) selection = index_select(w, x, c_q, s.index[l], s.n_past);
        Tensor kv = ops_.matmul(w.kv_a, x);  // [n, kv_lora + dr]
        Tensor latent =
            ops_.rms_norm(ops_.slice_cols(kv, 0, cfg_.kv_lora), w.kv_a_norm, kMlaNormEps);  // [n, kv_lora]
        Tensor k_pe =
            ops_.slice_cols(kv, cfg_.kv_lora, cfg_.rope_dim);  // [n, dr]: one rope key for all heads
        ops_.rope(q, cfg_.rope_q, s.n_past);
        ops_.rope(k_pe, cfg_.rope_k, s.n_past);
        const MlaShape shape{cfg_.n_heads, cfg_.nope_dim, cfg_.rope_dim,
                             cfg_.v_dim,   cfg_.kv_lora,  cfg_.softmax_scale};
        Tensor a = ops_.mla_attention(q, latent, k_pe, w.kv_b, s.kv[l], shape, s.n_past,
                                      cfg_.dsa() ? &selection : nullptr);  // [n, H dv]
        Tensor h1 = ops_.add(h, ops_.matmul(w.o_proj, a));

        Tensor x2 = ops_.rms_norm(h1, w.post_norm, cfg_.rms_eps);
        Tensor y = ops_.tensor(n, cfg_.d_model);
        if (cfg_.is_moe(l)) {
            const SigmoidRouting rp{cfg_.top_k, cfg_.n_group, cfg_.topk_group, cfg_.norm_topk_prob,
                                    cfg_.routed_scaling};
            const Routing r = ops_.route_sigmoid_topk(ops_.matmul(w.router, x2), w.router_bias, rp);
            const auto prefetch_next = [&] {
                for (int next = l + 1; next < cfg_.n_layers; ++next)
                    if (cfg_.is_moe(next))
                        return moe_prefetch(ops_, *store_, next, layers_[next].router, x2, cfg_.top_k);
            };
            y = moe_routed(ops_, *store_, l, x2, r, swiglu_expert_weights, prefetch_next);
        }
        if (w.has_mlp) ops_.moe_experts({&w.mlp, 1}, every_token(n, w.mlp.id), x2, y);
        return ops_.add(h1, y);
    }

    // DSA lightning indexer: top index_topk cached positions per query.                  returns [n, top_k]
    Tensor index_select(const DeepseekLayerWeights& w, const Tensor& x, const Tensor& c_q, Tensor& cache,
                        int64_t pos0) {
        Tensor q = ops_.matmul(w.index_q, c_q);  // [n, heads * dim], rope dims first in each head
        Tensor k = ops_.layer_norm(ops_.matmul(w.index_k, x), w.index_k_norm, w.index_k_bias,
                                   kIndexerNormEps);  // [n, dim]
        ops_.rope(q, cfg_.rope_index, pos0);
        ops_.rope(k, cfg_.rope_index, pos0);
        Tensor weights = ops_.matmul(w.index_weights, x);  // [n, heads]
        const DsaShape shape{cfg_.index_heads, cfg_.index_dim, cfg_.index_topk,
                             1.0f / std::sqrt(static_cast<float>(cfg_.index_dim)),
                             1.0f / std::sqrt(static_cast<float>(cfg_.index_heads))};
        return ops_.dsa_select(q, weights, k, cache, shape, pos0);
    }

    // Routing that sends every token to one expert with weight 1: dense MLPs and shared experts.
    static Routing every_token(int64_t n, int32_t id) {
        return {n, 1, std::vector<int32_t>(n, id), std::vector<float>(n, 1.0f)};
    }

    void summarize(const Checkpoint& ckpt, const WeightLoader& load) {
        summary_.family = cfg_.family;
        summary_.architecture = fmt::format(
            "{} layers ({} dense), d_model {}, {} heads (MLA: q_lora {}, kv_lora {}, nope {}, rope {}, v "
            "{}), "
            "{} experts top-{} in {} groups keep {} (d_ff {}) + {} shared, vocab {}{}",
            cfg_.n_layers, cfg_.n_dense, cfg_.d_model, cfg_.n_heads, cfg_.q_lora, cfg_.kv_lora, cfg_.nope_dim,
            cfg_.rope_dim, cfg_.v_dim, cfg_.n_experts, cfg_.top_k, cfg_.n_group, cfg_.topk_group,
            cfg_.d_expert, cfg_.n_shared, cfg_.vocab,
            cfg_.dsa() ? fmt::format(", DSA top-{} ({} indexer heads of {})", cfg_.index_topk,
                                     cfg_.index_heads, cfg_.index_dim)
                       : "");
        summary_.dense_bytes = load.bytes_stored();
        summary_.dense_held_bytes = load.bytes_held();
        summary_.expert_bytes = store_->total_expert_bytes();
        int moe_layers = 0;
        for (int l = 0; l < cfg_.n_layers; ++l) moe_layers += cfg_.is_moe(l);
        summary_.expert_count = uint64_t(moe_layers) * cfg_.n_experts;
        const TensorInfo& o0 = ckpt.get("model.layers.0.self_attn.o_proj.weight");
        int first_moe = 0;
        while (first_moe < cfg_.n_layers && !cfg_.is_moe(first_moe)) ++first_moe;
        const std::string experts =
            first_moe < cfg_.n_layers
                ? std::string(dtype_name(
                      ckpt.get(fmt::format("model.layers.{}.mlp.experts.0.gate_proj.weight", first_moe))
                          .dtype))
                : "none";
        summary_.formats = weight_formats_summary(load, o0.dtype, experts);
        int index_layers = 0;  // layers with their own indexer keep its keys too
        for (int l = 0; l < cfg_.n_layers; ++l) index_layers += cfg_.dsa() && cfg_.index_full[l];
        summary_.kv_bytes_per_token = (uint64_t(cfg_.n_layers) * (cfg_.kv_lora + cfg_.rope_dim) +
                                       uint64_t(index_layers) * cfg_.index_dim) *
                                      sizeof(float);
        summary_.vocab = cfg_.vocab;
        summary_.max_ctx = max_ctx_;
    }

    DeepseekConfig cfg_;
    Ops& ops_;
    int64_t max_ctx_;
    Weight embed_, final_norm_, lm_head_;
    std::vector<DeepseekLayerWeights> layers_;
    std::unique_ptr<ExpertStore> store_;
    ModelSummary summary_;
};

// Sizes the op declarations use for one MLA family.
struct MlaFamilySize {
    int64_t d_model, d_expert, vocab, experts, ctx, heads, kv_lora, rope, nope;
    int64_t index_heads, index_dim;  // 0: no DSA
};

// The ops DeepseekV3::forward calls at a family's size. Keep in sync with layer_forward().
std::vector<OpUse> mla_family_ops(const MlaFamilySize& z) {
    const std::vector<Format> stored = {Format::f32, Format::bf16, Format::f16, Format::fp8_e4m3_block};
    std::vector<Format> dense = stored;
    dense.insert(dense.end(), {Format::int8_row, Format::int4_g64});  // --dense-bits 8 | 4
    std::vector<OpUse> ops = {
        {OpKind::embedding, stored, z.vocab, z.d_model, "token embedding"},
        {OpKind::rms_norm, {Format::f32}, 1, z.d_model, "input, post-attention, q_a, kv_a and final norms"},
        {OpKind::matmul, dense, z.d_model, z.d_model, "q/kv LoRA, o projection, router, lm_head"},
        {OpKind::slice_cols, {Format::f32}, 1, z.kv_lora + z.rope, "latent and rope key from kv_a"},
        {OpKind::rope, {Format::f32}, 1, z.heads * (z.nope + z.rope), "rotary embedding of the rope dims"},
        {OpKind::mla_attention, dense, z.ctx, z.heads * (z.nope + z.rope),
         "absorbed MLA over the latent cache"},
        {OpKind::add, {Format::f32}, 1, z.d_model, "residuals"},
        {OpKind::route_sigmoid_topk, {Format::f32}, 1, z.experts, "sigmoid group-limited router"},
        {OpKind::moe_experts, dense, z.d_expert, z.d_model, "routed, shared and dense SwiGLU"},
    };
    if (z.index_heads > 0) {
        ops.push_back({OpKind::layer_norm, {Format::f32}, 1, z.index_dim, "DSA indexer key norm"});
        ops.push_back({OpKind::dsa_select,
                       {Format::f32},
                       z.ctx,
                       z.index_heads * z.index_dim,
                       "DSA lightning indexer top-k"});
    }
    return ops;
}

}  // namespace

// DeepSeek-V3: d_model 7168, 128 heads, kv_lora 512, rope 64, nope 128, 256 experts of 2048, vocab 129280.
std::vector<OpUse> deepseek_v3_ops() {
    return mla_family_ops({7168, 2048, 129280, 256, 163840, 128, 512, 64, 128, 0, 0});
}

// DeepSeek-V3.2: V3 plus a 64-head indexer of width 128.
std::vector<OpUse> deepseek_v32_ops() {
    return mla_family_ops({7168, 2048, 129280, 256, 163840, 128, 512, 64, 128, 64, 128});
}

// GLM-5: d_model 6144, 64 heads, nope 192, 256 experts of 2048, vocab 154880, a 32-head indexer of 128.
std::vector<OpUse> glm_moe_dsa_ops() {
    return mla_family_ops({6144, 2048, 154880, 256, 202752, 64, 512, 64, 192, 32, 128});
}

std::unique_ptr<Model> deepseek_v3_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts) {
    return std::make_unique<DeepseekV3>(ckpt, ops, opts);
}

}  // namespace coli
