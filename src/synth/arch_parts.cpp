#include "synth/arch_parts.h"

#include <algorithm>

#include <fmt/format.h>

#include "formats/format.h"

namespace coli {
namespace {

constexpr ValueDist kFp8CodeDist{0.0f, 1.0f};  // e4m3 values of unit rms, scaled by the block's f32
constexpr float kScaleJitter = 0.1f;           // block scales vary by this fraction around their target
constexpr ValueDist kLayerNormBiasDist{0.0f, 0.05f};
constexpr ValueDist kALogDist{1.4f, 0.8f};    // A = exp(A_log) within ~[1, 16], as Kimi initializes it
constexpr ValueDist kDtBiasDist{0.0f, 0.1f};  // small next to the gate projection's output
constexpr int kKimiMlaPeriod = 4;             // one MLA layer in 4 (docs/models.md 5, 7)

int64_t fp8_blocks(int64_t n) {
    return (n + kFp8Block - 1) / kFp8Block;
}

// The MoE of a DeepSeek-V3 layer: routed experts (one shard each), the router, the shared experts.
void deepseek_moe_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d) {
    const int experts = c["n_routed_experts"], shared = c["n_shared_experts"];
    const int64_t ff = c["moe_intermediate_size"];
    for (int e = 0; e < experts; ++e) t.swiglu(fmt::format("mlp.experts.{}.", e), d, ff);
    t.matrix("mlp.gate", experts, d, kSynthRouterLogitStd);
    t.add({"mlp.gate.e_score_correction_bias", {experts}, kSynthRouterBiasDist, DType::f32});
    t.swiglu("mlp.shared_experts.", d, ff * shared);
}

}  // namespace

void SynthTensorList::add(SynthTensor t) {
    t.name = prefix_ + t.name;
    out_.push_back(std::move(t));
}

void SynthTensorList::matrix(const std::string& name, int64_t rows, int64_t cols, float gain) {
    add({name + ".weight", {rows, cols}, synth_matrix_dist(gain, cols)});
}

void SynthTensorList::norm(const std::string& name, int64_t n, std::optional<DType> dtype) {
    add({name + ".weight", {n}, kSynthNormDist, dtype});
}

void SynthTensorList::proj(const std::string& name, int64_t rows, int64_t cols, float gain, bool start) {
    if (proj_ == SynthProj::dense) {
        SynthTensor w{name + ".weight", {rows, cols}, synth_matrix_dist(gain, cols)};
        w.with_previous = !start;
        add(std::move(w));
        return;
    }
    SynthTensor codes{name + ".weight", {rows, cols}, kFp8CodeDist, DType::f8_e4m3};
    codes.with_previous = !start;
    add(std::move(codes));
    const float target = synth_matrix_dist(gain, cols).std / kFp8CodeDist.std;
    SynthTensor scale{name + ".weight_scale_inv",
                      {fp8_blocks(rows), fp8_blocks(cols)},
                      {target, target * kScaleJitter},
                      DType::f32};
    scale.with_previous = true;
    add(std::move(scale));
}

void SynthTensorList::swiglu(const std::string& where, int64_t d, int64_t ff, SynthSwigluNames names) {
    proj(where + names.gate, ff, d, kSynthProjGain);
    proj(where + names.up, ff, d, kSynthProjGain, false);
    proj(where + names.down, d, ff, kSynthResidualGain, false);
}

void synth_mla_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d) {
    const int64_t heads = c["num_attention_heads"], kv_lora = c["kv_lora_rank"];
    const int64_t nope = c["qk_nope_head_dim"], rope = c["qk_rope_head_dim"], v = c["v_head_dim"];
    const auto q = c.find("q_lora_rank");  // absent or null: a plain q_proj (Kimi Linear)
    const int64_t q_lora = q != c.end() && q->is_number() ? q->get<int64_t>() : 0;
    if (q_lora > 0) {
        t.proj("self_attn.q_a_proj", q_lora, d, kSynthProjGain);
        t.norm("self_attn.q_a_layernorm", q_lora);
        t.proj("self_attn.q_b_proj", heads * (nope + rope), q_lora, kSynthProjGain);
    } else {
        t.proj("self_attn.q_proj", heads * (nope + rope), d, kSynthProjGain);
    }
    t.proj("self_attn.kv_a_proj_with_mqa", kv_lora + rope, d, kSynthProjGain);
    t.norm("self_attn.kv_a_layernorm", kv_lora);
    t.proj("self_attn.kv_b_proj", heads * (nope + v), kv_lora, kSynthProjGain);
    t.proj("self_attn.o_proj", d, heads * v, kSynthResidualGain);
    if (c.value("mla_use_output_gate", false)) t.proj("self_attn.g_proj", heads * v, d, kSynthProjGain);
}

