#include "models/deepseek_v4_config.h"

#include <algorithm>
#include <map>
#include <optional>

#include "core/error.h"
#include "models/config.h"

namespace coli {
namespace {

// transformers' layer type names, and the compress ratio each has when config.json gives none.
constexpr std::string_view kSliding = "sliding_attention";
constexpr std::string_view kCsa = "compressed_sparse_attention";
constexpr std::string_view kHca = "heavily_compressed_attention";
constexpr int kDefaultCsaRatio = 4, kDefaultHcaRatio = 128;
// The ratio DeepSeek's own code gives overlapping windows and an indexer (CSA); any other non-zero ratio in
// compress_ratios is HCA. transformers maps only 0 / 4 / 128.
constexpr int kCsaRatio = 4;
constexpr int kDefaultHashLayers = 3;           // num_hash_layers when config.json has neither spelling
constexpr double kDefaultRopeFraction = 0.125;  // partial_rotary_factor's default: 64 of 512 dims

}  // namespace

std::string_view attn_name(DeepseekV4Config::Attn a) {
    switch (a) {
        case DeepseekV4Config::Attn::sliding:
            return kSliding;
        case DeepseekV4Config::Attn::csa:
            return kCsa;
        case DeepseekV4Config::Attn::hca:
            return kHca;
    }
    return "?";
}

DeepseekV4Config::DeepseekV4Config(const nlohmann::json& c) {
    family = config_get_or<std::string>(c, "model_type", "deepseek_v4");
    vocab = config_get<int64_t>(c, "vocab_size");
    d_model = config_get<int64_t>(c, "hidden_size");
    d_expert = config_get<int64_t>(c, "moe_intermediate_size");
    n_layers = config_get<int>(c, "num_hidden_layers");
    n_heads = config_get<int>(c, "num_attention_heads");
    head_dim = config_get<int>(c, "head_dim");
    q_lora = config_get<int>(c, "q_lora_rank");
    o_groups = config_get<int>(c, "o_groups");
    o_lora = config_get<int>(c, "o_lora_rank");
    window = config_get<int>(c, "sliding_window");
    n_experts = config_get<int>(c, "n_routed_experts");
    top_k = config_get<int>(c, "num_experts_per_tok");
    n_shared = config_get_or<int>(c, "n_shared_experts", 1);
    routed_scaling = static_cast<float>(config_get_or<double>(c, "routed_scaling_factor", 1.5));
    swiglu_limit = static_cast<float>(config_get_or<double>(c, "swiglu_limit", 10.0));
    rms_eps = static_cast<float>(config_get_or<double>(c, "rms_norm_eps", 1e-6));
    hc_mult = config_get_or<int>(c, "hc_mult", 4);
    hc_iters = config_get_or<int>(c, "hc_sinkhorn_iters", 20);
    hc_eps = static_cast<float>(config_get_or<double>(c, "hc_eps", 1e-6));
    index_heads = config_get_or<int>(c, "index_n_heads", 64);
    index_dim = config_get_or<int>(c, "index_head_dim", 128);
    index_topk = config_get_or<int>(c, "index_topk", 512);
    max_ctx = config_get_or<int64_t>(c, "max_position_embeddings", 1048576);
    mtp_layers = config_get_or<int>(c, "num_nextn_predict_layers", 0);

    check(vocab > 0 && d_model > 0 && d_expert > 0 && n_layers > 0 && n_heads > 0 && head_dim > 0 &&
              q_lora > 0 && window > 0 && max_ctx > 0 && mtp_layers >= 0,
          "config.json: sizes must be positive");
    const int kv_heads = config_get_or<int>(c, "num_key_value_heads", 1);
    check(kv_heads == 1, "config.json: num_key_value_heads is {}; deepseek_v4 has one shared K=V head",
          kv_heads);
    check(o_groups > 0 && n_heads % o_groups == 0 && o_lora > 0,
          "config.json: o_groups {} must divide the {} heads (o_lora_rank {})", o_groups, n_heads, o_lora);
    check(n_experts > 0 && top_k > 0 && top_k <= n_experts && n_shared >= 0,
          "config.json: {} routed experts cannot route top-{}", n_experts, top_k);
    check(swiglu_limit > 0, "config.json: swiglu_limit must be positive, got {}", swiglu_limit);
    check(hc_mult > 0 && hc_iters > 0, "config.json: hc_mult {} and hc_sinkhorn_iters {} must be positive",
          hc_mult, hc_iters);
    const std::string act = config_get_or<std::string>(c, "hidden_act", "silu");
    check(act == "silu", "config.json: hidden_act '{}' is not supported by deepseek_v4 (silu only)", act);
    const std::string scoring = config_get_or<std::string>(c, "scoring_func", "sqrtsoftplus");
    check(scoring == "sqrtsoftplus" || scoring == "sigmoid",
          "config.json: scoring_func '{}' is not supported by deepseek_v4 (sqrtsoftplus, sigmoid)", scoring);
    sqrt_softplus = scoring == "sqrtsoftplus";
    check(!config_get_or<bool>(c, "tie_word_embeddings", false),
          "config.json: tie_word_embeddings is not supported (deepseek_v4 has its own head)");

    // The rotated dims: qk_rope_head_dim (hub), else partial_rotary_factor (transformers), else 1/8.
    const double fraction = config_get_or<double>(c, "partial_rotary_factor", kDefaultRopeFraction);
    const auto from_fraction = static_cast<int>(head_dim * fraction);
    rope_dim = config_get_or<int>(c, "qk_rope_head_dim", from_fraction);
    check(!c.contains("partial_rotary_factor") || c["partial_rotary_factor"].is_null() ||
              rope_dim == from_fraction,
          "config.json: qk_rope_head_dim {} disagrees with partial_rotary_factor {} of head_dim {}", rope_dim,
          fraction, head_dim);
    check(rope_dim > 0 && rope_dim % 2 == 0 && rope_dim <= head_dim && rope_dim <= index_dim,
          "config.json: {} rotated dims do not fit heads of {} (indexer {}), or are odd", rope_dim, head_dim,
          index_dim);

    layers_from(c);
    for (int l = 0; l < n_layers; ++l)
        if (attn[l] == Attn::csa) {
            check(index_heads > 0 && index_dim > 0 && index_topk > 0,
                  "config.json: CSA layers need an indexer (index_n_heads {}, index_head_dim {}, index_topk "
                  "{})",
                  index_heads, index_dim, index_topk);
            break;
        }
    rope_from(c);
}

// Attention kinds and ratios (docs/models.md 8.1): transformers' layer_types with compress_rates, else the
// hub's compress_ratios (0 sliding, 4 CSA, other HCA; entries past the layers belong to MTP layers); both
// given must agree. MoE kinds: mlp_layer_types, else the first num_hash_layers are hash-routed.
void DeepseekV4Config::layers_from(const nlohmann::json& c) {
    std::map<std::string, int, std::less<>> rates = {{std::string(kCsa), kDefaultCsaRatio},
                                                     {std::string(kHca), kDefaultHcaRatio}};
    if (c.contains("compress_rates") && c["compress_rates"].is_object())
        for (const auto& [name, value] : c["compress_rates"].items()) {
            check(name == kCsa || name == kHca, "config.json: compress_rates has unknown layer type '{}'",
                  name);
            check(value.is_number_integer() && value.get<int>() > 0,
                  "config.json: compress_rates['{}'] must be a positive integer", name);
            rates[name] = value.get<int>();
        }
    if (c.contains("compress_rate_csa")) rates[std::string(kCsa)] = config_get<int>(c, "compress_rate_csa");
    if (c.contains("compress_rate_hca")) rates[std::string(kHca)] = config_get<int>(c, "compress_rate_hca");

    std::vector<int> hub_ratios;
    if (c.contains("compress_ratios") && !c["compress_ratios"].is_null()) {
        const auto& list = c["compress_ratios"];
        check(list.is_array(), "config.json: compress_ratios must be a list");
        for (const auto& v : list) {
            check(v.is_number_integer() && v.get<int>() >= 0,
                  "config.json: compress_ratios holds {}, not a ratio (0 or more)", v.dump());
            hub_ratios.push_back(v.get<int>());
        }
        check(hub_ratios.size() == static_cast<size_t>(n_layers) ||
                  hub_ratios.size() == static_cast<size_t>(n_layers + mtp_layers),
              "config.json: compress_ratios has {} entries for {} layers (+ {} MTP)", hub_ratios.size(),
              n_layers, mtp_layers);
    }

    attn.resize(n_layers);
    ratio.resize(n_layers);
    const bool typed = c.contains("layer_types") && !c["layer_types"].is_null();
    if (typed) {
        check(c["layer_types"].is_array() && c["layer_types"].size() == static_cast<size_t>(n_layers),
              "config.json: layer_types must list {} layers", n_layers);
        for (int l = 0; l < n_layers; ++l) {
            const std::string t = config_list_item(c, "layer_types", l);
            if (t == kSliding)
                attn[l] = Attn::sliding;
            else if (t == kCsa)
                attn[l] = Attn::csa;
            else if (t == kHca)
                attn[l] = Attn::hca;
            else
                fail("config.json: layer_types[{}] is '{}' ({}, {} or {})", l, t, kSliding, kCsa, kHca);
            ratio[l] = attn[l] == Attn::sliding ? 0 : rates.find(attn_name(attn[l]))->second;
            check(hub_ratios.empty() || hub_ratios[l] == ratio[l],
                  "config.json: layer {} is {} (ratio {}) in layer_types, but compress_ratios says {}", l, t,
                  ratio[l], hub_ratios[l]);
        }
    } else if (!hub_ratios.empty()) {
        for (int l = 0; l < n_layers; ++l) {
            ratio[l] = hub_ratios[l];
            attn[l] = ratio[l] == 0 ? Attn::sliding : ratio[l] == kCsaRatio ? Attn::csa : Attn::hca;
        }
    } else {
        // transformers' default schedule (V4-Pro): two HCA layers, then CSA and HCA alternating.
        for (int l = 0; l < n_layers; ++l) {
            attn[l] = l < 2 || (l - 2) % 2 == 0 ? Attn::hca : Attn::csa;
            ratio[l] = rates.find(attn_name(attn[l]))->second;
        }
    }

    hash.resize(n_layers);
    if (c.contains("mlp_layer_types") && !c["mlp_layer_types"].is_null()) {
        check(c["mlp_layer_types"].is_array() && c["mlp_layer_types"].size() == static_cast<size_t>(n_layers),
              "config.json: mlp_layer_types must list {} layers", n_layers);
        for (int l = 0; l < n_layers; ++l) {
            const std::string t = config_list_item(c, "mlp_layer_types", l);
            check(t == "hash_moe" || t == "moe", "config.json: mlp_layer_types[{}] is '{}' (hash_moe or moe)",
                  l, t);
            hash[l] = t == "hash_moe";
        }
        check(!c.contains("num_hash_layers") || c["num_hash_layers"].is_null() ||
                  config_get<int>(c, "num_hash_layers") ==
                      static_cast<int>(std::count(hash.begin(), hash.end(), true)),
              "config.json: num_hash_layers disagrees with mlp_layer_types");
    } else {
        const int n_hash = config_get_or<int>(c, "num_hash_layers", kDefaultHashLayers);
        check(n_hash >= 0, "config.json: num_hash_layers must be 0 or more, got {}", n_hash);
        for (int l = 0; l < n_layers; ++l) hash[l] = l < n_hash;
    }
}

namespace {

// One rope set from its block (docs/models.md 8.3): type default or yarn; YaRN's factor, original context
// and betas; its attention factor from the block, else `attention_default` (nullopt: transformers' formula).
RopeParams rope_set(const nlohmann::json& rp, double theta, double max_ctx,
                    std::optional<double> attention_default, const std::string& where) {
    const std::string type =
        config_get_or<std::string>(rp, "rope_type", config_get_or<std::string>(rp, "type", "default"));
    RopeParams r;
    r.style = RopeStyle::interleaved;
    r.theta = static_cast<float>(theta);
    if (type == "default") return r;
    check(type == "yarn", "config.json: {} rope type '{}' is not supported by deepseek_v4 (default, yarn)",
          where, type);
    check(config_get_or<bool>(rp, "truncate", true),
          "config.json: {} YaRN with truncate false is not supported", where);
    const double original = config_get<double>(rp, "original_max_position_embeddings");
    const double factor = config_get_or<double>(rp, "factor", max_ctx / original);
    r.yarn = {static_cast<float>(factor), static_cast<float>(original),
              static_cast<float>(config_get_or<double>(rp, "beta_fast", 32.0)),
              static_cast<float>(config_get_or<double>(rp, "beta_slow", 1.0))};
    const double mscale = config_get_or<double>(rp, "mscale", 0.0);
    const double mscale_all = config_get_or<double>(rp, "mscale_all_dim", 0.0);
    const double formula = mscale != 0 && mscale_all != 0
                               ? yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all)
                               : yarn_mscale(factor, 1.0);
    r.attention_scaling = static_cast<float>(
        config_get_or<double>(rp, "attention_factor", attention_default.value_or(formula)));
    return r;
}

}  // namespace

