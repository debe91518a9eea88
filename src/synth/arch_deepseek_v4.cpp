// DeepSeek-V4 (deepseek-ai/DeepSeek-V4-Flash; docs/models.md 8) with random weights, in the layout the hub
// publishes it in: the original config.json spelling (compress_ratios per layer plus the MTP layer's entry,
// num_hash_layers, qk_rope_head_dim, rope_scaling, expert_dtype fp4, quantization_config fp8 e4m3 with
// ue8m0 128 x 128 block scales) and the original tensor names (`embed.weight`, `layers.L.attn.wq_a.weight`,
// `layers.L.ffn.experts.E.w1.weight`, `hc_head_fn`, ...), stored as the release stores them (8.9, 9.6):
//   dense attention, indexer-query and shared-expert weights  F8_E4M3 + `.scale` F8_E8M0 per 128 x 128 block
//   routed experts                                            MXFP4: I8 [out, in/2] + `.scale` F8_E8M0 [out,
//   in/32] embed, head, router, compressor / indexer projections     --dtype (BF16, as released) norms,
//   sinks, ape, hyper-connection fn / base / scale, router bias   F32 tid2eid of the hash-routed layers I64,
//   experts drawn uniformly
// --scale divides the model width, the heads, the low ranks, the vocabulary, the expert width and the
// indexer's heads and top-k; per-head widths (head_dim 512, 64 rotated dims, indexer head 128), the sliding
// window (128) and the compression ratios (CSA 4, HCA 128) stay the real ones, so that every cache path has
// its real shape. --layers keeps the first layers of the real schedule (two sliding layers, then CSA and HCA
// alternating; the first three hash-routed), so that 4 layers hold sliding, CSA and HCA attention and hash
// and learned routing. The MTP layer is declared (num_nextn_predict_layers, its compress ratio) but its
// `mtp.*` tensors are not written: the engine never reads them.
//
// Value scales follow arch_olmoe.cpp: a unit embedding, 1/sqrt(fan_in) matrices, residual branches (wo_b,
// the experts' w2) that add ~10% of a stream, router logits of std 3. FP8 weights draw codes of unit rms
// and one E8M0 exponent per block (+-1) that brings them to the matrix's rms; MXFP4 experts as
// arch_kimi_k3.cpp. The hyper-connection weights keep the mixing near its middle (sigmoid and softmax
// arguments of order 1), so the streams stay bounded over any number of layers.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format.h"
#include "synth/synth_arch.h"

