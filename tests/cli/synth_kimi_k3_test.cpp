// `coli synth --arch kimi_k3`: the checkpoint has the layout of docs/models.md 7 (names under
// `language_model.`, shapes, dtypes, config.json with its text_config), its experts are stored back to back
// but out of id order, and the expert store finds and views every expert as MXFP4. The expected names and
// shapes are written out here from the list of docs/models.md 7, with its dimensions divided by the --scale.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "cli/coli_exec.h"
#include "cli/synth_check.h"
#include "io/checkpoint.h"
#include "nn/moe.h"
#include "nn/weights.h"
#include "synth/synth_arch.h"

namespace coli {
namespace {

// The dimensions of docs/models.md 7 divided by kScale; head dims and the conv kernel are not widths: kept.
constexpr int kScale = 16;
constexpr int64_t D = 7168 / kScale, kVocab = 163840 / kScale, H = 96 / kScale;
constexpr int64_t kQLora = 1536 / kScale, kKvLora = 512 / kScale;
constexpr int64_t kNope = 128, kRope = 64, kV = 128, kHeadDim = 128, kConv = 4;
constexpr int64_t P = H * kHeadDim;  // KDA projection width
constexpr int64_t kFfn = 3072 / kScale, kLatent = 3584 / kScale, kDenseFfn = 18432 / kScale;
constexpr int64_t kShared = 2 * kFfn;
constexpr int64_t kALogStored = 128;  // A_log stored [128] for 96 heads, zero past them (docs/models.md 7)
constexpr int kExperts = 16;
constexpr int kMxBlock = 32;

const std::vector<std::string> kTinyFlags = {"--arch",     "kimi_k3", "--scale",   std::to_string(kScale),
                                             "--layers",   "2",       "--experts", std::to_string(kExperts),
                                             "--shard-gb", "0.0005"};

using test::ExpectedTensor;

// The tensor list of docs/models.md 7 for --layers 2: layer 0 KDA + dense MLP, layer 1 gated MLA + LatentMoE.
std::map<std::string, ExpectedTensor> spec_tensors() {
    const DType bf = DType::bf16, f32 = DType::f32, u8 = DType::u8;
    std::map<std::string, ExpectedTensor> t;
    const std::string m = "language_model.model.";
    t[m + "embed_tokens.weight"] = {bf, {kVocab, D}};
    t["language_model.lm_head.weight"] = {bf, {kVocab, D}};
    t[m + "norm.weight"] = {bf, {D}};
    t[m + "output_attn_res_norm.weight"] = {bf, {D}};
    t[m + "output_attn_res_proj.weight"] = {bf, {1, D}};
    for (int l = 0; l < 2; ++l) {
        const std::string p = fmt::format("{}layers.{}.", m, l);
        for (const char* n :
             {"input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"})
            t[p + n + ".weight"] = {bf, {D}};
        t[p + "self_attention_res_proj.weight"] = {bf, {1, D}};
        t[p + "mlp_res_proj.weight"] = {bf, {1, D}};
    }
    const std::string kda = m + "layers.0.self_attn.";
    for (const char* x : {"q", "k", "v"}) {
        t[kda + x + "_proj.weight"] = {bf, {P, D}};
        t[kda + x + "_conv1d.weight"] = {f32, {P, 1, kConv}};
    }
    t[kda + "f_a_proj.weight"] = {bf, {kHeadDim, D}};
    t[kda + "f_b_proj.weight"] = {bf, {P, kHeadDim}};
    t[kda + "dt_bias"] = {f32, {P}};
    t[kda + "A_log"] = {f32, {kALogStored}};
    t[kda + "b_proj.weight"] = {bf, {H, D}};
    t[kda + "g_proj.weight"] = {bf, {P, D}};
    t[kda + "o_norm.weight"] = {f32, {kHeadDim}};
    t[kda + "o_proj.weight"] = {bf, {D, P}};
    const std::string dense = m + "layers.0.mlp.";
    t[dense + "gate_proj.weight"] = {bf, {kDenseFfn, D}};
    t[dense + "up_proj.weight"] = {bf, {kDenseFfn, D}};
    t[dense + "down_proj.weight"] = {bf, {D, kDenseFfn}};
    const std::string mla = m + "layers.1.self_attn.";
    t[mla + "q_a_proj.weight"] = {bf, {kQLora, D}};
    t[mla + "q_a_layernorm.weight"] = {bf, {kQLora}};
    t[mla + "q_b_proj.weight"] = {bf, {H * (kNope + kRope), kQLora}};
    t[mla + "kv_a_proj_with_mqa.weight"] = {bf, {kKvLora + kRope, D}};
    t[mla + "kv_a_layernorm.weight"] = {bf, {kKvLora}};
    t[mla + "kv_b_proj.weight"] = {bf, {H * (kNope + kV), kKvLora}};
    t[mla + "o_proj.weight"] = {bf, {D, H * kV}};
    t[mla + "g_proj.weight"] = {bf, {H * kV, D}};
    const std::string moe = m + "layers.1.block_sparse_moe.";
    t[moe + "gate.weight"] = {bf, {kExperts, D}};
    t[moe + "gate.e_score_correction_bias"] = {f32, {kExperts}};
    t[moe + "routed_expert_down_proj.weight"] = {bf, {kLatent, D}};
    t[moe + "routed_expert_up_proj.weight"] = {bf, {D, kLatent}};
    t[moe + "routed_expert_norm.weight"] = {bf, {kLatent}};
    for (int e = 0; e < kExperts; ++e) {
        const std::string x = fmt::format("{}experts.{}.", moe, e);
        for (const char* w : {"w1", "w3"}) {
            t[x + w + ".weight_packed"] = {u8, {kFfn, kLatent / 2}};
            t[x + w + ".weight_scale"] = {u8, {kFfn, kLatent / kMxBlock}};
        }
        t[x + "w2.weight_packed"] = {u8, {kLatent, kFfn / 2}};
        t[x + "w2.weight_scale"] = {u8, {kLatent, kFfn / kMxBlock}};
    }
    t[moe + "shared_experts.gate_proj.weight"] = {bf, {kShared, D}};
    t[moe + "shared_experts.up_proj.weight"] = {bf, {kShared, D}};
    t[moe + "shared_experts.down_proj.weight"] = {bf, {D, kShared}};
    return t;
}

std::string expert_prefix(int e) {
    return fmt::format("language_model.model.layers.1.block_sparse_moe.experts.{}.", e);
}

class SynthKimiK3 : public test::SynthCheckpointTest<SynthKimiK3> {
protected:
    static void SetUpTestSuite() { synth("synth-k3", kTinyFlags); }
};

TEST_F(SynthKimiK3, TensorsAreSpecSectionSeven) {
    test::expect_tensors(*ckpt_, spec_tensors());
    EXPECT_GT(ckpt_->file_count(), 2) << "expected a sharded checkpoint";
    EXPECT_TRUE(std::filesystem::exists(ckpt_->dir() / "model.safetensors.index.json"));
}

TEST_F(SynthKimiK3, ConfigIsKimiK3WithItsTextConfig) {
    const nlohmann::json& c = ckpt_->config();
    EXPECT_EQ(c["model_type"], "kimi_k3");
    EXPECT_EQ(c["architectures"][0], "KimiK3ForConditionalGeneration");
    EXPECT_FALSE(c.contains("quantization_config")) << "docs/models.md 7: inside text_config only";
    const nlohmann::json& t = c["text_config"];
    EXPECT_EQ(t["hidden_size"], D);
    EXPECT_EQ(t["num_hidden_layers"], 2);
    EXPECT_EQ(t["vocab_size"], kVocab);
    EXPECT_EQ(t["num_attention_heads"], H);
    EXPECT_EQ(t["q_lora_rank"], kQLora);
    EXPECT_EQ(t["kv_lora_rank"], kKvLora);
    EXPECT_EQ(t["qk_nope_head_dim"], kNope);
    EXPECT_EQ(t["qk_rope_head_dim"], kRope);
    EXPECT_EQ(t["v_head_dim"], kV);
    EXPECT_EQ(t["mla_use_nope"], true);
    EXPECT_EQ(t["mla_use_output_gate"], true);
    const nlohmann::json& la = t["linear_attn_config"];
    EXPECT_EQ(la["num_heads"], H);
    EXPECT_EQ(la["head_dim"], kHeadDim);
    EXPECT_EQ(la["short_conv_kernel_size"], kConv);
    EXPECT_EQ(la["gate_lower_bound"], -5.0);
    EXPECT_EQ(la["use_full_rank_gate"], true);
    EXPECT_EQ(la["kda_layers"], nlohmann::json::array({1}));  // 1-indexed
    EXPECT_EQ(la["full_attn_layers"], nlohmann::json::array({2}));
    EXPECT_EQ(t["num_experts"], kExperts);
    EXPECT_EQ(t["num_experts_per_token"], 16);
    EXPECT_EQ(t["moe_intermediate_size"], kFfn);
    EXPECT_EQ(t["routed_expert_hidden_size"], kLatent);
    EXPECT_EQ(t["latent_moe_use_norm"], true);
    EXPECT_EQ(t["num_shared_experts"], 2);
    EXPECT_EQ(t["routed_scaling_factor"], 1.0);
    EXPECT_EQ(t["moe_renormalize"], true);
    EXPECT_EQ(t["moe_router_activation_func"], "sigmoid");
    EXPECT_EQ(t["num_expert_group"], 1);
    EXPECT_EQ(t["topk_method"], "noaux_tc");
    EXPECT_EQ(t["first_k_dense_replace"], 1);
    EXPECT_EQ(t["hidden_act"], "situ");
    EXPECT_EQ(t["activation_situ_beta"], 4.0);
    EXPECT_EQ(t["activation_situ_linear_beta"], 25.0);
    EXPECT_EQ(t["attn_res_block_size"], 12);
    EXPECT_EQ(t["rms_norm_eps"], 1e-5);
    EXPECT_EQ(t["intermediate_size"], kDenseFfn);
    EXPECT_EQ(t["max_position_embeddings"], 1048576);
    EXPECT_EQ(t["tie_word_embeddings"], false);
    EXPECT_EQ(t["quantization_config"]["quant_method"], "compressed-tensors");
    EXPECT_EQ(t["quantization_config"]["format"], "mxfp4-pack-quantized");
    for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"}) EXPECT_LT(t[id], kVocab) << id;
}

TEST(SynthKimiK3Config, LayerPatternOfTheRealModel) {
    // docs/models.md 7: 93 layers, MLA at 1-indexed 4, 8, ..., 92 and 93; KDA elsewhere.
    const nlohmann::json c = synth_arch_find("kimi_k3").config(SynthOptions{});
    const nlohmann::json& la = c["text_config"]["linear_attn_config"];
    nlohmann::json full = nlohmann::json::array(), kda = nlohmann::json::array();
    for (int l = 1; l <= 93; ++l) (l % 4 == 0 || l == 93 ? full : kda).push_back(l);
    EXPECT_EQ(la["full_attn_layers"], full);
    EXPECT_EQ(la["kda_layers"], kda);
    EXPECT_EQ(full.size(), 24u);
    EXPECT_EQ(c["text_config"]["num_experts"], 896);
}

TEST_F(SynthKimiK3, ALogIsZeroPastTheHeads) {
    const TensorInfo& t = ckpt_->get("language_model.model.layers.0.self_attn.A_log");
    const auto bytes = ckpt_->map(t);
    const auto* a = reinterpret_cast<const float*>(bytes.data());
    for (int64_t h = 0; h < H; ++h) EXPECT_NE(a[h], 0.0f) << h;
    for (int64_t h = H; h < kALogStored; ++h) EXPECT_EQ(a[h], 0.0f) << h;
}

TEST_F(SynthKimiK3, ExpertsAreBackToBackButNotInIdOrder) {
    using Place = std::pair<int, uint64_t>;  // (file, offset)
    std::vector<Place> starts;
    for (int e = 0; e < kExperts; ++e) {
        std::vector<const TensorInfo*> parts;
        for (const char* w : {"w1", "w2", "w3"})
            for (const char* s : {".weight_packed", ".weight_scale"})
                parts.push_back(&ckpt_->get(expert_prefix(e) + w + s));
        std::sort(parts.begin(), parts.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
        for (size_t i = 1; i < parts.size(); ++i) {
            EXPECT_EQ(parts[i]->file, parts[0]->file) << "expert " << e;
            EXPECT_EQ(parts[i]->offset, parts[i - 1]->offset + parts[i - 1]->nbytes) << "expert " << e;
        }
        starts.emplace_back(parts[0]->file, parts[0]->offset);
    }
    EXPECT_FALSE(std::is_sorted(starts.begin(), starts.end())) << "experts are stored in id order";
    std::set<int> files;
    for (const Place& s : starts) files.insert(s.first);
    EXPECT_GT(files.size(), 1u) << "expected the layer's experts to span shards";
}

TEST_F(SynthKimiK3, StoreFindsEveryExpertAsMxfp4InDiskOrder) {
    ExpertLayout layout{2, kExperts, 16, [](int layer, int e) {
                            return layer == 1
                                       ? swiglu_expert_tensors(*ckpt_, expert_prefix(e), kKimiExpertNames)
                                       : std::vector<std::string>{};
                        }};
    std::vector<std::pair<int, uint64_t>> issued;
    StoreOptions opts;
    opts.io_threads = 1;
    opts.read_issued = [&](int file, uint64_t offset) { issued.emplace_back(file, offset); };
    ExpertStore store(*ckpt_, layout, opts);
    std::vector<int> ids(kExperts);
    for (int e = 0; e < kExperts; ++e) ids[e] = e;
    const std::vector<ExpertHandle> handles = store.fetch(1, ids);

    EXPECT_EQ(issued.size(), size_t(kExperts)) << "one read per expert: its six tensors are adjacent";
    EXPECT_TRUE(std::is_sorted(issued.begin(), issued.end())) << "reads not issued in (file, offset) order";
    for (const ExpertHandle& h : handles) {
        ASSERT_EQ(h.part_count(), 6u);
        const ExpertWeights w = swiglu_expert_weights(h);
        const std::pair<const Weight*, std::vector<int64_t>> views[] = {
            {&w.gate, {kFfn, kLatent}}, {&w.up, {kFfn, kLatent}}, {&w.down, {kLatent, kFfn}}};
        for (const auto& [v, shape] : views) {
            ASSERT_EQ(v->format(), Format::mxfp4);
            EXPECT_EQ(v->rows(), shape[0]);
            EXPECT_EQ(v->cols(), shape[1]);
        }
        // Decoded values have the magnitude of a 1/sqrt(fan_in) matrix (within a factor 2).
        std::vector<float> row(static_cast<size_t>(kLatent));
        double sum = 0;
        for (int64_t r = 0; r < kFfn; ++r) {
            weight_decode_row(w.gate.host, r, row.data());
            for (float x : row) sum += double(x) * x;
        }
        const double rms = std::sqrt(sum / double(kFfn * kLatent)), target = 1 / std::sqrt(double(kLatent));
        EXPECT_GT(rms, target / 2) << "expert " << h.expert();
        EXPECT_LT(rms, target * 2) << "expert " << h.expert();
    }
}

}  // namespace
}  // namespace coli
