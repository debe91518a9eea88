// The Metal backend's registration: a known name with no backend written yet.
#include "backend/registry.h"

namespace coli {

namespace {
constexpr int kRank = 30;  // after CUDA and Vulkan for `auto`
}  // namespace

BackendEntry metal_backend_entry() {
    return {.name = "metal", .rank = kRank, .absent = "not compiled in: Metal needs macOS"};
}

}  // namespace coli
