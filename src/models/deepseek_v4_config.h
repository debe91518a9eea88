// The config.json of DeepSeek-V4 (deepseek_v4, docs/models.md 8.1), in both spellings: the hub's
// (compress_ratios per layer, num_hash_layers, qk_rope_head_dim, rope_theta + compress_rope_theta +
// rope_scaling) and transformers' (layer_types, compress_rates, mlp_layer_types, partial_rotary_factor,
// rope_parameters {main, compress} or flat). Checked on load: an inconsistent or unknown value is a
// coli::Error naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/tensor.h"

namespace coli {

struct DeepseekV4Config {
    // A layer's attention (docs/models.md 8.2): the sliding window only, or with compressed entries.
    enum class Attn : uint8_t {
        sliding,  // sliding_attention: compress ratio 0
        csa,      // compressed_sparse_attention: overlapping windows, lightning indexer
        hca,      // heavily_compressed_attention: non-overlapping windows, every entry visible
    };

    int64_t vocab, d_model, d_expert, max_ctx;  // d_expert: moe_intermediate_size (routed and shared)
    int n_layers, n_heads, head_dim, rope_dim;  // rope_dim: the trailing rotated dims of each head
    int q_lora, o_groups, o_lora;               // q LoRA rank; grouped output projection
    int window;                      // sliding_window: keys per query in the window, itself included
    int n_experts, top_k, n_shared;  // routed experts, per token; shared experts (one MLP)
    bool sqrt_softplus;              // scoring_func sqrtsoftplus (else sigmoid)
    float routed_scaling, swiglu_limit, rms_eps;
    int hc_mult, hc_iters;  // hyper-connection streams, Sinkhorn iterations
    float hc_eps;
    int index_heads, index_dim, index_topk;  // CSA's lightning indexer
    std::vector<Attn> attn;                  // per layer
    std::vector<int> ratio;                  // per layer: positions per compressed entry (0: sliding)
    std::vector<bool> hash;                  // per layer: experts from tid2eid[token] (hash_moe)
    // The two rope sets (docs/models.md 8.3): theta, YaRN and attention factor; style, widths and offsets
    // are set where each is applied.
    RopeParams rope_main;      // sliding layers: rope_theta, no scaling
    RopeParams rope_compress;  // CSA / HCA layers, their compressors and the indexer
    int mtp_layers;            // num_nextn_predict_layers: in the checkpoint (mtp.*), never run
    std::string family;        // config model_type

    explicit DeepseekV4Config(const nlohmann::json& c);  // throws coli::Error naming a bad or missing key

    bool compressed(int layer) const { return attn[layer] != Attn::sliding; }
    // A CSA layer's compressor keeps two series per position (overlapping windows), an HCA layer's one.
    int series(int layer) const { return attn[layer] == Attn::csa ? 2 : 1; }
    const RopeParams& rope_of(int layer) const { return compressed(layer) ? rope_compress : rope_main; }

private:
    void layers_from(const nlohmann::json& c);  // attention kinds, ratios, hash layers
    void rope_from(const nlohmann::json& c);    // the rope sets
};

std::string_view attn_name(DeepseekV4Config::Attn a);  // transformers' layer type name

}  // namespace coli
