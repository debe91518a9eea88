// The config.json of the Kimi families: kimi_linear (keys at the top level) and kimi_k3 (the text model's
// keys under text_config, tensors under language_model.). Sizes, the KDA / MLA layer pattern, the MoE and
// K3's additions (latent experts, SiTU, attention residuals), checked on load (docs/models.md 5 and 7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/tensor.h"

namespace coli {

struct KimiConfig {
    std::string family;           // config model_type: kimi_linear | kimi_k3
    std::string prefix;           // tensor name prefix: "" or "language_model."
    int64_t vocab;                // vocab_size
    int64_t d_model;              // hidden_size
    int64_t d_ff;                 // the dense layers' MLP width (intermediate_size)
    int64_t d_expert;             // one routed expert's width (moe_intermediate_size)
    int n_layers;                 // num_hidden_layers
    float rms_eps;                // the layer RMSNorms' epsilon (also KDA's output norm and AttnRes)
    int64_t max_ctx;              // max_position_embeddings (or model_max_length)
    std::vector<bool> mla_layer;  // per layer: MLA (full attention), else KDA

    // MLA (NoPE: no rotary embedding at all, docs/models.md 5.2).
    int n_heads;           // num_attention_heads
    int q_lora;            // q_lora_rank; 0: q_proj without LoRA
    int kv_lora;           // kv_lora_rank: the cached latent's width
    int nope_dim;          // qk_nope_head_dim
    int rope_dim;          // qk_rope_head_dim: the shared key's width (not rotated here)
    int v_dim;             // v_head_dim
    bool mla_output_gate;  // K3: attn * sigmoid(W_g x) before o_proj

    // KDA (docs/models.md 5.1).
    int kda_heads;           // linear_attn_config.num_heads
    int kda_dim;             // linear_attn_config.head_dim (dk = dv)
    int conv_kernel;         // short_conv_kernel_size
    float gate_lower_bound;  // 0: softplus forget gate (Kimi Linear); < 0: K3's lower-bounded gate
    bool full_rank_gate;     // output gate W_g x (K3) instead of W_gb W_ga x

    // MoE: sigmoid router with a selection bias over one group, dense first layers.
    int n_experts;             // routed experts per MoE layer
    int top_k;                 // experts per token
    int n_group;               // num_expert_group (1: plain top-k)
    int n_shared;              // shared experts, run as one of n_shared * d_expert
    int n_dense;               // first_k_dense_replace: layers with a dense MLP
    bool renormalize;          // moe_renormalize: routed weights divided by their sum
    float routed_scaling;      // routed_scaling_factor
    int64_t d_latent = 0;      // K3 LatentMoE: experts work in this width (0: in d_model)
    bool latent_norm = false;  // K3: RMSNorm on the routed experts' latent sum
    GluActivation act;         // the MLP and expert activation (SiTU in K3)
    int attn_res_block = 0;    // K3 attention residuals: layers per block (0: plain residual stream)

    // c: the whole config.json. Throws coli::Error naming a bad or missing key.
    explicit KimiConfig(const nlohmann::json& c);

    bool is_moe(int layer) const { return layer >= n_dense; }
};

}  // namespace coli
