// `coli synth --arch kimi_linear`: the checkpoint has the layout of docs/models.md 5 (KDA and NoPE-MLA layers
// named as its table names them, a dense layer 0 under `mlp.`, MoE experts as `w1`/`w3`/`w2`), config.json
// has Kimi-Linear-48B-A3B's values (5) with its 1-indexed layer lists, and `coli run` runs it on the CPU with
// routing spread over the experts. The expected names and shapes are written out here from docs/models.md 5,
// with the dimensions divided by the --scale.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "cli/coli_exec.h"
#include "cli/synth_check.h"
#include "common/process.h"
#include "io/checkpoint.h"
#include "synth/synth_arch.h"

namespace coli {
namespace {

// docs/models.md 5's dimensions divided by kScale; head dims and the conv kernel are not widths: kept.
constexpr int kScale = 16;
constexpr int64_t D = 2304 / kScale, kVocab = 163840 / kScale, H = 32 / kScale;
constexpr int64_t kKvLora = 512 / kScale;
constexpr int64_t kNope = 128, kRope = 64, kV = 128, kHeadDim = 128, kConv = 4;
constexpr int64_t P = H * kHeadDim;  // KDA projection width
constexpr int64_t kDenseFfn = 9216 / kScale, kExpertFfn = 1024 / kScale;
constexpr int kLayers = 4;  // 0-indexed: KDA 0-2, MLA 3 (the real pattern's first four); dense 0, MoE 1-3
constexpr int kMlaLayer = 3;
constexpr int kExperts = 16;

using test::ExpectedTensor;

// docs/models.md 5's tensor list for kLayers layers.
std::map<std::string, ExpectedTensor> spec_tensors() {
    const DType bf = DType::bf16, f32 = DType::f32;
    std::map<std::string, ExpectedTensor> t;
    const auto swiglu = [&](const std::string& p, const char* gate, const char* up, const char* down,
                            int64_t ff) {
        t[p + gate + ".weight"] = {bf, {ff, D}};
        t[p + up + ".weight"] = {bf, {ff, D}};
        t[p + down + ".weight"] = {bf, {D, ff}};
    };
    t["model.embed_tokens.weight"] = {bf, {kVocab, D}};
    t["model.norm.weight"] = {bf, {D}};
    t["lm_head.weight"] = {bf, {kVocab, D}};
    for (int l = 0; l < kLayers; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l), a = p + "self_attn.";
        t[p + "input_layernorm.weight"] = {bf, {D}};
        t[p + "post_attention_layernorm.weight"] = {bf, {D}};
        if (l == kMlaLayer) {
            t[a + "q_proj.weight"] = {bf, {H * (kNope + kRope), D}};  // no q LoRA
            t[a + "kv_a_proj_with_mqa.weight"] = {bf, {kKvLora + kRope, D}};
            t[a + "kv_a_layernorm.weight"] = {bf, {kKvLora}};
            t[a + "kv_b_proj.weight"] = {bf, {H * (kNope + kV), kKvLora}};
            t[a + "o_proj.weight"] = {bf, {D, H * kV}};
        } else {
            for (const char* x : {"q", "k", "v"}) {
                t[a + x + "_proj.weight"] = {bf, {P, D}};
                t[a + x + "_conv1d.weight"] = {f32, {P, 1, kConv}};
            }
            t[a + "f_a_proj.weight"] = {bf, {kHeadDim, D}};
            t[a + "f_b_proj.weight"] = {bf, {P, kHeadDim}};
            t[a + "dt_bias"] = {f32, {P}};
            t[a + "A_log"] = {f32, {1, 1, H, 1}};
            t[a + "b_proj.weight"] = {bf, {H, D}};
            t[a + "g_a_proj.weight"] = {bf, {kHeadDim, D}};
            t[a + "g_b_proj.weight"] = {bf, {P, kHeadDim}};
            t[a + "o_norm.weight"] = {f32, {kHeadDim}};
            t[a + "o_proj.weight"] = {bf, {D, P}};
        }
        if (l == 0) {
            swiglu(p + "mlp.", "gate_proj", "up_proj", "down_proj", kDenseFfn);
            continue;
        }
        const std::string moe = p + "block_sparse_moe.";
        t[moe + "gate.weight"] = {bf, {kExperts, D}};
        t[moe + "gate.e_score_correction_bias"] = {f32, {kExperts}};
        for (int e = 0; e < kExperts; ++e)
            swiglu(fmt::format("{}experts.{}.", moe, e), "w1", "w3", "w2", kExpertFfn);
        swiglu(moe + "shared_experts.", "gate_proj", "up_proj", "down_proj", kExpertFfn);  // one shared
    }
    return t;
}

class SynthKimiLinear : public test::SynthCheckpointTest<SynthKimiLinear> {
protected:
    static void SetUpTestSuite() {
        synth("synth-kimi-linear", {"--arch", "kimi_linear", "--scale", std::to_string(kScale), "--layers",
                                    std::to_string(kLayers), "--experts", std::to_string(kExperts)});
    }
};

TEST_F(SynthKimiLinear, TensorsAreSpecSectionFive) {
    test::expect_tensors(*ckpt_, spec_tensors());
}

TEST_F(SynthKimiLinear, ConfigIsKimiLinear) {
    const nlohmann::json& c = ckpt_->config();
    EXPECT_EQ(c["model_type"], "kimi_linear");
    EXPECT_EQ(c["architectures"][0], "KimiLinearForCausalLM");
    EXPECT_EQ(c["hidden_size"], D);
    EXPECT_EQ(c["num_hidden_layers"], kLayers);
    EXPECT_EQ(c["vocab_size"], kVocab);
    EXPECT_EQ(c["num_attention_heads"], H);
    EXPECT_TRUE(c["q_lora_rank"].is_null());
    EXPECT_EQ(c["kv_lora_rank"], kKvLora);
    EXPECT_EQ(c["qk_nope_head_dim"], kNope);
    EXPECT_EQ(c["qk_rope_head_dim"], kRope);
    EXPECT_EQ(c["v_head_dim"], kV);
    EXPECT_EQ(c["mla_use_nope"], true);
    const nlohmann::json& la = c["linear_attn_config"];
    EXPECT_EQ(la["num_heads"], H);
    EXPECT_EQ(la["head_dim"], kHeadDim);
    EXPECT_EQ(la["short_conv_kernel_size"], kConv);
    EXPECT_EQ(la["kda_layers"], nlohmann::json::array({1, 2, 3}));  // 1-indexed
    EXPECT_EQ(la["full_attn_layers"], nlohmann::json::array({kMlaLayer + 1}));
    EXPECT_FALSE(la.contains("use_full_rank_gate")) << "K3's gate (docs/models.md 7), not Kimi Linear's";
    EXPECT_EQ(c["num_experts"], kExperts);
    EXPECT_EQ(c["num_experts_per_token"], 8);
    EXPECT_EQ(c["num_shared_experts"], 1);
    EXPECT_EQ(c["num_expert_group"], 1);
    EXPECT_EQ(c["moe_router_activation_func"], "sigmoid");
    EXPECT_EQ(c["moe_renormalize"], true);
    EXPECT_EQ(c["routed_scaling_factor"], 2.446);
    EXPECT_EQ(c["first_k_dense_replace"], 1);
    EXPECT_EQ(c["intermediate_size"], kDenseFfn);
    EXPECT_EQ(c["moe_intermediate_size"], kExpertFfn);
    EXPECT_EQ(c["hidden_act"], "silu");
    EXPECT_EQ(c["rms_norm_eps"], 1e-5);
    EXPECT_EQ(c["model_max_length"], 1048576);
    EXPECT_EQ(c["tie_word_embeddings"], false);
    for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"}) EXPECT_LT(c[id], kVocab) << id;
}

TEST(SynthKimiLinearConfig, RealModel) {
    // docs/models.md 5: 27 layers, MLA at 1-indexed 4, 8, ..., 24 and 27; KDA elsewhere.
    const nlohmann::json c = synth_arch_find("kimi_linear").config(SynthOptions{});
    const nlohmann::json& la = c["linear_attn_config"];
    nlohmann::json full = nlohmann::json::array(), kda = nlohmann::json::array();
    for (int l = 1; l <= 27; ++l) (l % 4 == 0 || l == 27 ? full : kda).push_back(l);
    EXPECT_EQ(la["full_attn_layers"], full);
    EXPECT_EQ(la["kda_layers"], kda);
    EXPECT_EQ(full, nlohmann::json::array({4, 8, 12, 16, 20, 24, 27}));
    EXPECT_EQ(la["num_heads"], 32);
    EXPECT_EQ(c["hidden_size"], 2304);
    EXPECT_EQ(c["num_experts"], 256);
    EXPECT_EQ(c["vocab_size"], 163840);
    EXPECT_EQ(c["bos_token_id"], 163584);
    EXPECT_EQ(c["eos_token_id"], 163586);
    EXPECT_EQ(c["pad_token_id"], 163839);
}

// As for the other architectures (synth_deepseek_v3_test.cpp): over 40 tokens, uniform routing over 64
// experts with top-8 uses ~63.7 distinct experts per layer and shares k*k/E = 1 between consecutive tokens;
// a collapsed router uses a small multiple of k and shares most of them. The run goes through KDA (prefill
// and decode) and the NoPE MLA.
TEST(SynthKimiLinearRun, RunsOnTheCpuWithRoutingSpread) {
    const std::string err = test::synth_run_with_routing_spread("kimi_linear", kVocab);
    EXPECT_NE(err.find("weights: dense BF16, experts BF16"), std::string::npos) << err;
    for (const char* op : {"kda ", "short_conv ", "mla_attention "})
        EXPECT_NE(err.find(op), std::string::npos) << op << " not run: " << err;
}

}  // namespace
}  // namespace coli
