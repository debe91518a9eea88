// The CPU backend's registration: always built, always available.
#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"

namespace coli {

namespace {

constexpr int kRank = 100;  // last for `auto`: every device backend is preferred

bool cpu_supports(const OpDesc&) {
    return true;
}

BackendInfo cpu_probe(const BackendOptions&) {
    return {"cpu", true, true, "always available", cpu_supports, ""};
}

std::unique_ptr<Backend> cpu_create(ThreadPool& pool, const BackendOptions&) {
    return std::make_unique<CpuBackend>(pool);
}

}  // namespace

BackendEntry cpu_backend_entry() {
    return {.name = "cpu", .rank = kRank, .support = cpu_supports, .probe = cpu_probe, .create = cpu_create};
}

}  // namespace coli
