// DeepSeek-V3 (deepseek-ai/DeepSeek-V3, DeepSeek-V3-0324, DeepSeek-R1; docs/models.md 2) with random
// weights, in the layout the hub publishes it in: transformers' names under `model.` (MLA with q and kv
// LoRA, the first three layers dense, then MoE layers of 256 routed experts and one shared expert behind a
// sigmoid router with `e_score_correction_bias`), stored as the release stores them (9.4):
//   every projection of attention, dense MLP, routed and shared experts   F8_E4M3 [out, in]
//                                                  + `<name>_scale_inv` F32 [ceil(out/128), ceil(in/128)]
//   embedding, router, lm_head, norms                                     --dtype (BF16, as released)
//   e_score_correction_bias                                               F32
// --scale divides the model width, the dense and expert widths, the heads, the q and kv ranks and the
// vocabulary; per-head widths (nope 128, rope 64, v 128) stay the real ones. --layers keeps the first layers
// of the real schedule (three dense, then MoE), so that 4 layers hold both kinds. The MTP layer follows them
// (num_nextn_predict_layers; docs/models.md 2.5), as a MoE layer like the others plus its own norms and
// eh_proj (in the --dtype).
//
// The tensor list is arch_parts.cpp's DeepSeek-V3 layout, with its value scales.
//
// `--arch deepseek_v32` (deepseek-ai/DeepSeek-V3.2; docs/models.md 3) is the same model plus the DSA
// lightning indexer in every layer (64 heads of 128, top 2048 keys; --scale divides the heads and the
// top-k): `self_attn.indexer.wq_b` and `.wk` block FP8 like the other projections, `.k_norm.weight` and
// `.bias` F32 (the release's inference code keeps its LayerNorm in f32), `.weights_proj` in --dtype.
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "formats/format.h"
#include "synth/arch_parts.h"

