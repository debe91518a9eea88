// GLM-5 (zai-org/GLM-5-FP8; docs/models.md 4) with random weights: the DeepSeek-V3.2 layout (MLA with q and
// kv LoRA plus the DSA lightning indexer in every layer, three dense layers, then MoE layers of 256 routed
// experts and one shared expert behind a sigmoid router), arch_parts.cpp's list with its value scales, at
// GLM-5's sizes (wider heads: nope 192, v 256) and stored as the FP8 release stores it (9.4):
//   every projection of attention, dense MLP, routed and shared experts   F8_E4M3 + F32 `weight_scale_inv`
//   the indexer's wq_b, wk and weights_proj, embedding, router, lm_head, norms            --dtype (BF16)
//   the indexer's k_norm weight and bias, e_score_correction_bias                       F32
// The indexer is left out of FP8 as converters to the release's format leave it; these dtypes have not
// been read from the released shards (the loader takes any float). config.json carries GLM's keys as
// transformers 5 writes them (`rope_parameters` with a plain RoPE of theta 1e6, `indexer_rope_interleave`,
// `dtype`). --scale divides the model width, the dense and expert widths, the heads (attention and
// indexer), the q and kv ranks, the indexer's top-k and the vocabulary; per-head widths stay the real ones.
// --layers keeps the first layers of the real schedule (three dense, then MoE). The MTP layer follows them,
// as for DeepSeek-V3 (2.5), with its own indexer.
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "formats/format.h"
#include "synth/arch_parts.h"

namespace coli {
namespace {

// GLM-5's config.json values.
constexpr int64_t kHidden = 6144;
constexpr int kLayers = 78, kDenseLayers = 3;
constexpr int64_t kVocab = 154880;
constexpr int64_t kIntermediate = 12288, kMoeIntermediate = 2048;
constexpr int64_t kHeads = 64;
constexpr int64_t kQLoraRank = 2048, kKvLoraRank = 512;
constexpr int64_t kNopeDim = 192, kRopeDim = 64, kVDim = 256;
constexpr int kExperts = 256, kTopK = 8, kSharedExperts = 1;
constexpr double kRoutedScaling = 2.5;
constexpr double kRopeTheta = 1e6;
constexpr double kRmsEps = 1e-5;
constexpr int64_t kMaxPositions = 202752;
constexpr int kMtpLayers = 1;
constexpr int64_t kIndexHeads = 32, kIndexDim = 128, kIndexTopK = 2048;
// Special tokens, counted from the end of the vocabulary so that they stay inside it at any --scale:
// eos 154820, 154827 and 154829, pad 154820 at the real size.
constexpr int64_t kEosFromEnd[] = {60, 53, 51};
constexpr int64_t kPadFromEnd = 60;

nlohmann::json glm_moe_dsa_config(const SynthOptions& o) {
    check(o.scale >= 1, "--scale must be >= 1, got {}", o.scale);
    check(o.layers >= 0 && o.experts >= 0, "--layers and --experts must be positive (0 = the real model's)");
    const int layers = o.layers > 0 ? o.layers : kLayers;
    const int experts = o.experts > 0 ? o.experts : kExperts;
    const int64_t vocab = synth_scaled(kVocab, o.scale, "vocab_size");
    const int64_t heads = synth_scaled(kHeads, o.scale, "num_attention_heads");
    nlohmann::json eos = nlohmann::json::array();
    for (int64_t from_end : kEosFromEnd) eos.push_back(vocab - from_end);
    return {
        {"architectures", {"GlmMoeDsaForCausalLM"}},
        {"model_type", "glm_moe_dsa"},
        {"vocab_size", vocab},
        {"hidden_size", synth_scaled(kHidden, o.scale, "hidden_size")},
        {"intermediate_size", synth_scaled(kIntermediate, o.scale, "intermediate_size")},
        {"moe_intermediate_size", synth_scaled(kMoeIntermediate, o.scale, "moe_intermediate_size")},
        {"num_hidden_layers", layers},
        {"first_k_dense_replace", kDenseLayers},
        {"moe_layer_freq", 1},
        {"num_attention_heads", heads},
        {"num_key_value_heads", heads},
        {"q_lora_rank", synth_scaled(kQLoraRank, o.scale, "q_lora_rank")},
        {"kv_lora_rank", synth_scaled(kKvLoraRank, o.scale, "kv_lora_rank")},
        {"qk_nope_head_dim", kNopeDim},
        {"qk_rope_head_dim", kRopeDim},
        {"qk_head_dim", kNopeDim + kRopeDim},
        {"head_dim", kRopeDim},
        {"v_head_dim", kVDim},
        {"index_n_heads", synth_scaled(kIndexHeads, o.scale, "index_n_heads")},
        {"index_head_dim", kIndexDim},
        {"index_topk", synth_scaled(kIndexTopK, o.scale, "index_topk")},
        {"indexer_rope_interleave", true},
        {"n_routed_experts", experts},
        {"num_experts_per_tok", std::min(kTopK, experts)},
        {"n_group", 1},
        {"topk_group", 1},
        {"n_shared_experts", kSharedExperts},
        {"scoring_func", "sigmoid"},
        {"topk_method", "noaux_tc"},
        {"norm_topk_prob", true},
        {"routed_scaling_factor", kRoutedScaling},
        {"rope_interleave", true},
        {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", kRopeTheta}}},
        {"rms_norm_eps", kRmsEps},
        {"max_position_embeddings", kMaxPositions},
        {"num_nextn_predict_layers", kMtpLayers},
        {"hidden_act", "silu"},
        {"attention_bias", false},
        {"tie_word_embeddings", false},
        {"eos_token_id", eos},
        {"pad_token_id", vocab - kPadFromEnd},
        {"dtype", synth_torch_dtype(o.dtype)},
        {"quantization_config",
         {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"weight_block_size", {kFp8Block, kFp8Block}},
          {"activation_scheme", "dynamic"}}},
    };
}

nlohmann::json glm_moe_dsa_generation_config(const nlohmann::json& c) {
    return {{"eos_token_id", c["eos_token_id"]}, {"pad_token_id", c["pad_token_id"]}};
}

std::vector<SynthTensor> glm_moe_dsa_tensors(const nlohmann::json& c) {
    return synth_deepseek_tensors(c, SynthProj::dense);
}

}  // namespace

extern const SynthArch kSynthGlmMoeDsa;
const SynthArch kSynthGlmMoeDsa{"glm_moe_dsa", "zai-org/GLM-5-FP8 (FP8 release layout)", glm_moe_dsa_config,
                                glm_moe_dsa_generation_config, glm_moe_dsa_tensors};

}  // namespace coli
