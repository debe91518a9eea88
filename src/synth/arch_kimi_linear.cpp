// Kimi Linear (moonshotai/Kimi-Linear-48B-A3B-Instruct and -Base; docs/models.md 5) with random weights, in
// the released checkpoint's layout: transformers' names under `model.`, KDA layers and NoPE-MLA layers (no q
// LoRA: a plain q_proj) in the 3:1 pattern of linear_attn_config's 1-indexed lists, a dense SwiGLU in
// layer 0, then MoE layers of 256 routed experts (`block_sparse_moe.experts.E.w1/w3/w2`) and one shared
// expert behind a sigmoid router. arch_parts.cpp's KDA, MLA and SwiGLU lists with their value scales.
// Weights are in the --dtype (BF16 as released) but for the KDA convolutions, dt_bias, A_log
// ([1, 1, H, 1]), o_norm and the router's e_score_correction_bias, F32 as Kimi K3's release stores them
// (docs/models.md 7; Kimi Linear's own shards' dtypes have not been read here, and the loader takes any
// float). config.json has the keys the release's config has (`model_max_length`, `q_lora_rank` null,
// `dtype`). --scale divides the model width, the dense and expert widths, the heads (MLA and KDA), the kv
// rank and the vocabulary; per-head widths stay the real ones. --layers keeps the first layers of the real
// pattern (MLA at 0-indexed 3, 7, ... and the last layer), so that 4 layers hold every kind.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "synth/arch_parts.h"

