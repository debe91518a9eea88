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

// y = sum over each token's routed experts of weight * expert(x), in ascending expert id per token.
// Experts are fetched in groups that fit the store's budget; the next group's reads are issued before
// the current group runs, so disk and compute overlap.              x: [n, d_model]; returns [n, d_model]
Tensor moe_routed(Ops& ops, ExpertStore& store, int layer, const Tensor& x, const Routing& r,
                  const ExpertWeightsOf& weights_of);

}  // namespace coli
