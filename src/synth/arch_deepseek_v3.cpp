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
// of the real schedule (three dense, then MoE), so that 4 layers hold both kinds. The MTP layer is declared
// (num_nextn_predict_layers) but its tensors are not written: the engine never reads them (2.5).
//
// Value scales follow arch_olmoe.cpp: a unit embedding, 1/sqrt(fan_in) matrices, residual branches (o_proj,
// down_proj) that add ~10% of a stream, router logits of std 3. FP8 weights draw codes of unit rms and one
// f32 scale per block near the matrix's rms.
//
// `--arch deepseek_v32` (deepseek-ai/DeepSeek-V3.2; docs/models.md 3) is the same model plus the DSA
// lightning indexer in every layer (64 heads of 128, top 2048 keys; --scale divides the heads and the
// top-k): `self_attn.indexer.wq_b` and `.wk` block FP8 like the other projections, `.k_norm.weight` and
// `.bias` F32 (the release's inference code keeps its LayerNorm in f32), `.weights_proj` in --dtype.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format.h"
#include "synth/synth_arch.h"

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

// Standard deviations (see the comment at the top of the file).
constexpr float kEmbedStd = 1.0f;
constexpr float kProjGain = 1.0f;
constexpr float kResidualGain = 0.1f;
constexpr float kRouterLogitStd = 3.0f;
constexpr ValueDist kNormDist{1.0f, 0.05f};
constexpr ValueDist kFp8CodeDist{0.0f, 1.0f};      // e4m3 values of unit rms, scaled by the block's f32
constexpr float kScaleJitter = 0.1f;               // block scales vary by this fraction around their target
constexpr ValueDist kRouterBiasDist{0.0f, 0.01f};  // small next to the scores
constexpr ValueDist kLayerNormBiasDist{0.0f, 0.05f};

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

int64_t blocks(int64_t n) {
    return (n + kFp8Block - 1) / kFp8Block;
}

