// `coli synth --arch deepseek_v3` and `--arch deepseek_v32`: the checkpoint has the layout of docs/models.md
// 2 as the FP8 release stores it (9.4: every projection F8_E4M3 with an F32 `<name>_scale_inv` per 128 x 128
// block; embedding, router, lm_head and norms BF16; the router's selection bias F32), config.json has
// DeepSeek-V3's values, and `coli run` loads and runs it on the CPU with routing spread over the experts. The
// expected names, shapes and dtypes are written out here from docs/models.md 2 and 9.4 with the real
// dimensions divided by the --scale. DeepSeek-V3.2 adds the indexer of docs/models.md 3 to every layer.
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

// DeepSeek-V3's widths divided by kScale; the per-head widths are not widths of the model: kept.
constexpr int kScale = 16;
constexpr int64_t D = 7168 / kScale, kVocab = 129280 / kScale, H = 128 / kScale;
constexpr int64_t kQLora = 1536 / kScale, kKvLora = 512 / kScale;
constexpr int64_t kNope = 128, kRope = 64, kV = 128;
constexpr int64_t kDenseFfn = 18432 / kScale, kExpertFfn = 2048 / kScale;
constexpr int kLayers = 4, kDenseLayers = 3;  // the real first_k_dense_replace
constexpr int kExperts = 16;

const std::vector<std::string> kTinyFlags = {
    "--arch",   "deepseek_v3",           "--scale",   "16",
    "--layers", std::to_string(kLayers), "--experts", std::to_string(kExperts)};

using test::ExpectedTensor;

// docs/models.md 2's tensor list for kLayers layers, stored as 9.4's FP8 release.
std::map<std::string, ExpectedTensor> spec_tensors() {
    return test::deepseek_fp8_tensors({.d_model = D,
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
}

class SynthDeepseekV3 : public test::SynthCheckpointTest<SynthDeepseekV3> {
protected:
    static void SetUpTestSuite() { synth("synth-v3", kTinyFlags); }
};

TEST_F(SynthDeepseekV3, TensorsAreSpecSectionTwoInFp8) {
    test::expect_tensors(*ckpt_, spec_tensors());
}

TEST_F(SynthDeepseekV3, ConfigIsDeepseekV3) {
    const nlohmann::json& c = ckpt_->config();
    EXPECT_EQ(c["model_type"], "deepseek_v3");
    EXPECT_EQ(c["architectures"][0], "DeepseekV3ForCausalLM");
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
    EXPECT_EQ(c["n_group"], 8);
    EXPECT_EQ(c["topk_group"], 4);
    EXPECT_EQ(c["n_shared_experts"], 1);
    EXPECT_EQ(c["scoring_func"], "sigmoid");
    EXPECT_EQ(c["topk_method"], "noaux_tc");
    EXPECT_EQ(c["routed_scaling_factor"], 2.5);
    EXPECT_EQ(c["norm_topk_prob"], true);
    EXPECT_EQ(c["max_position_embeddings"], 163840);
    EXPECT_EQ(c["rope_scaling"]["type"], "yarn");
    EXPECT_EQ(c["rope_scaling"]["factor"], 40);
    EXPECT_EQ(c["rope_scaling"]["original_max_position_embeddings"], 4096);
    EXPECT_EQ(c["quantization_config"]["quant_method"], "fp8");
    EXPECT_EQ(c["quantization_config"]["fmt"], "e4m3");
    EXPECT_EQ(c["quantization_config"]["weight_block_size"],
              nlohmann::json::array({test::kFp8Block, test::kFp8Block}));
}

TEST(SynthDeepseekV3Config, RealModelSizes) {
    const nlohmann::json c = synth_arch_find("deepseek_v3").config(SynthOptions{});
    EXPECT_EQ(c["hidden_size"], 7168);
    EXPECT_EQ(c["num_hidden_layers"], 61);
    EXPECT_EQ(c["n_routed_experts"], 256);
    EXPECT_EQ(c["vocab_size"], 129280);
    EXPECT_EQ(c["intermediate_size"], 18432);
    EXPECT_EQ(c["num_attention_heads"], 128);
}

// A CPU run with routing spread (test::synth_run_with_routing_spread). The run also loads every FP8 weight
// through the loader (its block scales checked).
TEST(SynthDeepseekV3Run, RunsOnTheCpuWithRoutingSpread) {
    const std::string err = test::synth_run_with_routing_spread("deepseek_v3", kVocab);
    EXPECT_NE(err.find("weights: dense F8_E4M3, experts F8_E4M3"), std::string::npos) << err;
}

// DeepSeek-V3.2's indexer (docs/models.md 3), 64 heads of 128 and the top 2048 keys divided by the scale:
// its projections block FP8 as the other ones, its key LayerNorm F32, weights_proj in the --dtype.
constexpr int64_t kIndexHeads = 64 / kScale, kIndexDim = 128, kIndexTopK = 2048 / kScale;

TEST(SynthDeepseekV32, TensorsAreV3PlusTheIndexerAndItRuns) {
    test::ScratchDir scratch("synth-v32");
    const auto dir = scratch / "model";
    std::vector<std::string> args = {"synth", "--out", dir.string()};
    args.insert(args.end(), kTinyFlags.begin(), kTinyFlags.end());
    args[4] = "deepseek_v32";  // the value of --arch
    const test::ExecResult synth = test::coli_exec(args, scratch.path());
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    const auto ckpt = Checkpoint::open(dir);

    std::map<std::string, ExpectedTensor> want = spec_tensors();
    for (int l = 0; l <= kLayers; ++l) {  // the MTP layer's indexer too
        const std::string ix = fmt::format("model.layers.{}.self_attn.indexer.", l);
        want[ix + "wq_b.weight"] = {DType::f8_e4m3, {kIndexHeads * kIndexDim, kQLora}};
        want[ix + "wq_b.weight_scale_inv"] = {
            DType::f32, {test::fp8_blocks(kIndexHeads * kIndexDim), test::fp8_blocks(kQLora)}};
        want[ix + "wk.weight"] = {DType::f8_e4m3, {kIndexDim, D}};
        want[ix + "wk.weight_scale_inv"] = {DType::f32, {test::fp8_blocks(kIndexDim), test::fp8_blocks(D)}};
        want[ix + "k_norm.weight"] = {DType::f32, {kIndexDim}};
        want[ix + "k_norm.bias"] = {DType::f32, {kIndexDim}};
        want[ix + "weights_proj.weight"] = {DType::bf16, {kIndexHeads, D}};
    }
    test::expect_tensors(*ckpt, want);

    const nlohmann::json& c = ckpt->config();
    EXPECT_EQ(c["model_type"], "deepseek_v32");
    EXPECT_EQ(c["architectures"][0], "DeepseekV32ForCausalLM");
    EXPECT_EQ(c["index_n_heads"], kIndexHeads);
    EXPECT_EQ(c["index_head_dim"], kIndexDim);
    EXPECT_EQ(c["index_topk"], kIndexTopK);
    EXPECT_EQ(c["kv_lora_rank"], kKvLora);

    const test::ExecResult run = test::coli_exec(
        {"run", "-m", dir.string(), "--hot-set", "none", "--backend", "cpu", "--ids", "1,2,3", "--max-tokens",
         "4", "--ignore-eos", "--temperature", "0", "--ctx", "64", "--print-ids"},
        scratch.path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.err.find("DSA top-" + std::to_string(kIndexTopK)), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("dsa_select"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace coli
