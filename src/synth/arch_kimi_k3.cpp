// Kimi K3 (moonshotai/Kimi-K3; docs/models.md 7) with random weights, in the released checkpoint's layout:
// a top-level config.json (model_type kimi_k3) whose text model sits in `text_config`, every text tensor
// under `language_model.`, KDA layers and gated-MLA layers in K3's 3:1 pattern, LatentMoE layers whose
// routed experts are compressed-tensors MXFP4 (U8 `weight_packed` + e8m0 `weight_scale`), and, as in the
// real shards, each expert's six tensors back to back but the experts not in id order within a shard.
//
// Value scales follow arch_olmoe.cpp (and its reasons): a large embedding so that routing is spread,
// 1/sqrt(fan_in) matrices, residual branches that add ~10% of the stream. MXFP4 experts get random codes
// and e8m0 scales chosen so that the decoded weights have the rms a bf16 matrix of the same fan-in gets.
// The vision tower is not written: the engine reads the text model only.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format.h"
#include "synth/arch_parts.h"

namespace coli {
namespace {

// K3 text_config values (docs/models.md 7).
constexpr int64_t kHidden = 7168;
constexpr int kLayers = 93;
constexpr int64_t kVocab = 163840;
constexpr int kHeads = 96;  // MLA attention heads, and KDA heads
constexpr int64_t kQLoraRank = 1536;
constexpr int64_t kKvLoraRank = 512;
constexpr int64_t kQkNopeDim = 128, kQkRopeDim = 64, kVHeadDim = 128;
constexpr int64_t kKdaHeadDim = 128;
constexpr int64_t kShortConvKernel = 4;
constexpr double kGateLowerBound = -5.0;
constexpr int kExperts = 896;
constexpr int kTopK = 16;
constexpr int64_t kMoeIntermediate = 3072;
constexpr int64_t kLatentWidth = 3584;  // routed_expert_hidden_size: the experts' model width
constexpr int kSharedExperts = 2;
constexpr double kRoutedScaling = 1.0;
constexpr int kFirstDenseLayers = 1;
constexpr double kSituBeta = 4.0, kSituLinearBeta = 25.0;
constexpr int kAttnResBlock = 12;
constexpr double kRmsEps = 1e-5;
// The dense layer-0 MLP width: not among the verified values of docs/models.md 7; DeepSeek-V3 / Kimi K2's
// dense intermediate_size, for a model of the same hidden size.
constexpr int64_t kDenseIntermediate = 18432;
constexpr int64_t kMaxPositions = 1048576;
// Special tokens, counted from the end of the vocabulary so that they stay inside it at any --scale:
// [BOS] 163584, <|end_of_msg|> 163586, pad 163839 at the real size.
constexpr int64_t kBosFromEnd = 256, kEosFromEnd = 254, kPadFromEnd = 1;
// A_log is stored F32 with room for this many heads, zero past num_heads (docs/models.md 7: [128] for
// 96 heads).
constexpr int64_t kALogStride = 128;

constexpr int kE8m0Bias = 127;
constexpr int kScaleJitter = 1;  // e8m0 scales vary by +-1 around the exponent that gives the target rms

nlohmann::json kimi_k3_config(const SynthOptions& o) {
    check(o.scale >= 1, "--scale must be >= 1, got {}", o.scale);
    check(o.layers >= 0 && o.experts >= 0, "--layers and --experts must be positive (0 = the real model's)");
    const int layers = o.layers > 0 ? o.layers : kLayers;
    const int experts = o.experts > 0 ? o.experts : kExperts;
    const int64_t moe_ff = synth_scaled(kMoeIntermediate, o.scale, "moe_intermediate_size");
    const int64_t latent = synth_scaled(kLatentWidth, o.scale, "routed_expert_hidden_size");
    check(moe_ff % kMxBlock == 0 && latent % kMxBlock == 0,
          "--scale {}: the experts' widths {} and {} must be multiples of the MXFP4 block {}; use at most 16",
          o.scale, moe_ff, latent, kMxBlock);
    const int64_t vocab = synth_scaled(kVocab, o.scale, "vocab_size");
    const int64_t heads = synth_scaled(kHeads, o.scale, "num_attention_heads");

    nlohmann::json lin = {{"num_heads", heads},
                          {"head_dim", kKdaHeadDim},
                          {"short_conv_kernel_size", kShortConvKernel},
                          {"gate_lower_bound", kGateLowerBound},
                          {"use_full_rank_gate", true}};
    synth_kimi_layer_lists(lin, layers);
    const nlohmann::json text = {
        {"model_type", "kimi_linear"},
        {"hidden_size", synth_scaled(kHidden, o.scale, "hidden_size")},
        {"num_hidden_layers", layers},
        {"vocab_size", vocab},
        {"num_attention_heads", heads},
        {"num_key_value_heads", heads},
        {"q_lora_rank", synth_scaled(kQLoraRank, o.scale, "q_lora_rank")},
        {"kv_lora_rank", synth_scaled(kKvLoraRank, o.scale, "kv_lora_rank")},
        {"qk_nope_head_dim", kQkNopeDim},
        {"qk_rope_head_dim", kQkRopeDim},
        {"v_head_dim", kVHeadDim},
        {"mla_use_nope", true},
        {"mla_use_output_gate", true},
        {"linear_attn_config", lin},
        {"num_experts", experts},
        {"num_experts_per_token", std::min(kTopK, experts)},
        {"moe_intermediate_size", moe_ff},
        {"routed_expert_hidden_size", latent},
        {"latent_moe_use_norm", true},
        {"num_shared_experts", kSharedExperts},
        {"routed_scaling_factor", kRoutedScaling},
        {"moe_renormalize", true},
        {"moe_router_activation_func", "sigmoid"},
        {"num_expert_group", 1},
        {"topk_group", 1},
        {"topk_method", "noaux_tc"},
        {"first_k_dense_replace", kFirstDenseLayers},
        {"intermediate_size", synth_scaled(kDenseIntermediate, o.scale, "intermediate_size")},
        {"hidden_act", "situ"},
        {"activation_situ_beta", kSituBeta},
        {"activation_situ_linear_beta", kSituLinearBeta},
        {"attn_res_block_size", kAttnResBlock},
        {"rms_norm_eps", kRmsEps},
        {"max_position_embeddings", kMaxPositions},
        {"bos_token_id", vocab - kBosFromEnd},
        {"eos_token_id", vocab - kEosFromEnd},
        {"pad_token_id", vocab - kPadFromEnd},
        {"tie_word_embeddings", false},
        {"torch_dtype", synth_torch_dtype(o.dtype)},
        {"quantization_config", {{"quant_method", "compressed-tensors"}, {"format", "mxfp4-pack-quantized"}}},
    };
    return {
        {"architectures", {"KimiK3ForConditionalGeneration"}},
        {"model_type", "kimi_k3"},
        {"text_config", text},
        {"tie_word_embeddings", false},
        {"torch_dtype", synth_torch_dtype(o.dtype)},
    };
}

nlohmann::json kimi_k3_generation_config(const nlohmann::json& c) {
    const nlohmann::json& t = c["text_config"];
    return {{"bos_token_id", t["bos_token_id"]},
            {"eos_token_id", t["eos_token_id"]},
            {"pad_token_id", t["pad_token_id"]}};
}

// RMS of an E2M1 code drawn uniformly from the 16 codes.
float e2m1_uniform_rms() {
    constexpr int kCodes = 16;
    float sum = 0;
    for (int c = 0; c < kCodes; ++c) sum += e2m1_to_f32(uint8_t(c)) * e2m1_to_f32(uint8_t(c));
    return std::sqrt(sum / kCodes);
}

// An MXFP4 matrix [rows, cols] as `<expert><proj>.weight_packed` + `.weight_scale`, placed within its
// shard as `<disk_key><proj>...` sorts (disk_key: its expert's place on disk).
void mxfp4(SynthTensorList& t, const std::string& expert, const std::string& disk_key, const char* proj,
           int64_t rows, int64_t cols, bool expert_start) {
    // The exponent that makes rms(code) x 2^e = 1 / sqrt(cols), as synth_matrix_dist gives bf16 weights.
    const float target = synth_matrix_dist(kSynthProjGain, cols).std;
    const int e = kE8m0Bias + int(std::lround(std::log2(target / e2m1_uniform_rms())));
    const std::string packed = std::string(proj) + ".weight_packed",
                      scale = std::string(proj) + ".weight_scale";
    SynthTensor codes{expert + packed, {rows, cols / 2}, uniform_codes(0, UINT8_MAX), DType::u8};
    codes.file_key = disk_key + packed;
    codes.with_previous = !expert_start;  // an expert's tensors share a shard
    SynthTensor scales{expert + scale,
                       {rows, cols / kMxBlock},
                       uniform_codes(e - kScaleJitter, e + kScaleJitter),
                       DType::u8};
    scales.file_key = disk_key + scale;
    scales.with_previous = true;
    t.add(std::move(codes));
    t.add(std::move(scales));
}

// LatentMoE (docs/models.md 7.1): router, latent down/up projections and norm, routed MXFP4 experts in the
// latent width, shared experts at full width. The experts are listed in id order (which decides the shards)
// but sorted within their shard by a per-layer permutation.
void moe_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d) {
    const int experts = c["num_experts"];
    const int64_t ff = c["moe_intermediate_size"], latent = c["routed_expert_hidden_size"];
    const std::string moe = "block_sparse_moe.";
    t.matrix(moe + "gate", experts, d, kSynthRouterLogitStd);
    t.add({moe + "gate.e_score_correction_bias", {experts}, kSynthRouterBiasDist, DType::f32});
    t.matrix(moe + "routed_expert_down_proj", latent, d, kSynthProjGain);
    t.matrix(moe + "routed_expert_up_proj", d, latent, kSynthResidualGain);
    t.norm(moe + "routed_expert_norm", latent);
    const std::vector<int> disk_slot = random_permutation(experts, tensor_seed(0, t.prefix()));
    for (int e = 0; e < experts; ++e) {
        const std::string expert = fmt::format("{}experts.{}.", moe, e);
        const std::string disk_key = fmt::format("{}{}experts.{:06d}.", t.prefix(), moe, disk_slot[e]);
        mxfp4(t, expert, disk_key, "w1", ff, latent, true);
        mxfp4(t, expert, disk_key, "w3", ff, latent, false);
        mxfp4(t, expert, disk_key, "w2", latent, ff, false);
    }
    t.swiglu(moe + "shared_experts.", d, ff * int64_t(c["num_shared_experts"]));
}

std::vector<SynthTensor> kimi_k3_tensors(const nlohmann::json& config) {
    const nlohmann::json& c = config["text_config"];
    const nlohmann::json& lin = c["linear_attn_config"];
    const int64_t d = c["hidden_size"], vocab = c["vocab_size"];
    const int layers = c["num_hidden_layers"], first_dense = c["first_k_dense_replace"];
    const int64_t heads = lin["num_heads"];
    const std::string root = "language_model.model.";

    std::vector<SynthTensor> t;
    SynthTensorList top(t, root);
    top.add({"embed_tokens.weight", {vocab, d}, {0.0f, kSynthEmbedStd}});
    for (int l = 0; l < layers; ++l) {
        SynthTensorList layer(t, fmt::format("{}layers.{}.", root, l));
        if (synth_kimi_is_mla(lin, l))
            synth_mla_tensors(layer, c, d);
        else
            synth_kda_tensors(layer, lin, d, {(heads + kALogStride - 1) / kALogStride * kALogStride});
        if (l < first_dense)
            layer.swiglu("mlp.", d, c["intermediate_size"]);
        else
            moe_tensors(layer, c, d);
        layer.norm("input_layernorm", d);
        layer.norm("post_attention_layernorm", d);
        for (const char* res : {"self_attention_res", "mlp_res"}) {
            layer.norm(fmt::format("{}_norm", res), d);
            layer.matrix(fmt::format("{}_proj", res), 1, d, kSynthProjGain);
        }
    }
    top.norm("norm", d);
    top.norm("output_attn_res_norm", d);
    top.matrix("output_attn_res_proj", 1, d, kSynthProjGain);
    SynthTensorList(t, "language_model.").matrix("lm_head", vocab, d, kSynthProjGain);
    return t;
}

}  // namespace

extern const SynthArch kSynthKimiK3;
const SynthArch kSynthKimiK3{"kimi_k3", "moonshotai/Kimi-K3 (text model)", kimi_k3_config,
                             kimi_k3_generation_config, kimi_k3_tensors};

}  // namespace coli
