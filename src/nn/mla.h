// Multi-head latent attention (MLA, docs/models.md 2.1 and 2.2): queries through an optional q LoRA; keys
// and values from one compressed latent per token plus one rope key shared by all heads. The cache keeps the
// latent and the shared key (kv_lora + rope_dim floats per token) and Ops::mla_attention attends over it.
// DeepSeek-V3 and GLM rotate the rope dims; Kimi's MLA is NoPE (5.2: nothing rotated) and K3 gates its
// output (7.1); DeepSeek-V3.2 and GLM pass DSA's choice of keys (3).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "backend/ops.h"
#include "nn/batch.h"
#include "nn/weights.h"

namespace coli {

// One family's MLA, from its config.
struct Mla {
    MlaShape shape;  // heads, nope / rope / v dims, kv_lora, softmax scale
    int q_lora = 0;  // q LoRA rank; 0: q_proj without LoRA
    // The rotation of q's rope dims and of the shared key; none: NoPE.
    std::optional<RopeParams> rope_q, rope_k;
    bool output_gate = false;  // attn * sigmoid(W_g x) before o_proj (Kimi K3)

    int64_t cache_width() const { return shape.kv_lora + shape.rope_dim; }  // cached floats per token
};

struct MlaWeights {
    Weight q_a, q_a_norm, q_b;  // q_a / q_a_norm empty without q LoRA (q_b is then q_proj)
    Weight kv_a, kv_a_norm;     // [kv_lora + dr, D]; the latent's norm
    Weight kv_b, o;             // [H (dn + dv), kv_lora] (absorbed); [D, H dv]
    Weight gate;                // [H dv, D] output gate, else empty
};

// The weights under prefix ("model.layers.3.self_attn."), transformers' names, each checked against the
// shape m and d_model (hidden_size) give it.
MlaWeights mla_load(WeightLoader& load, const std::string& prefix, const Mla& m, int64_t d_model);

// One layer's cache: the latents [max_ctx, kv_lora] and the shared keys [max_ctx, dr].
KvCache mla_cache_new(Ops& ops, const Mla& m, int64_t max_ctx);

// The query latent: RMSNorm(W_qa x) with a q LoRA, else x itself. DSA's indexer reads it too.
//                                                          x: [n, D]; returns [n, q_lora] (or x: [n, D])
Tensor mla_query_latent(Ops& ops, const Mla& m, const MlaWeights& w, const Tensor& x);

// Attention of the new rows x over the caches, through o_proj: each segment's rows (at positions pos0 ...)
// over cache(seq), its sequence's cache of this layer. c_q: mla_query_latent(x); selection: DSA's key
// positions per query [n, top_k], or null for every position.       x: [n, D]; returns [n, D]
Tensor mla_forward(Ops& ops, const Mla& m, const MlaWeights& w, const Tensor& x, const Tensor& c_q,
                   Batch batch, const std::function<KvCache&(int seq)>& cache,
                   const Tensor* selection = nullptr);

}  // namespace coli
