// `coli synth --arch glm_moe_dsa`: the checkpoint has the layout of docs/models.md 2 plus the indexer of 3
// (GLM-5 runs that code, 4) as the FP8 release stores it (9.4: every projection of attention and MLPs
// F8_E4M3 with an F32 `<name>_scale_inv` per 128 x 128 block; embedding, router, lm_head, norms and the
// indexer's matrices BF16; the router's selection bias and the indexer's LayerNorm F32), config.json has
// GLM-5's values (docs/models.md 4), and `coli run` runs it on the CPU with routing spread over the experts.
// The expected names, shapes and dtypes are written out here from those sections, with GLM-5's dimensions
// divided by the --scale.
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

// GLM-5's widths (docs/models.md 4) divided by kScale; the per-head widths are not widths of the model: kept.
constexpr int kScale = 16;
constexpr int64_t D = 6144 / kScale, kVocab = 154880 / kScale, H = 64 / kScale;
constexpr int64_t kQLora = 2048 / kScale, kKvLora = 512 / kScale;
constexpr int64_t kNope = 192, kRope = 64, kV = 256;
constexpr int64_t kDenseFfn = 12288 / kScale, kExpertFfn = 2048 / kScale;
constexpr int64_t kIndexHeads = 32 / kScale, kIndexDim = 128, kIndexTopK = 2048 / kScale;
constexpr int kLayers = 4, kDenseLayers = 3;  // the real first_k_dense_replace
constexpr int kExperts = 16;

using test::ExpectedTensor;

// docs/models.md 2 and 3's tensor list for kLayers layers, stored as 9.4's FP8 release.
std::map<std::string, ExpectedTensor> spec_tensors() {
    std::map<std::string, ExpectedTensor> t = test::deepseek_fp8_tensors({.d_model = D,
                                                                          .vocab = kVocab,
                                                                          .heads = H,
                                                                          .q_lora = kQLora,
                                                                          .kv_lora = kKvLora,
                                                                          .nope = kNope,
                                                                          .rope = kRope,
                                                                          .v = kV,
                                                                          .dense_ffn = kDenseFfn,
                                                                          .expert_ffn = kExpertFfn,
                                                                          .layers = kLayers,
                                                                          .dense_layers = kDenseLayers,
                                                                          .experts = kExperts});
    // The indexer of docs/models.md 3 in every layer: its matrices BF16, its LayerNorm F32.
    for (int l = 0; l <= kLayers; ++l) {  // the MTP layer's indexer too
        const std::string ix = fmt::format("model.layers.{}.self_attn.indexer.", l);
        t[ix + "wq_b.weight"] = {DType::bf16, {kIndexHeads * kIndexDim, kQLora}};
        t[ix + "wk.weight"] = {DType::bf16, {kIndexDim, D}};
        t[ix + "k_norm.weight"] = {DType::f32, {kIndexDim}};
        t[ix + "k_norm.bias"] = {DType::f32, {kIndexDim}};
        t[ix + "weights_proj.weight"] = {DType::bf16, {kIndexHeads, D}};
    }
    return t;
}

class SynthGlmMoeDsa : public test::SynthCheckpointTest<SynthGlmMoeDsa> {
protected:
    static void SetUpTestSuite() {
        synth("synth-glm", {"--arch", "glm_moe_dsa", "--scale", std::to_string(kScale), "--layers",
                            std::to_string(kLayers), "--experts", std::to_string(kExperts)});
    }
};

TEST_F(SynthGlmMoeDsa, TensorsAreSpecSectionsTwoAndThreeInFp8) {
    test::expect_tensors(*ckpt_, spec_tensors());
}

