// The config.json of the Kimi families: kimi_linear (keys at the top level) and kimi_k3 (the text model's
// keys under text_config, tensors under language_model.). Sizes, the KDA / MLA layer pattern, the MoE and
// K3's additions (latent experts, SiTU, attention residuals), checked on load (spec sections 5 and 7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/tensor.h"

namespace coli {

struct KimiConfig {
    std::string family;  // config model_type: kimi_linear | kimi_k3
    std::string prefix;  // tensor name prefix: "" or "language_model."
    int64_t vocab, d_model, d_ff,
        d_expert;  // d_ff: the dense layers' MLP width; d_expert: one routed expert's
    int n_layers;
    float rms_eps;
    int64_t max_ctx;
    std::vector<bool> mla_layer;  // per layer: MLA (full attention), else KDA

    // MLA (NoPE: no rotary embedding at all, spec 5.2).
    int n_heads, q_lora, kv_lora, nope_dim, rope_dim, v_dim;  // q_lora 0: q_proj without LoRA
    bool mla_output_gate;                                     // K3: attn * sigmoid(W_g x) before o_proj

    // KDA (spec 5.1).
    int kda_heads, kda_dim, conv_kernel;
    float gate_lower_bound;  // 0: softplus forget gate (Kimi Linear); < 0: K3's lower-bounded gate
    bool full_rank_gate;     // output gate W_g x (K3) instead of W_gb W_ga x

    // MoE: sigmoid router with selection bias, no groups beyond num_expert_group, dense first layers.
    int n_experts, top_k, n_group, n_shared, n_dense;
    bool renormalize;
    float routed_scaling;
    int64_t d_latent = 0;      // K3 LatentMoE: experts work in this width (0: in d_model)
    bool latent_norm = false;  // K3: RMSNorm on the routed experts' latent sum
    GluActivation act;         // the MLP and expert activation (SiTU in K3)

    int attn_res_block = 0;  // K3 attention residuals: layers per block (0: plain residual stream)

    // c: the whole config.json. Throws coli::Error naming a bad or missing key.
    explicit KimiConfig(const nlohmann::json& c);

    bool is_moe(int layer) const { return layer >= n_dense; }
    int64_t expert_width() const { return d_latent > 0 ? d_latent : d_model; }
};

}  // namespace coli
