// OLMoE (allenai/OLMoE-1B-7B-0924 and -0125; docs/models.md 1) with random weights.
//
// Value scales, and why. A random model's router picks nearly the same experts for every token when the
// residual stream is dominated by something all tokens share (docs/design.md, "synthetic models lie about
// caching"): with the usual small embedding (std 0.02) the attention output, an average over the context
// that consecutive tokens largely share, outweighs the token's own embedding. So here the embedding is
// large (std 1), every residual branch (o_proj, down_proj) adds only a small fraction of that, and the
// router turns the token-specific stream into logits that differ strongly from token to token. Each
// layer's router is independent, so each layer routes a token to its own pseudo-random set of experts.
// Matrices are scaled by 1/sqrt(fan_in) so that these ratios hold at every --scale.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "synth/synth_arch.h"

namespace coli {
namespace {

// OLMoE-1B-7B dimensions (config.json on the hub).
constexpr int64_t kVocab = 50304;
constexpr int64_t kHidden = 2048;
constexpr int64_t kExpertIntermediate = 1024;
constexpr int kLayers = 16;
constexpr int kHeads = 16;  // head_dim 128, no GQA
constexpr int kExperts = 64;
constexpr int kTopK = 8;
constexpr int kMaxPositions = 4096;
constexpr int kEosToken = 50279;
constexpr int kPadToken = 1;
constexpr double kRmsEps = 1e-5;
constexpr double kRopeTheta = 10000.0;
constexpr double kInitializerRange = 0.02;  // the hub config's value; written, not used for these weights

// Standard deviations (see the comment at the top of the file).
constexpr float kEmbedStd = 1.0f;        // token identity dominates the residual stream
constexpr float kProjGain = 1.0f;        // q, k, v, expert gate/up, lm_head: output rms ~ input rms
constexpr float kResidualGain = 0.1f;    // o_proj, down_proj: each branch adds ~10% of the stream's rms
constexpr float kRouterLogitStd = 3.0f;  // router logits std over experts, for a normalized input
constexpr float kNormJitterStd = 0.05f;  // norm gains are 1 +- a few percent: finite, not all exactly 1

constexpr ValueDist kNormDist{1.0f, kNormJitterStd};

nlohmann::json olmoe_config(const SynthOptions& o) {
    check(o.scale >= 1, "--scale must be >= 1, got {}", o.scale);
    check(o.layers >= 0 && o.experts >= 0, "--layers and --experts must be positive (0 = the real model's)");
    const int64_t hidden = synth_scaled(kHidden, o.scale, "hidden_size");
    const int64_t vocab = synth_scaled(kVocab, o.scale, "vocab_size");
    const int heads = std::max(1, kHeads / o.scale);  // keeps head_dim 128 while the width allows it
    check(hidden % heads == 0, "--scale {}: hidden_size {} is not a multiple of {} heads", o.scale, hidden,
          heads);
    const int experts = o.experts > 0 ? o.experts : kExperts;
    return {
        {"architectures", {"OlmoeForCausalLM"}},
        {"attention_bias", false},
        {"attention_dropout", 0.0},
        {"bos_token_id", nullptr},
        {"clip_qkv", nullptr},
        {"eos_token_id", std::min<int64_t>(kEosToken, vocab - 1)},
        {"hidden_act", "silu"},
        {"hidden_size", hidden},
        {"initializer_range", kInitializerRange},
        {"intermediate_size", synth_scaled(kExpertIntermediate, o.scale, "intermediate_size")},
        {"max_position_embeddings", kMaxPositions},
        {"model_type", "olmoe"},
        {"norm_topk_prob", false},
        {"num_attention_heads", heads},
        {"num_experts", experts},
        {"num_experts_per_tok", std::min(kTopK, experts)},
        {"num_hidden_layers", o.layers > 0 ? o.layers : kLayers},
        {"num_key_value_heads", heads},
        {"output_router_logits", false},
        {"pad_token_id", std::min<int64_t>(kPadToken, vocab - 1)},
        {"rms_norm_eps", kRmsEps},
        {"rope_scaling", nullptr},
        {"rope_theta", kRopeTheta},
        {"router_aux_loss_coef", 0.01},
        {"tie_word_embeddings", false},
        {"torch_dtype", synth_torch_dtype(o.dtype)},
        {"transformers_version", "4.45.0"},
        {"use_cache", true},
        {"vocab_size", vocab},
    };
}

nlohmann::json olmoe_generation_config(const nlohmann::json& c) {
    return {{"_from_model_config", true},
            {"eos_token_id", c["eos_token_id"]},
            {"pad_token_id", c["pad_token_id"]},
            {"transformers_version", c["transformers_version"]}};
}

std::vector<SynthTensor> olmoe_tensors(const nlohmann::json& c) {
    const int64_t d = c["hidden_size"], ff = c["intermediate_size"], vocab = c["vocab_size"];
    const int64_t heads = c["num_attention_heads"], kv_heads = c["num_key_value_heads"];
    const int64_t kv_width = kv_heads * (d / heads);
    const int layers = c["num_hidden_layers"], experts = c["num_experts"];

    std::vector<SynthTensor> t;
    t.push_back({"model.embed_tokens.weight", {vocab, d}, {0.0f, kEmbedStd}});
    for (int l = 0; l < layers; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        t.push_back({p + "self_attn.q_proj.weight", {d, d}, synth_matrix_dist(kProjGain, d)});
        t.push_back({p + "self_attn.k_proj.weight", {kv_width, d}, synth_matrix_dist(kProjGain, d)});
        t.push_back({p + "self_attn.v_proj.weight", {kv_width, d}, synth_matrix_dist(kProjGain, d)});
        t.push_back({p + "self_attn.o_proj.weight", {d, d}, synth_matrix_dist(kResidualGain, d)});
        t.push_back({p + "self_attn.q_norm.weight", {d}, kNormDist});
        t.push_back({p + "self_attn.k_norm.weight", {kv_width}, kNormDist});
        t.push_back({p + "mlp.gate.weight", {experts, d}, synth_matrix_dist(kRouterLogitStd, d)});
        for (int e = 0; e < experts; ++e) {
            const std::string x = fmt::format("{}mlp.experts.{}.", p, e);
            t.push_back({x + "gate_proj.weight", {ff, d}, synth_matrix_dist(kProjGain, d)});
            t.push_back({x + "up_proj.weight", {ff, d}, synth_matrix_dist(kProjGain, d)});
            t.push_back({x + "down_proj.weight", {d, ff}, synth_matrix_dist(kResidualGain, ff)});
        }
        t.push_back({p + "input_layernorm.weight", {d}, kNormDist});
        t.push_back({p + "post_attention_layernorm.weight", {d}, kNormDist});
    }
    t.push_back({"model.norm.weight", {d}, kNormDist});
    t.push_back({"lm_head.weight", {vocab, d}, synth_matrix_dist(kProjGain, d)});
    return t;
}

}  // namespace

extern const SynthArch kSynthOlmoe;
const SynthArch kSynthOlmoe{"olmoe", "allenai/OLMoE-1B-7B-0924, OLMoE-1B-7B-0125", olmoe_config,
                            olmoe_generation_config, olmoe_tensors};

}  // namespace coli
