#include "models/kimi_config.h"

#include <algorithm>

#include "core/error.h"
#include "models/config.h"

namespace coli {
namespace {

// The layer lists of linear_attn_config are 1-indexed (docs/models.md 5): the 0-indexed layers they name.
std::vector<int> layer_list(const nlohmann::json& lin, const char* key, int n_layers) {
    check(lin.contains(key) && lin[key].is_array(), "config.json: linear_attn_config has no list '{}'", key);
    std::vector<int> layers;
    for (const auto& v : lin[key]) {
        check(v.is_number_integer() && v.get<int>() >= 1 && v.get<int>() <= n_layers,
              "config.json: linear_attn_config.{} holds {}, not a layer in 1..{}", key, v.dump(), n_layers);
        layers.push_back(v.get<int>() - 1);
    }
    return layers;
}

}  // namespace

KimiConfig::KimiConfig(const nlohmann::json& root) {
    family = config_get<std::string>(root, "model_type");
    const bool k3 = family == "kimi_k3";
    check(!k3 || (root.contains("text_config") && root["text_config"].is_object()),
          "config.json: kimi_k3 keeps the text model's keys in text_config, which is missing");
    const nlohmann::json& c = k3 ? root["text_config"] : root;
    prefix = k3 ? "language_model." : "";
    vocab = config_get<int64_t>(c, "vocab_size");
    d_model = config_get<int64_t>(c, "hidden_size");
    d_ff = config_get<int64_t>(c, "intermediate_size");
    d_expert = config_get<int64_t>(c, "moe_intermediate_size");
    n_layers = config_get<int>(c, "num_hidden_layers");
    rms_eps = static_cast<float>(config_get_or<double>(c, "rms_norm_eps", 1e-5));
    max_ctx = config_get_or<int64_t>(c, "max_position_embeddings",
                                     config_get_or<int64_t>(c, "model_max_length", 4096));
    check(vocab > 0 && d_model > 0 && d_ff > 0 && d_expert > 0 && n_layers > 0,
          "config.json: sizes must be positive");

    n_heads = config_get<int>(c, "num_attention_heads");
    q_lora = config_get_or<int>(c, "q_lora_rank", 0);
    kv_lora = config_get<int>(c, "kv_lora_rank");
    nope_dim = config_get<int>(c, "qk_nope_head_dim");
    rope_dim = config_get<int>(c, "qk_rope_head_dim");
    v_dim = config_get<int>(c, "v_head_dim");
    check(config_get_or<bool>(c, "mla_use_nope", true),
          "config.json: mla_use_nope false (rotary MLA) is not supported by the Kimi families");
    mla_output_gate = config_get_or<bool>(c, "mla_use_output_gate", false);
    check(n_heads > 0 && kv_lora > 0 && nope_dim > 0 && rope_dim > 0 && v_dim > 0 && q_lora >= 0,
          "config.json: bad MLA sizes");

    check(c.contains("linear_attn_config") && c["linear_attn_config"].is_object(),
          "config.json: linear_attn_config is missing");
    const nlohmann::json& lin = c["linear_attn_config"];
    kda_heads = config_get<int>(lin, "num_heads");
    kda_dim = config_get<int>(lin, "head_dim");
    conv_kernel = config_get_or<int>(lin, "short_conv_kernel_size", 4);
    gate_lower_bound = static_cast<float>(config_get_or<double>(lin, "gate_lower_bound", 0.0));
    full_rank_gate = config_get_or<bool>(lin, "use_full_rank_gate", false);
    check(kda_heads > 0 && kda_dim > 0 && conv_kernel >= 2 && gate_lower_bound <= 0,
          "config.json: bad linear_attn_config ({} heads of {}, kernel {}, gate bound {})", kda_heads,
          kda_dim, conv_kernel, gate_lower_bound);
    mla_layer.assign(n_layers, false);
    const std::vector<int> full = layer_list(lin, "full_attn_layers", n_layers);
    const std::vector<int> kda = layer_list(lin, "kda_layers", n_layers);
    for (int l : full) mla_layer[l] = true;
    for (int l : kda) check(!mla_layer[l], "config.json: layer {} is listed as both KDA and MLA", l + 1);
    check(full.size() + kda.size() == static_cast<size_t>(n_layers),
          "config.json: linear_attn_config lists {} KDA and {} MLA layers for {} layers", kda.size(),
          full.size(), n_layers);

    n_experts = config_get<int>(c, "num_experts");
    top_k = config_get<int>(c, "num_experts_per_token");
    n_group = config_get_or<int>(c, "num_expert_group", 1);
    n_shared = config_get_or<int>(c, "num_shared_experts", 0);
    n_dense = config_get_or<int>(c, "first_k_dense_replace", 0);
    renormalize = config_get_or<bool>(c, "moe_renormalize", true);
    routed_scaling = static_cast<float>(config_get_or<double>(c, "routed_scaling_factor", 1.0));
    check(n_experts > 0 && top_k > 0 && top_k <= n_experts && n_group == 1 && n_shared >= 0 && n_dense >= 0,
          "config.json: {} experts top-{} in {} groups: the Kimi router routes over one group", n_experts,
          top_k, n_group);
    const std::string router = config_get_or<std::string>(c, "moe_router_activation_func", "sigmoid");
    check(router == "sigmoid", "config.json: moe_router_activation_func '{}' (sigmoid only)", router);

    d_latent = config_get_or<int64_t>(c, "routed_expert_hidden_size", 0);
    latent_norm = d_latent > 0 && config_get_or<bool>(c, "latent_moe_use_norm", false);
    const std::string act_name = config_get_or<std::string>(c, "hidden_act", "silu");
    if (act_name == "situ")
        act = {GluKind::situ, static_cast<float>(config_get<double>(c, "activation_situ_beta")),
               static_cast<float>(config_get<double>(c, "activation_situ_linear_beta"))};
    else
        check(act_name == "silu", "config.json: hidden_act '{}' (silu or situ)", act_name);
    attn_res_block = config_get_or<int>(c, "attn_res_block_size", 0);
    check(attn_res_block >= 0, "config.json: attn_res_block_size {}", attn_res_block);
}

}  // namespace coli
