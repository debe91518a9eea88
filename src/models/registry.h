// The model families of this build, keyed by config.json model_type, and the op lists of those that
// `coli backends` does not record yet (runtime/op_record.cpp).
#pragma once

#include <memory>

#include "models/model.h"

namespace coli {

std::unique_ptr<Model> olmoe_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
// deepseek_v3, deepseek_v32 and glm_moe_dsa.
std::unique_ptr<Model> deepseek_v3_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
std::vector<OpUse> glm_moe_dsa_ops();
std::unique_ptr<Model> deepseek_v4_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
// kimi_linear and kimi_k3.
std::unique_ptr<Model> kimi_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
std::vector<OpUse> kimi_linear_ops();

}  // namespace coli
