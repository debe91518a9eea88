// DeepSeek's multi-token-prediction (MTP) layer (docs/models.md 2.5): one more decoder layer after the
// model's, which reads the main model's last hidden state h_i (before the final norm) with the embedding of
// the token that followed it, and guesses the token after that: the draft of speculative decoding.
//   x'_i = eh_proj(cat[enorm(embed(t_{i+1})), hnorm(h_i)]);  x'_i = DecoderLayer(x'_i);
//   draft logits = lm_head(shared_head.norm(x'_i))
// The embedding and lm_head are the main model's (the checkpoint's copies under the layer, embed_tokens and
// shared_head.head, are equal to them and are not read).
#pragma once

#include <cstdint>
#include <string>

#include "backend/ops.h"
#include "nn/weights.h"

namespace coli {

struct MtpWeights {
    Weight enorm, hnorm;  // RMSNorm gains of the token's embedding and of the main model's hidden state
    Weight eh_proj;       // [D, 2D]: the two normed rows, concatenated, to one
    Weight head_norm;     // shared_head.norm: the final RMSNorm before the main model's lm_head
};

// The layer's own tensors under prefix ("model.layers.61."), each checked against d_model (hidden_size).
MtpWeights mtp_load(WeightLoader& load, const std::string& prefix, int64_t d_model);

// The decoder layer's input: eh_proj(cat[enorm(e), hnorm(h)]).        e, h: [n, D]; returns [n, D]
Tensor mtp_input(Ops& ops, const MtpWeights& w, const Tensor& e, const Tensor& h, float eps);

}  // namespace coli