// The rope sets (docs/models.md 8.3). transformers' nested rope_parameters {main, compress} are read as they
// are; otherwise main is plain rope at rope_theta and compress takes compress_rope_theta with the YaRN block
// of rope_parameters (flat) or rope_scaling (hub), whose attention factor is 1 unless the block names one.
void DeepseekV4Config::rope_from(const nlohmann::json& c) {
    const nlohmann::json none = nlohmann::json::object();
    const auto rp_it = c.find("rope_parameters");
    const bool has_rp = rp_it != c.end() && rp_it->is_object();
    if (has_rp && rp_it->contains("main") && (*rp_it)["main"].is_object() && rp_it->contains("compress") &&
        (*rp_it)["compress"].is_object()) {
        const nlohmann::json& main = (*rp_it)["main"];
        const nlohmann::json& compress = (*rp_it)["compress"];
        for (const auto* set : {&main, &compress}) {
            const double f =
                config_get_or<double>(*set, "partial_rotary_factor", double(rope_dim) / head_dim);
            check(static_cast<int>(head_dim * f) == rope_dim,
                  "config.json: a rope set's partial_rotary_factor {} gives {} rotated dims, not {}", f,
                  static_cast<int>(head_dim * f), rope_dim);
        }
        rope_main = rope_set(main, config_get<double>(main, "rope_theta"), max_ctx, std::nullopt, "main");
        rope_compress =
            rope_set(compress, config_get<double>(compress, "rope_theta"), max_ctx, std::nullopt, "compress");
        return;
    }
    const nlohmann::json& yarn =
        has_rp ? *rp_it
               : (c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"] : none);
    const double theta =
        config_get_or<double>(c, "rope_theta", config_get_or<double>(yarn, "rope_theta", 10000.0));
    rope_main = rope_set(none, theta, max_ctx, 1.0, "main");
    rope_compress =
        rope_set(yarn, config_get_or<double>(c, "compress_rope_theta", 160000.0), max_ctx, 1.0, "compress");
}

}  // namespace coli
