// The model families of this build, keyed by config.json model_type.
#pragma once

#include <memory>

#include "models/model.h"

namespace coli {

std::unique_ptr<Model> olmoe_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
std::vector<OpUse> olmoe_ops();
std::unique_ptr<Model> deepseek_v3_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);
std::vector<OpUse> deepseek_v3_ops();

}  // namespace coli