namespace coli {
namespace {

// Kimi-Linear-48B-A3B's config.json values (docs/models.md 5).
constexpr int64_t kHidden = 2304;
constexpr int kLayers = 27;
constexpr int64_t kVocab = 163840;
constexpr int64_t kIntermediate = 9216, kMoeIntermediate = 1024;
constexpr int64_t kHeads = 32;  // MLA attention heads, and KDA heads
constexpr int64_t kKvLoraRank = 512;
constexpr int64_t kNopeDim = 128, kRopeDim = 64, kVDim = 128;
constexpr int64_t kKdaHeadDim = 128;
constexpr int64_t kShortConvKernel = 4;
constexpr int kExperts = 256, kTopK = 8, kSharedExperts = 1, kFirstDenseLayers = 1;
constexpr double kRoutedScaling = 2.446;
constexpr double kRopeTheta = 10000;  // written as released; NoPE MLA rotates nothing (5.2)
constexpr double kRmsEps = 1e-5;
constexpr int64_t kMaxLength = 1048576;
// Special tokens, counted from the end of the vocabulary so that they stay inside it at any --scale:
// [BOS] 163584, [EOS] 163586, pad 163839 at the real size.
constexpr int64_t kBosFromEnd = 256, kEosFromEnd = 254, kPadFromEnd = 1;

nlohmann::json kimi_linear_config(const SynthOptions& o) {
    check(o.scale >= 1, "--scale must be >= 1, got {}", o.scale);
    check(o.layers >= 0 && o.experts >= 0, "--layers and --experts must be positive (0 = the real model's)");
    const int layers = o.layers > 0 ? o.layers : kLayers;
    const int experts = o.experts > 0 ? o.experts : kExperts;
    const int64_t d = synth_scaled(kHidden, o.scale, "hidden_size");
    const int64_t vocab = synth_scaled(kVocab, o.scale, "vocab_size");
    const int64_t heads = synth_scaled(kHeads, o.scale, "num_attention_heads");
    nlohmann::json lin = {
        {"num_heads", heads}, {"head_dim", kKdaHeadDim}, {"short_conv_kernel_size", kShortConvKernel}};
    synth_kimi_layer_lists(lin, layers);
    return {
        {"architectures", {"KimiLinearForCausalLM"}},
        {"model_type", "kimi_linear"},
        {"vocab_size", vocab},
        {"hidden_size", d},
        {"intermediate_size", synth_scaled(kIntermediate, o.scale, "intermediate_size")},
        {"moe_intermediate_size", synth_scaled(kMoeIntermediate, o.scale, "moe_intermediate_size")},
        {"num_hidden_layers", layers},
        {"num_attention_heads", heads},
        {"num_key_value_heads", heads},
        {"head_dim", d / heads},  // hidden_size / heads, as released (72); the MLA reads its own head dims
        {"q_lora_rank", nullptr},
        {"kv_lora_rank", synth_scaled(kKvLoraRank, o.scale, "kv_lora_rank")},
        {"qk_nope_head_dim", kNopeDim},
        {"qk_rope_head_dim", kRopeDim},
        {"v_head_dim", kVDim},
        {"mla_use_nope", true},
        {"linear_attn_config", lin},
        {"num_experts", experts},
        {"num_experts_per_token", std::min(kTopK, experts)},
        {"num_shared_experts", kSharedExperts},
        {"num_expert_group", 1},
        {"topk_group", 1},
        {"use_grouped_topk", true},
        {"moe_router_activation_func", "sigmoid"},
        {"moe_renormalize", true},
        {"routed_scaling_factor", kRoutedScaling},
        {"moe_layer_freq", 1},
        {"first_k_dense_replace", kFirstDenseLayers},
        {"num_nextn_predict_layers", 0},
        {"hidden_act", "silu"},
        {"rms_norm_eps", kRmsEps},
        {"rope_theta", kRopeTheta},
        {"rope_scaling", nullptr},
        {"model_max_length", kMaxLength},
        {"bos_token_id", vocab - kBosFromEnd},
        {"eos_token_id", vocab - kEosFromEnd},
        {"pad_token_id", vocab - kPadFromEnd},
        {"tie_word_embeddings", false},
        {"dtype", synth_torch_dtype(o.dtype)},
    };
}

nlohmann::json kimi_linear_generation_config(const nlohmann::json& c) {
    return {{"bos_token_id", c["bos_token_id"]},
            {"eos_token_id", c["eos_token_id"]},
            {"pad_token_id", c["pad_token_id"]}};
}

// The MoE of docs/models.md 5.3: the router, the routed experts (one shard each), the shared experts.
void moe_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d) {
    const int experts = c["num_experts"];
    const int64_t ff = c["moe_intermediate_size"];
    const std::string moe = "block_sparse_moe.";
    t.matrix(moe + "gate", experts, d, kSynthRouterLogitStd);
    t.add({moe + "gate.e_score_correction_bias", {experts}, kSynthRouterBiasDist, DType::f32});
    for (int e = 0; e < experts; ++e) t.swiglu(fmt::format("{}experts.{}.", moe, e), d, ff, kSynthKimiExpert);
    t.swiglu(moe + "shared_experts.", d, ff * int64_t(c["num_shared_experts"]));
}

std::vector<SynthTensor> kimi_linear_tensors(const nlohmann::json& c) {
    const nlohmann::json& lin = c["linear_attn_config"];
    const int64_t d = c["hidden_size"], vocab = c["vocab_size"], heads = lin["num_heads"];
    const int layers = c["num_hidden_layers"], first_dense = c["first_k_dense_replace"];

    std::vector<SynthTensor> t;
    SynthTensorList model(t, "model.");
    model.add({"embed_tokens.weight", {vocab, d}, {0.0f, kSynthEmbedStd}});
    for (int l = 0; l < layers; ++l) {
        SynthTensorList layer(t, fmt::format("model.layers.{}.", l));
        if (synth_kimi_is_mla(lin, l))
            synth_mla_tensors(layer, c, d);
        else
            synth_kda_tensors(layer, lin, d, {1, 1, heads, 1});
        if (l < first_dense)
            layer.swiglu("mlp.", d, c["intermediate_size"]);
        else
            moe_tensors(layer, c, d);
        layer.norm("input_layernorm", d);
        layer.norm("post_attention_layernorm", d);
    }
    model.norm("norm", d);
    SynthTensorList(t, "").matrix("lm_head", vocab, d, kSynthProjGain);
    return t;
}

}  // namespace

extern const SynthArch kSynthKimiLinear;
const SynthArch kSynthKimiLinear{"kimi_linear", "moonshotai/Kimi-Linear-48B-A3B-Instruct", kimi_linear_config,
                                 kimi_linear_generation_config, kimi_linear_tensors};

}  // namespace coli
