// Fault injection and output poisoning, read once for every device backend from two variables that name
// the backend:
//   COLI_FAIL_OP=backend:op[,backend:op...]    those ops throw on that backend (e.g. cuda:matmul,
//                                              vulkan:moe_experts), to exercise the counted CPU fallback
//   COLI_POISON_OUTPUTS=backend[,backend...]   ops' outputs start as NaN instead of undefined on those
//                                              backends (1: on every one), so that an op which leaves part
//                                              of its output unwritten fails the op tests
// The per-backend names these replace (COLI_<BACKEND>_FAIL_OP, COLI_<BACKEND>_POISON_OUTPUTS) are refused
// with a message that names the new variable, so that a script still setting them does not test nothing.
#pragma once

#include <array>
#include <string_view>

#include "backend/backend.h"

namespace coli {

inline constexpr const char* kFailOpEnv = "COLI_FAIL_OP";
inline constexpr const char* kPoisonOutputsEnv = "COLI_POISON_OUTPUTS";

using OpSet = std::array<bool, static_cast<size_t>(OpKind::count_)>;

// The ops COLI_FAIL_OP fails on `backend` (warns when any). An entry without a backend or with an unknown
// op name is a coli::Error.
OpSet fault_ops(std::string_view backend);
// Whether COLI_POISON_OUTPUTS names `backend` (or is 1).
bool poison_outputs(std::string_view backend);

}  // namespace coli
