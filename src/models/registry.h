// The model families of this build, keyed by config.json model_type.
#pragma once

#include <memory>

#include "models/model.h"

namespace coli {

std::unique_ptr<Model> olmoe_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
// deepseek_v3, deepseek_v32 and glm_moe_dsa.
std::unique_ptr<Model> deepseek_v3_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
std::unique_ptr<Model> deepseek_v4_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
// kimi_linear and kimi_k3.
std::unique_ptr<Model> kimi_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);

}  // namespace coli
