#include "backend/registry.h"

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/support.h"
#include "backend/vulkan/support.h"
#include "core/error.h"

#if COLI_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#if COLI_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace coli {

namespace {

bool cpu_supports(const OpDesc&) {
    return true;
}

BackendInfo cuda_info() {
#if COLI_HAVE_CUDA
    const CudaProbe p = cuda_probe();
    return {"cuda", true, p.ok, p.detail, cuda_supports, ""};
#else
    // The capability table is plain C++, built everywhere, so the docs' matrix does not depend on the build.
    return {"cuda",        false,
            false,         "not compiled in: rebuild with -DCOLI_CUDA=ON (needs the CUDA toolkit)",
            cuda_supports, ""};
#endif
}

// probe: look for a device (loading the driver: lavapipe's costs ~150 MB of RSS, which a run on another
// backend should not pay).
BackendInfo vulkan_info(int device, bool probe) {
#if COLI_HAVE_VULKAN
    if (!probe) return {"vulkan", true, false, "not probed", vulkan_supports, ""};
    const VulkanProbe p = vulkan_probe(device);
    return {"vulkan",
            true,
            p.ok,
            p.detail,
            vulkan_supports,
            p.software ? "a software device (slower than the cpu backend); --backend vulkan uses it" : ""};
#else
    return {
        "vulkan",        false,
        false,           "not compiled in: rebuild with -DCOLI_VULKAN=ON (needs Vulkan headers and glslc)",
        vulkan_supports, ""};
#endif
}

std::vector<BackendInfo> list_make(int vk_device, bool probe_vulkan) {
    return {
        cuda_info(),
        vulkan_info(vk_device, probe_vulkan),
        {"metal", false, false, "not compiled in: Metal needs macOS", nullptr, ""},
        {"cpu", true, true, "always available", cpu_supports, ""},
    };
}

}  // namespace

std::vector<BackendInfo> backend_list(int vk_device) {
    return list_make(vk_device, true);
}

std::unique_ptr<Backend> backend_create(std::string_view name, ThreadPool& pool, const BackendOptions& opts) {
    const std::vector<BackendInfo> all = list_make(opts.vk_device, name == "auto" || name == "vulkan");
    std::string chosen(name);
    if (name == "auto") {
        for (const auto& b : all)
            if (b.available && b.auto_skip.empty()) {
                chosen = b.name;
                break;
            }
        std::string passed;
        for (const auto& b : all) {
            if (b.name == chosen) break;
            passed += fmt::format("; {} skipped: {}", b.name, b.available ? b.auto_skip : b.detail);
        }
        fmt::print(stderr, "backend auto: chose {}{}\n", chosen, passed);
    }
    for (const auto& b : all) {
        if (b.name != chosen) continue;
        check(b.available, "backend '{}' is unavailable: {}", b.name, b.detail);
        if (b.name == "cpu") return std::make_unique<CpuBackend>(pool);
#if COLI_HAVE_CUDA
        if (b.name == "cuda") return cuda_backend_create(opts.vram_bytes);
#endif
#if COLI_HAVE_VULKAN
        if (b.name == "vulkan") return vulkan_backend_create(opts.vram_bytes, opts.vk_device, pool);
#endif
    }
    std::string names;
    for (const auto& b : all) names += (names.empty() ? "" : ", ") + b.name;
    fail("unknown backend '{}' (known: auto, {})", name, names);
}

}  // namespace coli