TEST_F(SynthGlmMoeDsa, ConfigIsGlm5) {
    const nlohmann::json& c = ckpt_->config();
    EXPECT_EQ(c["model_type"], "glm_moe_dsa");
    EXPECT_EQ(c["architectures"][0], "GlmMoeDsaForCausalLM");
    EXPECT_EQ(c["hidden_size"], D);
    EXPECT_EQ(c["num_hidden_layers"], kLayers);
    EXPECT_EQ(c["first_k_dense_replace"], kDenseLayers);
    EXPECT_EQ(c["vocab_size"], kVocab);
    EXPECT_EQ(c["num_attention_heads"], H);
    EXPECT_EQ(c["q_lora_rank"], kQLora);
    EXPECT_EQ(c["kv_lora_rank"], kKvLora);
    EXPECT_EQ(c["qk_nope_head_dim"], kNope);
    EXPECT_EQ(c["qk_rope_head_dim"], kRope);
    EXPECT_EQ(c["v_head_dim"], kV);
    EXPECT_EQ(c["intermediate_size"], kDenseFfn);
    EXPECT_EQ(c["moe_intermediate_size"], kExpertFfn);
    EXPECT_EQ(c["n_routed_experts"], kExperts);
    EXPECT_EQ(c["num_experts_per_tok"], 8);
    EXPECT_EQ(c["n_group"], 1);  // docs/models.md 4: group routing changes nothing
    EXPECT_EQ(c["topk_group"], 1);
    EXPECT_EQ(c["n_shared_experts"], 1);
    EXPECT_EQ(c["scoring_func"], "sigmoid");
    EXPECT_EQ(c["routed_scaling_factor"], 2.5);
    EXPECT_EQ(c["norm_topk_prob"], true);
    EXPECT_EQ(c["index_n_heads"], kIndexHeads);
    EXPECT_EQ(c["index_head_dim"], kIndexDim);
    EXPECT_EQ(c["index_topk"], kIndexTopK);
    EXPECT_EQ(c["indexer_rope_interleave"], true);
    EXPECT_EQ(c["rope_parameters"]["rope_type"], "default");  // no YaRN
    EXPECT_EQ(c["rope_parameters"]["rope_theta"], 1e6);
    EXPECT_EQ(c["rms_norm_eps"], 1e-5);
    EXPECT_EQ(c["max_position_embeddings"], 202752);
    EXPECT_EQ(c["quantization_config"]["quant_method"], "fp8");
    EXPECT_EQ(c["quantization_config"]["fmt"], "e4m3");
    EXPECT_EQ(c["quantization_config"]["weight_block_size"],
              nlohmann::json::array({test::kFp8Block, test::kFp8Block}));
    ASSERT_EQ(c["eos_token_id"].size(), 3u);
    for (const auto& id : c["eos_token_id"]) EXPECT_LT(id, kVocab);
    EXPECT_EQ(ckpt_->generation_config()["eos_token_id"], c["eos_token_id"]);
}

TEST(SynthGlmMoeDsaConfig, RealModelSizes) {
    const nlohmann::json c = synth_arch_find("glm_moe_dsa").config(SynthOptions{});
    EXPECT_EQ(c["hidden_size"], 6144);
    EXPECT_EQ(c["num_hidden_layers"], 78);
    EXPECT_EQ(c["num_attention_heads"], 64);
    EXPECT_EQ(c["n_routed_experts"], 256);
    EXPECT_EQ(c["vocab_size"], 154880);
    EXPECT_EQ(c["index_n_heads"], 32);
    EXPECT_EQ(c["index_topk"], 2048);
    EXPECT_EQ(c["eos_token_id"], nlohmann::json::array({154820, 154827, 154829}));
    EXPECT_EQ(c["pad_token_id"], 154820);
}

// A CPU run with routing spread (test::synth_run_with_routing_spread). The run loads every FP8 weight (its
// block scales checked) and runs the indexer.
TEST(SynthGlmMoeDsaRun, RunsOnTheCpuWithRoutingSpread) {
    const std::string err = test::synth_run_with_routing_spread("glm_moe_dsa", kVocab);
    EXPECT_NE(err.find("weights: dense F8_E4M3, experts F8_E4M3"), std::string::npos) << err;
    EXPECT_NE(err.find("DSA top-" + std::to_string(kIndexTopK)), std::string::npos) << err;
    EXPECT_NE(err.find("dsa_select"), std::string::npos) << err;
}

}  // namespace
}  // namespace coli
