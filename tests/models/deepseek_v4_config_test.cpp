// DeepSeek-V4's config.json in the hub's spelling (compress_ratios with the MTP layer's entry,
// num_hash_layers, qk_rope_head_dim, rope_scaling) and in transformers' (layer_types, compress_rates,
// mlp_layer_types, partial_rotary_factor, nested rope_parameters), and the errors an inconsistent one gets.
// Expected values come from docs/models.md 8.1 and 8.3.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "models/deepseek_v4_config.h"

namespace coli {
namespace {

using Attn = DeepseekV4Config::Attn;

// DeepSeek-V4-Flash's hub config.json, the keys the engine reads: 43 layers, 44 compress ratios (the last
// one the MTP layer's).
nlohmann::json flash_hub() {
    nlohmann::json c = nlohmann::json::parse(R"({
        "model_type": "deepseek_v4", "vocab_size": 129280, "hidden_size": 4096, "num_hidden_layers": 43,
        "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
        "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024, "n_routed_experts": 256,
        "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
        "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "norm_topk_prob": true,
        "num_hash_layers": 3, "swiglu_limit": 10.0, "sliding_window": 128, "compress_rope_theta": 160000,
        "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 16,
        "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1}, "index_n_heads": 64,
        "index_head_dim": 128, "index_topk": 512, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
        "rms_norm_eps": 1e-6, "max_position_embeddings": 1048576, "num_nextn_predict_layers": 1
    })");
    std::vector<int> ratios = {0, 0};
    for (int l = 2; l < 43; ++l) ratios.push_back(l % 2 == 0 ? 4 : 128);
    ratios.push_back(0);  // the MTP layer
    c["compress_ratios"] = ratios;
    return c;
}

// A tiny config as transformers' save_pretrained writes it.
nlohmann::json tiny_transformers() {
    return nlohmann::json::parse(R"({
        "model_type": "deepseek_v4", "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 5,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "q_lora_rank": 32, "o_groups": 2,
        "o_lora_rank": 16, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "moe_intermediate_size": 32, "sliding_window": 8, "index_n_heads": 4, "index_head_dim": 16,
        "index_topk": 2, "partial_rotary_factor": 0.25, "max_position_embeddings": 1024,
        "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                        "compressed_sparse_attention", "heavily_compressed_attention"],
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        "mlp_layer_types": ["hash_moe", "hash_moe", "moe", "moe", "moe"],
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
            "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "partial_rotary_factor": 0.25,
                         "factor": 16.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
                         "beta_slow": 1.0, "attention_factor": 1.0}}
    })");
}

TEST(DeepseekV4Config, FlashHubSchedule) {
    const DeepseekV4Config c(flash_hub());
    EXPECT_EQ(c.rope_dim, 64);
    EXPECT_EQ(c.mtp_layers, 1);
    EXPECT_EQ(c.attn[0], Attn::sliding);
    EXPECT_EQ(c.attn[1], Attn::sliding);
    EXPECT_EQ(c.attn[2], Attn::csa);
    EXPECT_EQ(c.ratio[2], 4);
    EXPECT_EQ(c.attn[3], Attn::hca);
    EXPECT_EQ(c.ratio[3], 128);
    EXPECT_EQ(c.attn[42], Attn::csa);
    EXPECT_EQ(c.series(2), 2);
    EXPECT_EQ(c.series(3), 1);
    EXPECT_TRUE(c.hash[0] && c.hash[1] && c.hash[2]);
    EXPECT_FALSE(c.hash[3]);
    EXPECT_TRUE(c.sqrt_softplus);
    EXPECT_FLOAT_EQ(c.swiglu_limit, 10.0f);
    // main: plain rope at rope_theta; compress: compress_rope_theta with YaRN, attention factor 1.
    EXPECT_FLOAT_EQ(c.rope_main.theta, 10000.0f);
    EXPECT_FLOAT_EQ(c.rope_main.yarn.factor, 0.0f);
    EXPECT_FLOAT_EQ(c.rope_main.attention_scaling, 1.0f);
    EXPECT_EQ(c.rope_main.style, RopeStyle::interleaved);
    EXPECT_FLOAT_EQ(c.rope_compress.theta, 160000.0f);
    EXPECT_FLOAT_EQ(c.rope_compress.yarn.factor, 16.0f);
    EXPECT_FLOAT_EQ(c.rope_compress.yarn.original_ctx, 65536.0f);
    EXPECT_FLOAT_EQ(c.rope_compress.attention_scaling, 1.0f);
    EXPECT_EQ(&c.rope_of(0), &c.rope_main);
    EXPECT_EQ(&c.rope_of(2), &c.rope_compress);
}

