#include "backend/registry.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace coli {

std::vector<BackendInfo> backend_list() {
    return {
        {"cuda", false, false, "not compiled in: rebuild with -DCOLI_CUDA=ON (needs the CUDA toolkit)"},
        {"vulkan", false, false, "not compiled in: rebuild with -DCOLI_VULKAN=ON (needs Vulkan headers and glslc)"},
        {"metal", false, false, "not compiled in: Metal needs macOS"},
        {"cpu", true, true, "always available"},
    };
}

std::unique_ptr<Backend> backend_create(std::string_view name, ThreadPool& pool) {
    const std::vector<BackendInfo> all = backend_list();
    std::string chosen(name);
    if (name == "auto") {
        for (const auto& b : all)
            if (b.available) {
                chosen = b.name;
                break;
            }
    }
    for (const auto& b : all) {
        if (b.name != chosen) continue;
        check(b.available, "backend '{}' is unavailable: {}", b.name, b.detail);
        if (b.name == "cpu") return std::make_unique<CpuBackend>(pool);
    }
    std::string names;
    for (const auto& b : all) names += (names.empty() ? "" : ", ") + b.name;
    fail("unknown backend '{}' (known: auto, {})", name, names);
}

}  // namespace coli
