// The config.json of the MLA families (deepseek_v3, deepseek_v32, glm_moe_dsa): sizes, RoPE/YaRN, routing,
// the dense/MoE layer pattern and the DSA indexer layout, checked on load (docs/models.md 2-4).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/tensor.h"

namespace coli {

struct DeepseekConfig {
    int64_t vocab, d_model, d_ff, d_expert;          // d_ff: dense MLP width; d_expert: one routed expert's
    int n_layers, n_heads, n_dense;                  // n_dense: first_k_dense_replace
    int q_lora, kv_lora, nope_dim, rope_dim, v_dim;  // q_lora 0: q_proj without LoRA
    int n_experts, top_k, n_group, topk_group, n_shared;  // routed experts, their groups, shared experts
    bool norm_topk_prob;                                  // routed weights renormalized to sum 1
    float routed_scaling, rms_eps;                        // routed_scaling_factor; layer RMSNorm epsilon
    RopeParams rope_q, rope_k;  // the same rotation of q (after the nope dims of each head) and of k_pe
    float softmax_scale;        // (nope + rope)^-0.5, times YaRN's mscale^2
    int64_t max_ctx;            // max_position_embeddings
    std::string family;         // config model_type
    int index_topk = 0;         // DSA: keys per query; 0: dense attention
    int index_heads = 0, index_dim = 0;  // DSA indexer heads and width
    RopeParams rope_index;               // the indexer's rotation (rope dims first in each head)
    int mtp_layers = 0;                  // num_nextn_predict_layers: MTP layers after the decoder's
    // Per layer, the MTP layers' included: its own indexer (else it reuses the last full layer's).
    std::vector<bool> index_full;
    std::vector<bool> moe_layer;  // per layer, the MTP layers' included: routed experts (else a dense MLP)

    explicit DeepseekConfig(const nlohmann::json& c);  // throws coli::Error naming a bad or missing key

    bool is_moe(int layer) const { return moe_layer[layer]; }
    bool dsa() const { return index_topk > 0; }

private:
    void rope_from(const nlohmann::json& c);   // RoPE, YaRN and the softmax scale
    void index_from(const nlohmann::json& c);  // the DSA indexer
};

}  // namespace coli
