#include "models/deepseek_config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/config.h"

namespace coli {

DeepseekConfig::DeepseekConfig(const nlohmann::json& c) {
    vocab = config_get<int64_t>(c, "vocab_size");
    d_model = config_get<int64_t>(c, "hidden_size");
    d_ff = config_get<int64_t>(c, "intermediate_size");
    d_expert = config_get<int64_t>(c, "moe_intermediate_size");
    n_layers = config_get<int>(c, "num_hidden_layers");
    n_heads = config_get<int>(c, "num_attention_heads");
    n_dense = config_get_or<int>(c, "first_k_dense_replace", 0);
    const int moe_every = config_get_or<int>(c, "moe_layer_freq", 1);
    q_lora = config_get_or<int>(c, "q_lora_rank", 0);
    kv_lora = config_get<int>(c, "kv_lora_rank");
    nope_dim = config_get<int>(c, "qk_nope_head_dim");
    rope_dim = config_get<int>(c, "qk_rope_head_dim");
    v_dim = config_get<int>(c, "v_head_dim");
    n_experts = config_get<int>(c, "n_routed_experts");
    top_k = config_get<int>(c, "num_experts_per_tok");
    n_group = config_get_or<int>(c, "n_group", 1);
    topk_group = config_get_or<int>(c, "topk_group", 1);
    n_shared = config_get_or<int>(c, "n_shared_experts", 0);
    norm_topk_prob = config_get_or<bool>(c, "norm_topk_prob", true);
    routed_scaling = static_cast<float>(config_get_or<double>(c, "routed_scaling_factor", 1.0));
    rms_eps = static_cast<float>(config_get_or<double>(c, "rms_norm_eps", 1e-6));
    max_ctx = config_get_or<int64_t>(c, "max_position_embeddings", 4096);
    check(vocab > 0 && d_model > 0 && d_ff > 0 && d_expert > 0 && n_layers > 0 && n_heads > 0,
          "config.json: sizes must be positive");
    check(kv_lora > 0 && nope_dim > 0 && rope_dim > 0 && rope_dim % 2 == 0 && v_dim > 0 && q_lora >= 0,
          "config.json: bad MLA sizes (kv_lora_rank {}, qk_nope_head_dim {}, qk_rope_head_dim {}, "
          "v_head_dim {})",
          kv_lora, nope_dim, rope_dim, v_dim);
    check(moe_every > 0 && n_experts > 0 && top_k > 0 && n_group > 0 && n_experts % n_group == 0 &&
              topk_group > 0 && topk_group <= n_group && top_k <= n_experts / n_group * topk_group,
          "config.json: {} experts in {} groups (keep {}) cannot route top-{}", n_experts, n_group,
          topk_group, top_k);
    const std::string act = config_get_or<std::string>(c, "hidden_act", "silu");
    check(act == "silu", "config.json: hidden_act '{}' is not supported by deepseek_v3 (silu only)", act);
    const std::string scoring = config_get_or<std::string>(c, "scoring_func", "sigmoid");
    check(scoring == "sigmoid", "config.json: scoring_func '{}' is not supported (sigmoid only)", scoring);
    family = config_get_or<std::string>(c, "model_type", "deepseek_v3");
    rope_from(c);
    moe_layer.resize(n_layers);
    const bool typed = c.contains("mlp_layer_types") && c["mlp_layer_types"].is_array();
    for (int l = 0; l < n_layers; ++l)
        moe_layer[l] = typed ? config_list_item(c, "mlp_layer_types", l) == "sparse"
                             : l >= n_dense && l % moe_every == 0;
    index_from(c);
    // The MTP layers after the decoder's (docs/models.md 2.5): MoE layers, with their own indexer under DSA.
    mtp_layers = std::max(config_get_or<int>(c, "num_nextn_predict_layers", 0), 0);
    moe_layer.resize(n_layers + mtp_layers, true);
    if (dsa()) index_full.resize(n_layers + mtp_layers, true);
}

// DSA (docs/models.md 3, 4): present when index_topk is set; the indexer shares the model's RoPE angles,
// rotating its first rope dims half-split (V3.2) or interleaved (GLM, or indexer_rope_interleave).
void DeepseekConfig::index_from(const nlohmann::json& c) {
    index_topk = config_get_or<int>(c, "index_topk", 0);
    if (index_topk <= 0) return;
    index_heads = config_get<int>(c, "index_n_heads");
    index_dim = config_get<int>(c, "index_head_dim");
    check(q_lora > 0, "config.json: DSA needs q_lora_rank (the indexer reads the q latent)");
    check(index_heads > 0 && index_dim > rope_dim, "config.json: bad indexer sizes ({} heads of {})",
          index_heads, index_dim);
    const bool interleave = config_get_or<bool>(c, "indexer_rope_interleave", family == "glm_moe_dsa");
    rope_index = rope_q;
    rope_index.style = interleave ? RopeStyle::interleaved : RopeStyle::neox;
    rope_index.head_dim = index_dim;
    rope_index.rotary_offset = 0;
    index_full.assign(n_layers, true);
    if (c.contains("indexer_types") && c["indexer_types"].is_array()) {
        for (int l = 0; l < n_layers; ++l) {
            const std::string t = config_list_item(c, "indexer_types", l);
            check(t == "full" || t == "shared", "config.json: indexer_types[{}] is '{}' (full or shared)", l,
                  t);
            index_full[l] = t == "full";
        }
    } else if (c.contains("index_topk_pattern") && c["index_topk_pattern"].is_string()) {
        const std::string pattern = c["index_topk_pattern"].get<std::string>();
        check(pattern.size() == static_cast<size_t>(n_layers),
              "config.json: index_topk_pattern has {} of {} layers", pattern.size(), n_layers);
        for (int l = 0; l < n_layers; ++l) index_full[l] = pattern[l] == 'F';
    } else if (family == "glm_moe_dsa") {  // GLM-5.2's schedule from frequency and offset
        const int freq = std::max(config_get_or<int>(c, "index_topk_freq", 1), 1);
        const int offset = config_get_or<int>(c, "index_skip_topk_offset", 2);
        for (int l = 0; l < n_layers; ++l) index_full[l] = std::max(l - offset + 1, 0) % freq == 0;
    }
    check(index_full[0],
          "config.json: layer 0 must have its own indexer (shared layers reuse an earlier one)");
}

// RoPE and softmax scale from `rope_parameters` (transformers v5) or `rope_theta` + `rope_scaling` (hub).
void DeepseekConfig::rope_from(const nlohmann::json& c) {
    const bool v5 = c.contains("rope_parameters") && c["rope_parameters"].is_object();
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json& rp =
        v5 ? c["rope_parameters"]
           : (c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"] : none);
    const std::string type =
        config_get_or<std::string>(rp, "rope_type", config_get_or<std::string>(rp, "type", "default"));
    const auto theta = static_cast<float>(config_rope_theta(c, 10000.0));
    const RopeStyle style =
        config_get_or<bool>(c, "rope_interleave", true) ? RopeStyle::interleaved : RopeStyle::neox;
    RopeYarn yarn;
    float attention_factor = 1.0f;
    softmax_scale = 1.0f / std::sqrt(static_cast<float>(nope_dim + rope_dim));
    if (type == "yarn") {
        const double original = config_get<double>(rp, "original_max_position_embeddings");
        const double factor = config_get_or<double>(rp, "factor", static_cast<double>(max_ctx) / original);
        const double mscale = config_get_or<double>(rp, "mscale", 0.0);
        const double mscale_all = config_get_or<double>(rp, "mscale_all_dim", 0.0);
        yarn = {static_cast<float>(factor), static_cast<float>(original),
                static_cast<float>(config_get_or<double>(rp, "beta_fast", 32.0)),
                static_cast<float>(config_get_or<double>(rp, "beta_slow", 1.0))};
        attention_factor = static_cast<float>(config_get_or<double>(
            rp, "attention_factor",
            mscale != 0 && mscale_all != 0 ? yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all)
                                           : yarn_mscale(factor, 1.0)));
        if (mscale_all != 0) {
            const double m = yarn_mscale(factor, mscale_all);
            softmax_scale = static_cast<float>(softmax_scale * m * m);
        }
    } else {
        check(type == "default",
              "config.json: rope type '{}' is not supported by deepseek_v3 (default, yarn)", type);
    }
    rope_q = {style, nope_dim + rope_dim, rope_dim, theta, attention_factor, nope_dim, yarn};
    rope_k = {style, rope_dim, rope_dim, theta, attention_factor, 0, yarn};
}

}  // namespace coli