void synth_indexer_tensors(SynthTensorList& t, const nlohmann::json& c, int64_t d, SynthProj proj) {
    const int64_t q_lora = c["q_lora_rank"], heads = c["index_n_heads"], dim = c["index_head_dim"];
    SynthTensorList ix = t.stored_as(proj);
    ix.proj("self_attn.indexer.wq_b", heads * dim, q_lora, kSynthProjGain);
    ix.proj("self_attn.indexer.wk", dim, d, kSynthProjGain);
    ix.add({"self_attn.indexer.k_norm.weight", {dim}, kSynthNormDist, DType::f32});
    ix.add({"self_attn.indexer.k_norm.bias", {dim}, kLayerNormBiasDist, DType::f32});
    ix.matrix("self_attn.indexer.weights_proj", heads, d, kSynthProjGain);
}

void synth_kda_tensors(SynthTensorList& t, const nlohmann::json& lin, int64_t d,
                       const std::vector<int64_t>& a_log_shape) {
    const int64_t heads = lin["num_heads"], head_dim = lin["head_dim"],
                  kernel = lin["short_conv_kernel_size"];
    const int64_t p = heads * head_dim;  // [n, P]: the projections' width
    for (const char* x : {"q", "k", "v"}) {
        t.matrix(fmt::format("self_attn.{}_proj", x), p, d, kSynthProjGain);
        t.add({fmt::format("self_attn.{}_conv1d.weight", x),
               {p, 1, kernel},
               synth_matrix_dist(kSynthProjGain, kernel),
               DType::f32});
    }
    t.matrix("self_attn.f_a_proj", head_dim, d, kSynthProjGain);
    t.matrix("self_attn.f_b_proj", p, head_dim, kSynthProjGain);
    t.add({"self_attn.dt_bias", {p}, kDtBiasDist, DType::f32});
    t.add({"self_attn.A_log", a_log_shape, kALogDist, DType::f32, heads});
    t.matrix("self_attn.b_proj", heads, d, kSynthProjGain);
    if (lin.value("use_full_rank_gate", false)) {
        t.matrix("self_attn.g_proj", p, d, kSynthProjGain);
    } else {
        t.matrix("self_attn.g_a_proj", head_dim, d, kSynthProjGain);
        t.matrix("self_attn.g_b_proj", p, head_dim, kSynthProjGain);
    }
    t.norm("self_attn.o_norm", head_dim, DType::f32);
    t.matrix("self_attn.o_proj", d, p, kSynthResidualGain);
}

void synth_kimi_layer_lists(nlohmann::json& lin, int n_layers) {
    nlohmann::json kda = nlohmann::json::array(), full = nlohmann::json::array();
    for (int l = 0; l < n_layers; ++l)
        (l % kKimiMlaPeriod == kKimiMlaPeriod - 1 || l == n_layers - 1 ? full : kda).push_back(l + 1);
    lin["kda_layers"] = kda;
    lin["full_attn_layers"] = full;
}

bool synth_kimi_is_mla(const nlohmann::json& lin, int layer) {
    const std::vector<int> full = lin["full_attn_layers"];  // 1-indexed
    return std::find(full.begin(), full.end(), layer + 1) != full.end();
}

std::vector<SynthTensor> synth_deepseek_tensors(const nlohmann::json& c, SynthProj indexer) {
    const int64_t d = c["hidden_size"], vocab = c["vocab_size"], dense_ff = c["intermediate_size"];
    const int layers = c["num_hidden_layers"], dense_layers = c["first_k_dense_replace"];
    const int mtp_layers = c.value("num_nextn_predict_layers", 0);

    std::vector<SynthTensor> t;
    SynthTensorList model(t, "model.");
    model.add({"embed_tokens.weight", {vocab, d}, {0.0f, kSynthEmbedStd}});
    for (int l = 0; l < layers + mtp_layers; ++l) {
        SynthTensorList layer(t, fmt::format("model.layers.{}.", l), SynthProj::fp8_block);
        synth_mla_tensors(layer, c, d);
        if (c.contains("index_topk")) synth_indexer_tensors(layer, c, d, indexer);
        if (l < dense_layers)
            layer.swiglu("mlp.", d, dense_ff);
        else
            deepseek_moe_tensors(layer, c, d);
        layer.norm("input_layernorm", d);
        layer.norm("post_attention_layernorm", d);
        if (l < layers) continue;
        // An MTP layer's own tensors (docs/models.md 2.5); the copies of the embedding and lm_head the
        // release also keeps under it are left out: the engine reads the main model's.
        layer.norm("enorm", d);
        layer.norm("hnorm", d);
        layer.matrix("eh_proj", d, 2 * d, kSynthProjGain);
        layer.norm("shared_head.norm", d);
    }
    model.norm("norm", d);
    SynthTensorList top(t, "");
    top.matrix("lm_head", vocab, d, kSynthProjGain);
    return t;
}

}  // namespace coli