namespace coli {
namespace {

// V4-Flash's config.json values (docs/models.md 8.1; tests/models/deepseek_v4_config_test.cpp).
constexpr int64_t kHidden = 4096;
constexpr int kLayers = 43;
constexpr int64_t kVocab = 129280;
constexpr int64_t kHeads = 64;
constexpr int64_t kHeadDim = 512, kRopeDim = 64;
constexpr int64_t kQLoraRank = 1024;
constexpr int64_t kOGroups = 8, kOLoraRank = 1024;
constexpr int kExperts = 256, kTopK = 6;
constexpr int64_t kMoeIntermediate = 2048;
constexpr int kSharedExperts = 1;
constexpr double kRoutedScaling = 1.5;
constexpr int kHashLayers = 3;
constexpr double kSwigluLimit = 10.0;
constexpr int kSlidingWindow = 128;
constexpr int kSlidingLayers = 2;              // the first layers have no compressor
constexpr int kCsaRatio = 4, kHcaRatio = 128;  // then CSA on even layers, HCA on odd ones
constexpr int kMtpLayers = 1, kMtpRatio = 0;
constexpr double kRopeTheta = 10000, kCompressRopeTheta = 160000;
constexpr double kYarnFactor = 16, kYarnOriginalCtx = 65536, kYarnBetaFast = 32, kYarnBetaSlow = 1;
constexpr int64_t kIndexHeads = 64, kIndexDim = 128, kIndexTopK = 512;
constexpr int kHcMult = 4, kHcSinkhornIters = 20;
constexpr double kHcEps = 1e-6, kRmsEps = 1e-6;
constexpr int64_t kMaxPositions = 1048576;
constexpr int kBos = 0, kEos = 1;
constexpr int kHcParts = 3;  // hc_*_scale: pre, post, comb

// Standard deviations (see the comment at the top of the file).
constexpr float kEmbedStd = 1.0f;
constexpr float kProjGain = 1.0f;
constexpr float kResidualGain = 0.1f;
constexpr float kRouterLogitStd = 3.0f;
constexpr ValueDist kNormDist{1.0f, 0.05f};
constexpr ValueDist kFp8CodeDist{0.0f, 1.0f};      // e4m3 values of unit rms, scaled by the block exponent
constexpr ValueDist kSinkDist{0.0f, 1.0f};         // a sink logit of the order of a score
constexpr ValueDist kApeDist{0.0f, 0.5f};          // position biases of the compressor's softmax
constexpr ValueDist kHcBaseDist{0.0f, 0.5f};       // hyper-connection biases
constexpr ValueDist kHcScaleDist{0.5f, 0.1f};      // hyper-connection scales
constexpr ValueDist kRouterBiasDist{0.0f, 0.01f};  // small next to the scores
constexpr int kE8m0Bias = 127;
constexpr int kScaleJitter = 1;  // E8M0 exponents vary by +-1 around the one that gives the target rms
// tid2eid's integers are floor(uniform) over [0, experts); narrowed by this factor so that rounding of the
// interval's ends in float can never give `experts`.
constexpr float kIdRangeMargin = 0.9999f;

int attn_ratio(int layer) {
    if (layer < kSlidingLayers) return 0;
    return layer % 2 == 0 ? kCsaRatio : kHcaRatio;
}

nlohmann::json deepseek_v4_config(const SynthOptions& o) {
    check(o.scale >= 1, "--scale must be >= 1, got {}", o.scale);
    check(o.layers >= 0 && o.experts >= 0, "--layers and --experts must be positive (0 = the real model's)");
    const int layers = o.layers > 0 ? o.layers : kLayers;
    const int experts = o.experts > 0 ? o.experts : kExperts;
    const int64_t d = synth_scaled(kHidden, o.scale, "hidden_size");
    const int64_t ff = synth_scaled(kMoeIntermediate, o.scale, "moe_intermediate_size");
    check(d % kMxBlock == 0 && ff % kMxBlock == 0,
          "--scale {}: the experts' widths {} and {} must be multiples of the MXFP4 block {}; use at most 64",
          o.scale, d, ff, kMxBlock);
    const int64_t heads = synth_scaled(kHeads, o.scale, "num_attention_heads");

    nlohmann::json ratios = nlohmann::json::array();
    for (int l = 0; l < layers; ++l) ratios.push_back(attn_ratio(l));
    for (int m = 0; m < kMtpLayers; ++m) ratios.push_back(kMtpRatio);
    return {
        {"architectures", {"DeepseekV4ForCausalLM"}},
        {"model_type", "deepseek_v4"},
        {"vocab_size", synth_scaled(kVocab, o.scale, "vocab_size")},
        {"hidden_size", d},
        {"num_hidden_layers", layers},
        {"num_attention_heads", heads},
        {"num_key_value_heads", 1},
        {"head_dim", kHeadDim},
        {"qk_rope_head_dim", kRopeDim},
        {"q_lora_rank", synth_scaled(kQLoraRank, o.scale, "q_lora_rank")},
        {"o_groups", std::min(kOGroups, heads)},
        {"o_lora_rank", synth_scaled(kOLoraRank, o.scale, "o_lora_rank")},
        {"n_routed_experts", experts},
        {"num_experts_per_tok", std::min(kTopK, experts)},
        {"n_shared_experts", kSharedExperts},
        {"moe_intermediate_size", ff},
        {"scoring_func", "sqrtsoftplus"},
        {"topk_method", "noaux_tc"},
        {"norm_topk_prob", true},
        {"routed_scaling_factor", kRoutedScaling},
        {"num_hash_layers", std::min(kHashLayers, layers)},
        {"swiglu_limit", kSwigluLimit},
        {"sliding_window", kSlidingWindow},
        {"compress_ratios", ratios},
        {"compress_rope_theta", kCompressRopeTheta},
        {"rope_theta", kRopeTheta},
        {"rope_scaling",
         {{"type", "yarn"},
          {"factor", kYarnFactor},
          {"original_max_position_embeddings", kYarnOriginalCtx},
          {"beta_fast", kYarnBetaFast},
          {"beta_slow", kYarnBetaSlow}}},
        {"index_n_heads", synth_scaled(kIndexHeads, o.scale, "index_n_heads")},
        {"index_head_dim", kIndexDim},
        {"index_topk", synth_scaled(kIndexTopK, o.scale, "index_topk")},
        {"hc_mult", kHcMult},
        {"hc_sinkhorn_iters", kHcSinkhornIters},
        {"hc_eps", kHcEps},
        {"rms_norm_eps", kRmsEps},
        {"max_position_embeddings", kMaxPositions},
        {"num_nextn_predict_layers", kMtpLayers},
        {"hidden_act", "silu"},
        {"tie_word_embeddings", false},
        {"bos_token_id", kBos},
        {"eos_token_id", kEos},
        {"expert_dtype", "fp4"},
        {"torch_dtype", synth_torch_dtype(o.dtype)},
        {"quantization_config",
         {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"scale_fmt", "ue8m0"},
          {"weight_block_size", {kFp8Block, kFp8Block}},
          {"activation_scheme", "dynamic"}}},
    };
}

nlohmann::json deepseek_v4_generation_config(const nlohmann::json& c) {
    return {{"bos_token_id", c["bos_token_id"]}, {"eos_token_id", c["eos_token_id"]}};
}

// RMS of an E2M1 code drawn uniformly from the 16 codes.
float e2m1_uniform_rms() {
    constexpr int kCodes = 16;
    float sum = 0;
    for (int c = 0; c < kCodes; ++c) sum += e2m1_to_f32(uint8_t(c)) * e2m1_to_f32(uint8_t(c));
    return std::sqrt(sum / kCodes);
}

// E8M0 exponents around the one that turns codes of rms `code_rms` into weights of rms `target`.
ValueDist e8m0_dist(float target, float code_rms) {
    const int e = kE8m0Bias + int(std::lround(std::log2(target / code_rms)));
    return uniform_codes(e - kScaleJitter, e + kScaleJitter);
}

int64_t blocks(int64_t n, int64_t block) {
    return (n + block - 1) / block;
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
    void f32(const std::string& name, std::vector<int64_t> shape, ValueDist dist) {
        add({name, std::move(shape), dist, DType::f32});
    }
    void norm(const std::string& name, int64_t n) { f32(name + ".weight", {n}, kNormDist); }
    // A block-FP8 matrix: `<name>.weight` F8_E4M3 [rows, cols] and `<name>.scale` F8_E8M0 per 128 x 128.
    void fp8(const std::string& name, int64_t rows, int64_t cols, float gain) {
        add({name + ".weight", {rows, cols}, kFp8CodeDist, DType::f8_e4m3});
        SynthTensor scale{name + ".scale",
                          {blocks(rows, kFp8Block), blocks(cols, kFp8Block)},
                          e8m0_dist(synth_matrix_dist(gain, cols).std, kFp8CodeDist.std),
                          DType::f8_e8m0};
        scale.with_previous = true;
        add(std::move(scale));
    }
    // An MXFP4 matrix: `<name>.weight` I8 [rows, cols / 2] and `<name>.scale` F8_E8M0 [rows, cols / 32].
    void mxfp4(const std::string& name, int64_t rows, int64_t cols, float gain, bool expert_start) {
        SynthTensor codes{name + ".weight", {rows, cols / 2}, uniform_codes(0, UINT8_MAX), DType::i8};
        codes.with_previous = !expert_start;  // an expert's tensors share a shard
        add(std::move(codes));
        SynthTensor scale{name + ".scale",
                          {rows, cols / kMxBlock},
                          e8m0_dist(synth_matrix_dist(gain, cols).std, e2m1_uniform_rms()),
                          DType::f8_e8m0};
        scale.with_previous = true;
        add(std::move(scale));
    }
    // Hyper-connection weights of one sublayer (8.7): fn [(2 + S) S, S D], base [(2 + S) S], scale [3].
    void hyper_connection(const std::string& what, int64_t d) {
        const int64_t s = kHcMult, mix = (2 + s) * s;
        f32(fmt::format("hc_{}_fn", what), {mix, s * d}, synth_matrix_dist(kProjGain, s * d));
        f32(fmt::format("hc_{}_base", what), {mix}, kHcBaseDist);
        f32(fmt::format("hc_{}_scale", what), {kHcParts}, kHcScaleDist);
    }

private:
    std::vector<SynthTensor>& out_;
    std::string prefix_;
};

// A compressor (8.4) under `where`: wkv, wgate [c w, D] (--dtype), ape [ratio, c w] and norm [w] (F32).
void compressor_tensors(LayerTensors& t, const std::string& where, int64_t d, int64_t width, int ratio) {
    const int64_t c = ratio == kCsaRatio ? 2 : 1;  // CSA's overlapping windows carry two halves
    t.matrix(where + "wkv", c * width, d, kProjGain);
    t.matrix(where + "wgate", c * width, d, kProjGain);
    t.f32(where + "ape", {ratio, c * width}, kApeDist);
    t.norm(where + "norm", width);
}

void attention_tensors(LayerTensors& t, const nlohmann::json& c, int64_t d, int ratio) {
    const int64_t heads = c["num_attention_heads"], hd = c["head_dim"], q_lora = c["q_lora_rank"];
    const int64_t groups = c["o_groups"], o_lora = c["o_lora_rank"];
    t.fp8("attn.wq_a", q_lora, d, kProjGain);
    t.norm("attn.q_norm", q_lora);
    t.fp8("attn.wq_b", heads * hd, q_lora, kProjGain);
    t.fp8("attn.wkv", hd, d, kProjGain);
    t.norm("attn.norm", hd);
    t.f32("attn.attn_sink", {heads}, kSinkDist);
    t.fp8("attn.wo_a", groups * o_lora, heads * hd / groups, kProjGain);
    t.fp8("attn.wo_b", d, groups * o_lora, kResidualGain);
    if (ratio == 0) return;
    compressor_tensors(t, "attn.compressor.", d, hd, ratio);
    if (ratio != kCsaRatio) return;
    const int64_t index_heads = c["index_n_heads"], index_dim = c["index_head_dim"];
    compressor_tensors(t, "attn.indexer.compressor.", d, index_dim, ratio);
    t.fp8("attn.indexer.wq_b", index_heads * index_dim, q_lora, kProjGain);
    t.matrix("attn.indexer.weights_proj", index_heads, d, kProjGain);
}

void moe_tensors(LayerTensors& t, const nlohmann::json& c, int64_t d, bool hash) {
    const int experts = c["n_routed_experts"], top_k = c["num_experts_per_tok"];
    const int64_t ff = c["moe_intermediate_size"], vocab = c["vocab_size"];
    t.matrix("ffn.gate", experts, d, kRouterLogitStd);
    if (hash) {
        const ValueDist ids = uniform_codes(0, experts - 1);
        t.add({"ffn.gate.tid2eid", {vocab, top_k}, {ids.center, ids.std * kIdRangeMargin}, DType::i64});
    } else {
        t.f32("ffn.gate.bias", {experts}, kRouterBiasDist);
    }
    for (int e = 0; e < experts; ++e) {
        const std::string expert = fmt::format("ffn.experts.{}.", e);
        t.mxfp4(expert + "w1", ff, d, kProjGain, true);
        t.mxfp4(expert + "w2", d, ff, kResidualGain, false);
        t.mxfp4(expert + "w3", ff, d, kProjGain, false);
    }
    t.fp8("ffn.shared_experts.w1", ff, d, kProjGain);
    t.fp8("ffn.shared_experts.w2", d, ff, kResidualGain);
    t.fp8("ffn.shared_experts.w3", ff, d, kProjGain);
}

std::vector<SynthTensor> deepseek_v4_tensors(const nlohmann::json& c) {
    const int64_t d = c["hidden_size"], vocab = c["vocab_size"];
    const int layers = c["num_hidden_layers"], hash_layers = c["num_hash_layers"];
    const std::vector<int> ratios = c["compress_ratios"];

    std::vector<SynthTensor> t;
    LayerTensors top(t, "");
    top.add({"embed.weight", {vocab, d}, {0.0f, kEmbedStd}});
    for (int l = 0; l < layers; ++l) {
        LayerTensors layer(t, fmt::format("layers.{}.", l));
        layer.norm("attn_norm", d);
        layer.norm("ffn_norm", d);
        layer.hyper_connection("attn", d);
        layer.hyper_connection("ffn", d);
        attention_tensors(layer, c, d, ratios[size_t(l)]);
        moe_tensors(layer, c, d, l < hash_layers);
    }
    top.norm("norm", d);
    top.f32("hc_head_fn", {kHcMult, kHcMult * d}, synth_matrix_dist(kProjGain, kHcMult * d));
    top.f32("hc_head_base", {kHcMult}, kHcBaseDist);
    top.f32("hc_head_scale", {1}, kHcScaleDist);
    top.matrix("head", vocab, d, kProjGain);
    return t;
}

}  // namespace

extern const SynthArch kSynthDeepseekV4;
const SynthArch kSynthDeepseekV4{"deepseek_v4", "deepseek-ai/DeepSeek-V4-Flash (original release layout)",
                                 deepseek_v4_config, deepseek_v4_generation_config, deepseek_v4_tensors};

}  // namespace coli