namespace coli {
namespace {

// DeepSeek-V3's config.json values.
constexpr int64_t kHidden = 7168;
constexpr int kLayers = 61, kDenseLayers = 3;
constexpr int64_t kVocab = 129280;
constexpr int64_t kIntermediate = 18432, kMoeIntermediate = 2048;
constexpr int64_t kHeads = 128;
constexpr int64_t kQLoraRank = 1536, kKvLoraRank = 512;
constexpr int64_t kNopeDim = 128, kRopeDim = 64, kVDim = 128;
constexpr int kExperts = 256, kTopK = 8, kGroups = 8, kTopKGroups = 4, kSharedExperts = 1;
constexpr double kRoutedScaling = 2.5;
constexpr double kRopeTheta = 10000;
constexpr double kYarnFactor = 40, kYarnOriginalCtx = 4096, kYarnBetaFast = 32, kYarnBetaSlow = 1;
constexpr double kYarnMscale = 1.0, kYarnMscaleAllDim = 1.0;
constexpr double kRmsEps = 1e-6;
constexpr int64_t kMaxPositions = 163840;
constexpr int kMtpLayers = 1;
constexpr int kBos = 0, kEos = 1;
// DeepSeek-V3.2's indexer.
constexpr int64_t kIndexHeads = 64, kIndexDim = 128, kIndexTopK = 2048;

nlohmann::json deepseek_v3_config(const SynthOptions& o) {
    check(o.scale >= 1, "--scale must be >= 1, got {}", o.scale);
    check(o.layers >= 0 && o.experts >= 0, "--layers and --experts must be positive (0 = the real model's)");
    const int layers = o.layers > 0 ? o.layers : kLayers;
    const int experts = o.experts > 0 ? o.experts : kExperts;
    const int top_k = std::min(kTopK, experts);
    // The real 8 groups (keep 4) where the experts split into them and still hold top-k; else one group.
    const bool grouped = experts % kGroups == 0 && experts / kGroups * kTopKGroups >= top_k;
    return {
        {"architectures", {"DeepseekV3ForCausalLM"}},
        {"model_type", "deepseek_v3"},
        {"vocab_size", synth_scaled(kVocab, o.scale, "vocab_size")},
        {"hidden_size", synth_scaled(kHidden, o.scale, "hidden_size")},
        {"intermediate_size", synth_scaled(kIntermediate, o.scale, "intermediate_size")},
        {"moe_intermediate_size", synth_scaled(kMoeIntermediate, o.scale, "moe_intermediate_size")},
        {"num_hidden_layers", layers},
        {"first_k_dense_replace", kDenseLayers},
        {"moe_layer_freq", 1},
        {"num_attention_heads", synth_scaled(kHeads, o.scale, "num_attention_heads")},
        {"num_key_value_heads", synth_scaled(kHeads, o.scale, "num_key_value_heads")},
        {"q_lora_rank", synth_scaled(kQLoraRank, o.scale, "q_lora_rank")},
        {"kv_lora_rank", synth_scaled(kKvLoraRank, o.scale, "kv_lora_rank")},
        {"qk_nope_head_dim", kNopeDim},
        {"qk_rope_head_dim", kRopeDim},
        {"v_head_dim", kVDim},
        {"n_routed_experts", experts},
        {"num_experts_per_tok", top_k},
        {"n_group", grouped ? kGroups : 1},
        {"topk_group", grouped ? kTopKGroups : 1},
        {"n_shared_experts", kSharedExperts},
        {"scoring_func", "sigmoid"},
        {"topk_method", "noaux_tc"},
        {"norm_topk_prob", true},
        {"routed_scaling_factor", kRoutedScaling},
        {"rope_theta", kRopeTheta},
        {"rope_scaling",
         {{"type", "yarn"},
          {"factor", kYarnFactor},
          {"original_max_position_embeddings", kYarnOriginalCtx},
          {"beta_fast", kYarnBetaFast},
          {"beta_slow", kYarnBetaSlow},
          {"mscale", kYarnMscale},
          {"mscale_all_dim", kYarnMscaleAllDim}}},
        {"rms_norm_eps", kRmsEps},
        {"max_position_embeddings", kMaxPositions},
        {"num_nextn_predict_layers", kMtpLayers},
        {"hidden_act", "silu"},
        {"attention_bias", false},
        {"tie_word_embeddings", false},
        {"bos_token_id", kBos},
        {"eos_token_id", kEos},
        {"torch_dtype", synth_torch_dtype(o.dtype)},
        {"quantization_config",
         {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"weight_block_size", {kFp8Block, kFp8Block}},
          {"activation_scheme", "dynamic"}}},
    };
}

// DeepSeek-V3.2: V3's config plus the indexer's keys.
nlohmann::json deepseek_v32_config(const SynthOptions& o) {
    nlohmann::json c = deepseek_v3_config(o);
    c["architectures"] = {"DeepseekV32ForCausalLM"};
    c["model_type"] = "deepseek_v32";
    c["index_n_heads"] = synth_scaled(kIndexHeads, o.scale, "index_n_heads");
    c["index_head_dim"] = kIndexDim;
    c["index_topk"] = synth_scaled(kIndexTopK, o.scale, "index_topk");
    return c;
}

nlohmann::json deepseek_v3_generation_config(const nlohmann::json& c) {
    return {{"bos_token_id", c["bos_token_id"]}, {"eos_token_id", c["eos_token_id"]}};
}

std::vector<SynthTensor> deepseek_v3_tensors(const nlohmann::json& c) {
    return synth_deepseek_tensors(c, SynthProj::fp8_block);
}

}  // namespace

extern const SynthArch kSynthDeepseekV3;
const SynthArch kSynthDeepseekV3{"deepseek_v3", "deepseek-ai/DeepSeek-V3 (FP8 release layout)",
                                 deepseek_v3_config, deepseek_v3_generation_config, deepseek_v3_tensors};
extern const SynthArch kSynthDeepseekV32;
const SynthArch kSynthDeepseekV32{"deepseek_v32", "deepseek-ai/DeepSeek-V3.2 (FP8 release layout)",
                                  deepseek_v32_config, deepseek_v3_generation_config, deepseek_v3_tensors};

}  // namespace coli
