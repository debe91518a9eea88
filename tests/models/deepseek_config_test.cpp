// The MLA families' config.json as the hub writes it (rope_theta + rope_scaling, not transformers v5's
// rope_parameters), DSA layer patterns, and the errors a bad config gets. Expected values come from the
// formulas of docs/models.md 2.3 and 4, not from our code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "backend/backend.h"
#include "common/test_util.h"
#include "models/deepseek_config.h"

namespace coli {
namespace {

// DeepSeek-V3's hub config.json, the keys the engine reads.
nlohmann::json deepseek_v3_hub() {
    return nlohmann::json::parse(R"({
        "model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5, "norm_topk_prob": true,
        "scoring_func": "sigmoid", "first_k_dense_replace": 3, "moe_layer_freq": 1, "rms_norm_eps": 1e-6,
        "rope_theta": 10000, "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                         "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
    })");
}

TEST(DeepseekConfig, HubYarnGivesTheSpecsScales) {
    const DeepseekConfig c(deepseek_v3_hub());
    // softmax_scale = (dn + dr)^-0.5 m^2 with m = 0.1 ln(40) + 1; attention factor 1 (mscale =
    // mscale_all_dim).
    const double m = 0.1 * std::log(40.0) + 1.0;
    EXPECT_NEAR(c.softmax_scale, std::pow(192.0, -0.5) * m * m, 1e-6);
    EXPECT_FLOAT_EQ(c.rope_q.attention_scaling, 1.0f);
    EXPECT_FLOAT_EQ(c.rope_q.yarn.factor, 40.0f);
    EXPECT_FLOAT_EQ(c.rope_q.yarn.original_ctx, 4096.0f);
    EXPECT_EQ(c.rope_q.style, RopeStyle::interleaved);  // rope_interleave absent: transformers' default
    EXPECT_EQ(c.rope_q.rotary_offset, 128);             // after the nope dims of each head
    EXPECT_EQ(c.rope_q.head_dim, 192);
    EXPECT_FALSE(c.is_moe(2));
    EXPECT_TRUE(c.is_moe(3));
    EXPECT_FALSE(c.dsa());
}

TEST(DeepseekConfig, YarnInverseFrequenciesBlendAsTheSpecSays) {
    const DeepseekConfig c(deepseek_v3_hub());
    const std::vector<float> inv = rope_inv_freq(c.rope_q);
    // d = 64: dims below corr_dim(32) = floor(...) keep theta^(-2i/d); above corr_dim(1) are divided by 40.
    const auto corr = [](double rotations) {
        return 64 * std::log(4096 / (rotations * 2 * std::numbers::pi)) / (2 * std::log(10000.0));
    };
    const int low = static_cast<int>(std::floor(corr(32))), high = static_cast<int>(std::ceil(corr(1)));
    for (int i = 0; i < 32; ++i) {
        const double base = std::pow(10000.0, -2.0 * i / 64);
        const double ramp = std::clamp((i - low) / double(high - low), 0.0, 1.0);
        EXPECT_NEAR(inv[i], base / 40 * ramp + base * (1 - ramp), 1e-6 * base) << "dim pair " << i;
    }
}

TEST(DeepseekConfig, Glm52IndexerScheduleFromFrequencyAndOffset) {
    nlohmann::json c = deepseek_v3_hub();
    c["model_type"] = "glm_moe_dsa";
    c["num_hidden_layers"] = 16;
    c.erase("rope_scaling");
    c["rope_theta"] = 1e6;
    c["index_topk"] = 2048;
    c["index_n_heads"] = 32;
    c["index_head_dim"] = 128;
    c["index_topk_freq"] = 4;
    c["index_skip_topk_offset"] = 3;
    const DeepseekConfig g(c);
    // docs/models.md 4: GLM-5.2 has its own indexer at layers 0, 1, 2 and then every 4th layer
    // (6, 10, 14, ...).
    for (int l = 0; l < 16; ++l) EXPECT_EQ(g.index_full[l], l <= 2 || (l - 2) % 4 == 0) << "layer " << l;
    EXPECT_EQ(g.rope_index.style, RopeStyle::interleaved);      // GLM's indexer rope
    EXPECT_NEAR(g.softmax_scale, std::pow(192.0, -0.5), 1e-7);  // no YaRN, no mscale
}

TEST(DeepseekConfig, V32IndexerRopeIsHalfSplit) {
    nlohmann::json c = deepseek_v3_hub();
    c["model_type"] = "deepseek_v32";
    c["index_topk"] = 2048;
    c["index_n_heads"] = 64;
    c["index_head_dim"] = 128;
    const DeepseekConfig v(c);
    EXPECT_EQ(v.rope_index.style, RopeStyle::neox);
    EXPECT_EQ(v.rope_index.rotary_offset, 0);  // rope dims first in the indexer's heads
    EXPECT_TRUE(std::all_of(v.index_full.begin(), v.index_full.end(), [](bool f) { return f; }));
}

TEST(DeepseekConfig, BadConfigsAreOneLineErrors) {
    nlohmann::json c = deepseek_v3_hub();
    c["n_group"] = 7;  // 256 experts do not split into 7 groups
    EXPECT_COLI_ERROR(DeepseekConfig{c}, "256 experts in 7 groups");
    c = deepseek_v3_hub();
    c["rope_scaling"]["type"] = "longrope";
    EXPECT_COLI_ERROR(DeepseekConfig{c}, "rope type 'longrope' is not supported");
    c = deepseek_v3_hub();
    c["index_topk"] = 2048;
    c["index_n_heads"] = 64;
    c["index_head_dim"] = 128;
    c["indexer_types"] = {"shared"};
    EXPECT_COLI_ERROR(DeepseekConfig{c}, "'indexer_types' has 1 entries");
    c["indexer_types"] = nlohmann::json::array();
    for (int l = 0; l < 61; ++l) c["indexer_types"].push_back(l == 0 ? "shared" : "full");
    EXPECT_COLI_ERROR(DeepseekConfig{c}, "layer 0 must have its own indexer");
    c = deepseek_v3_hub();
    c.erase("kv_lora_rank");
    EXPECT_COLI_ERROR(DeepseekConfig{c}, "missing 'kv_lora_rank'");
}

}  // namespace
}  // namespace coli