TEST(DeepseekV4Config, TransformersSpelling) {
    const DeepseekV4Config c(tiny_transformers());
    EXPECT_EQ(c.rope_dim, 8);
    EXPECT_EQ(c.mtp_layers, 0);
    const std::vector<Attn> kinds = {Attn::sliding, Attn::csa, Attn::hca, Attn::csa, Attn::hca};
    EXPECT_EQ(c.attn, kinds);
    EXPECT_EQ(c.ratio, (std::vector<int>{0, 4, 8, 4, 8}));
    EXPECT_EQ(c.hash, (std::vector<bool>{true, true, false, false, false}));
    EXPECT_FLOAT_EQ(c.rope_compress.yarn.factor, 16.0f);
    EXPECT_FLOAT_EQ(c.rope_compress.attention_scaling, 1.0f);
    EXPECT_FLOAT_EQ(c.rope_main.theta, 10000.0f);
}

TEST(DeepseekV4Config, NestedYarnWithoutAttentionFactorTakesTransformersFormula) {
    nlohmann::json j = tiny_transformers();
    j["rope_parameters"]["compress"].erase("attention_factor");
    const DeepseekV4Config c(j);
    EXPECT_NEAR(c.rope_compress.attention_scaling, 0.1 * std::log(16.0) + 1.0, 1e-6);
}

TEST(DeepseekV4Config, BothSpellingsMustAgree) {
    nlohmann::json j = tiny_transformers();
    j["compress_ratios"] = {0, 4, 8, 4, 8};
    EXPECT_NO_THROW(DeepseekV4Config{j});
    j["compress_ratios"] = {0, 4, 8, 8, 8};
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "layer 3 is compressed_sparse_attention");
    j = tiny_transformers();
    j["num_hash_layers"] = 3;
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "num_hash_layers disagrees");
    j = tiny_transformers();
    j["qk_rope_head_dim"] = 16;
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "disagrees with partial_rotary_factor");
}

TEST(DeepseekV4Config, InconsistentConfigsAreErrors) {
    nlohmann::json j = tiny_transformers();
    j["layer_types"].push_back("sliding_attention");
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "layer_types must list 5 layers");
    j = tiny_transformers();
    j["layer_types"][2] = "full_attention";
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "layer_types[2] is 'full_attention'");
    j = tiny_transformers();
    j["mlp_layer_types"][4] = "dense";
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "mlp_layer_types[4] is 'dense'");
    j = tiny_transformers();
    j["compress_rates"]["sliding_attention"] = 2;
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "unknown layer type 'sliding_attention'");
    j = flash_hub();
    j["compress_ratios"].push_back(4);
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "compress_ratios has 45 entries for 43 layers (+ 1 MTP)");
    j = flash_hub();
    j["num_key_value_heads"] = 8;
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "num_key_value_heads is 8");
    j = flash_hub();
    j["scoring_func"] = "softmax";
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "scoring_func 'softmax'");
    j = flash_hub();
    j["rope_scaling"]["type"] = "longrope";
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "compress rope type 'longrope'");
    j = flash_hub();
    j["o_groups"] = 7;
    EXPECT_COLI_ERROR(DeepseekV4Config{j}, "o_groups 7 must divide the 64 heads");
}

}  // namespace
}  // namespace coli