// Appends tensors named under one prefix (a layer's, or the model's) to the checkpoint's list.
class LayerTensors {
public:
    LayerTensors(std::vector<SynthTensor>& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

    void add(SynthTensor t) {
        t.name = prefix_ + t.name;
        out_.push_back(std::move(t));
    }
    // A matrix in the --dtype (BF16 as released).
    void matrix(const std::string& name, int64_t rows, int64_t cols, float gain) {
        add({name + ".weight", {rows, cols}, synth_matrix_dist(gain, cols)});
    }
    void norm(const std::string& name, int64_t n) { add({name + ".weight", {n}, kNormDist}); }
    // A block-FP8 matrix: `<name>.weight` F8_E4M3 [rows, cols] and `<name>.weight_scale_inv` F32 per 128 x
    // 128 block. `start` false keeps it in the shard of the tensor before it (the parts of one expert).
    void fp8(const std::string& name, int64_t rows, int64_t cols, float gain, bool start = true) {
        SynthTensor codes{name + ".weight", {rows, cols}, kFp8CodeDist, DType::f8_e4m3};
        codes.with_previous = !start;
        add(std::move(codes));
        const float target = synth_matrix_dist(gain, cols).std / kFp8CodeDist.std;
        SynthTensor scale{name + ".weight_scale_inv",
                          {blocks(rows), blocks(cols)},
                          {target, target * kScaleJitter},
                          DType::f32};
        scale.with_previous = true;
        add(std::move(scale));
    }
    // A SwiGLU MLP of width `ff` under `where`: gate_proj, up_proj, down_proj in FP8, one shard.
    void swiglu(const std::string& where, int64_t d, int64_t ff) {
        fp8(where + "gate_proj", ff, d, kProjGain);
        fp8(where + "up_proj", ff, d, kProjGain, false);
        fp8(where + "down_proj", d, ff, kResidualGain, false);
    }

private:
    std::vector<SynthTensor>& out_;
    std::string prefix_;
};

void attention_tensors(LayerTensors& t, const nlohmann::json& c, int64_t d) {
    const int64_t heads = c["num_attention_heads"], q_lora = c["q_lora_rank"], kv_lora = c["kv_lora_rank"];
    const int64_t nope = c["qk_nope_head_dim"], rope = c["qk_rope_head_dim"], v = c["v_head_dim"];
    t.fp8("self_attn.q_a_proj", q_lora, d, kProjGain);
    t.norm("self_attn.q_a_layernorm", q_lora);
    t.fp8("self_attn.q_b_proj", heads * (nope + rope), q_lora, kProjGain);
    t.fp8("self_attn.kv_a_proj_with_mqa", kv_lora + rope, d, kProjGain);
    t.norm("self_attn.kv_a_layernorm", kv_lora);
    t.fp8("self_attn.kv_b_proj", heads * (nope + v), kv_lora, kProjGain);
    t.fp8("self_attn.o_proj", d, heads * v, kResidualGain);
    if (!c.contains("index_topk")) return;
    const int64_t index_heads = c["index_n_heads"], index_dim = c["index_head_dim"];
    t.fp8("self_attn.indexer.wq_b", index_heads * index_dim, q_lora, kProjGain);
    t.fp8("self_attn.indexer.wk", index_dim, d, kProjGain);
    t.add({"self_attn.indexer.k_norm.weight", {index_dim}, kNormDist, DType::f32});
    t.add({"self_attn.indexer.k_norm.bias", {index_dim}, kLayerNormBiasDist, DType::f32});
    t.matrix("self_attn.indexer.weights_proj", index_heads, d, kProjGain);
}

void moe_tensors(LayerTensors& t, const nlohmann::json& c, int64_t d) {
    const int experts = c["n_routed_experts"], shared = c["n_shared_experts"];
    const int64_t ff = c["moe_intermediate_size"];
    for (int e = 0; e < experts; ++e) t.swiglu(fmt::format("mlp.experts.{}.", e), d, ff);
    t.matrix("mlp.gate", experts, d, kRouterLogitStd);
    t.add({"mlp.gate.e_score_correction_bias", {experts}, kRouterBiasDist, DType::f32});
    t.swiglu("mlp.shared_experts.", d, ff * shared);
}

// In the order of transformers' state_dict: embedding, then per layer attention, MLP, the two norms.
std::vector<SynthTensor> deepseek_v3_tensors(const nlohmann::json& c) {
    const int64_t d = c["hidden_size"], vocab = c["vocab_size"], dense_ff = c["intermediate_size"];
    const int layers = c["num_hidden_layers"], dense_layers = c["first_k_dense_replace"];

    std::vector<SynthTensor> t;
    LayerTensors model(t, "model.");
    model.add({"embed_tokens.weight", {vocab, d}, {0.0f, kEmbedStd}});
    for (int l = 0; l < layers; ++l) {
        LayerTensors layer(t, fmt::format("model.layers.{}.", l));
        attention_tensors(layer, c, d);
        if (l < dense_layers)
            layer.swiglu("mlp.", d, dense_ff);
        else
            moe_tensors(layer, c, d);
        layer.norm("input_layernorm", d);
        layer.norm("post_attention_layernorm", d);
    }
    model.norm("norm", d);
    LayerTensors top(t, "");
    top.matrix("lm_head", vocab, d, kProjGain);
    return t;
}

}  // namespace

extern const SynthArch kSynthDeepseekV3;
const SynthArch kSynthDeepseekV3{"deepseek_v3", "deepseek-ai/DeepSeek-V3 (FP8 release layout)",
                                 deepseek_v3_config, deepseek_v3_generation_config, deepseek_v3_tensors};
extern const SynthArch kSynthDeepseekV32;
const SynthArch kSynthDeepseekV32{"deepseek_v32", "deepseek-ai/DeepSeek-V3.2 (FP8 release layout)",
                                  deepseek_v32_config, deepseek_v3_generation_config, deepseek_v3_tensors};

}  // namespace coli
