#include "backend/backend.h"

#include <array>

namespace coli {

std::string_view op_name(OpKind op) {
    static constexpr std::array<std::string_view, static_cast<size_t>(OpKind::count_)> kNames = {
        "embedding", "rms_norm",           "matmul",      "add", "clamp", "rope",
        "attention", "route_softmax_topk", "moe_experts",
    };
    return kNames[static_cast<size_t>(op)];
}

}  // namespace coli
