// Routed experts: the router's choice goes to the expert store, whose cached bytes become expert
// weights that run on the backend. Model-agnostic: a model supplies how an expert's tensors map to
// weights.
#pragma once

#include <functional>

#include "backend/ops.h"
#include "store/expert_store.h"

namespace coli {

// Turns a cached expert's tensors (in the order the model gave ExpertLayout) into SwiGLU weights.
using ExpertWeightsOf = std::function<ExpertWeights(const ExpertHandle&)>;

// What a family calls a routed expert's three projections under the expert's prefix.
struct SwigluNames {
    std::string gate = "gate_proj";  // activated, then multiplied by up (OLMoE, DeepSeek, GLM)
    std::string up = "up_proj";      // the linear branch
    std::string down = "down_proj";  // back to the model width
};
// Kimi Linear and Kimi K3: experts.E.w1 (gate), .w3 (up), .w2 (down).
inline const SwigluNames kKimiExpertNames{"w1", "w3", "w2"};

// The tensors of one routed SwiGLU expert under `prefix` ("model.layers.3.mlp.experts.7."): the gate, up and
// down weights, each followed by its block scales when the checkpoint stores them (FP8).
std::vector<std::string> swiglu_expert_tensors(const Checkpoint& ckpt, const std::string& prefix,
                                               const SwigluNames& names = {});
// SwiGLU weights from a cached expert whose parts follow swiglu_expert_tensors.
ExpertWeights swiglu_expert_weights(const ExpertHandle& e);

// y = sum over each token's routed experts of weight * expert(x), in ascending expert id per token.
// Experts are fetched in groups that fit the store's budget; the next group's reads are issued before
// the current group runs, so disk and compute overlap.              x: [n, d_model]; returns [n, d_model]
// after_fetch, when given, runs once the last group's experts are in RAM and before they compute: the
// moment to start reads for the next layer (moe_prefetch).
Tensor moe_routed(Ops& ops, ExpertStore& store, int layer, const Tensor& x, const Routing& r,
                  const ExpertWeightsOf& weights_of, const std::function<void()>& after_fetch = {});

// Guesses the experts `layer` will use by applying its router to x (the current layer's MoE input, a
// close proxy for the next layer's) and starts their reads. It changes what is cached, never a result.
//                                                                  x: [n, d_model]; router: [E, d_model]
void moe_prefetch(Ops& ops, ExpertStore& store, int layer, const Weight& router, const Tensor& x, int top_k);

}  // namespace coli
