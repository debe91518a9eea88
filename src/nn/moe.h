// Routed experts: the router's choice goes to the expert store, whose cached bytes become expert
// weights that run on the backend. Model-agnostic: a model supplies how an expert's tensors map to
// weights.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "nn/weights.h"
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
// down weights, each stored as `<name>.weight` (followed by its `_scale_inv` block scales when the checkpoint
// has them: FP8) or as compressed-tensors MXFP4, `<name>.weight_packed` followed by `<name>.weight_scale`.
// A projection stored neither way is listed as `<name>.weight`, which the expert index then names as missing.
std::vector<std::string> swiglu_expert_tensors(const Checkpoint& ckpt, const std::string& prefix,
                                               const SwigluNames& names = {});
// Gate, up and down weights viewing a cached expert's bytes in place, its parts as swiglu_expert_tensors
// lists them (each weight followed by its scales where it has them).
ExpertWeights swiglu_expert_weights(const ExpertHandle& e);

// y = sum over each token's routed experts of weight * expert(x), in ascending expert id per token.
// Experts are fetched in groups that fit the store's budget; the next group's reads are issued before
// the current group runs, so disk and compute overlap. A group is a run of ascending ids, because
// moe_experts adds into y in call order and the combine order must not depend on the budget; within a
// group the store issues the reads in disk order (file, offset), whatever the ids' order on disk.
// after_fetch, when given, runs once the last group's experts are in RAM and before they compute: the
// moment to start reads for the next layer (moe_prefetch).
//                                                                  x: [n, d_model]; returns [n, d_model]
Tensor moe_routed(Ops& ops, ExpertStore& store, int layer, const Tensor& x, const Routing& r,
                  const ExpertWeightsOf& weights_of, const std::function<void()>& after_fetch = {});

// A dense MLP's (or a layer's shared experts', run as one) widths as config.json gives them.
struct MlpWidths {
    int64_t d_model;     // hidden_size
    int64_t d_ff;        // the hidden width: gate_proj and up_proj [d_ff, d_model], down_proj [d_model, d_ff]
    std::string ff_key;  // the config key(s) d_ff comes from, for errors
};

// A dense MLP (or a layer's shared experts, run as one) under prefix ("model.layers.0.mlp."): gate_proj,
// up_proj and down_proj, checked against widths. Named for device expert tiers as expert `id` of `layer`,
// an id past the routed experts.
ExpertWeights mlp_load(WeightLoader& load, const std::string& prefix, const MlpWidths& widths, int32_t id,
                       int layer, GluActivation act = {});

// y += mlp(x) for every token: a dense MLP or shared experts, run as one expert of weight 1.
//                                                                        x, y: [n, d_model]
void mlp_add(Ops& ops, const ExpertWeights& mlp, const Tensor& x, Tensor& y);

// Starts the reads of the experts `layer` will likely use, as route() chooses them: the layer's own router
// applied to the current layer's MoE input, a close proxy for its own. Nothing when the layer is held in RAM
// (route() is not called then: on a GPU backend it would wait for the device a second time in the layer). It
// changes what is cached, never a result.
void moe_prefetch(ExpertStore& store, int layer, const std::function<Routing()>& route);

}  // namespace coli
