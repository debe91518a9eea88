// The Vulkan backend's registration and its option --vk-device. Built into every binary (the capability
// table answers everywhere); COLI_HAVE_VULKAN says whether the backend itself is compiled in
// (vulkan/backend.cmake).
#include "backend/registry.h"
#include "backend/vulkan/support.h"

#if COLI_HAVE_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace coli {

namespace {

constexpr int kRank = 20;  // after CUDA for `auto`

const BackendOption kDevice{
    "vk-device", "Vulkan device index (-1 = the best one; `coli backends` lists them)", "-1", true};

#if COLI_HAVE_VULKAN
int device_of(const BackendOptions& o) {
    return static_cast<int>(backend_option_int(o, kDevice));
}

BackendInfo probe(const BackendOptions& o) {
    const VulkanProbe p = vulkan_probe(device_of(o));
    return {"vulkan",
            true,
            p.ok,
            p.detail,
            vulkan_supports,
            p.software ? "a software device (slower than the cpu backend); --backend vulkan uses it" : ""};
}

std::unique_ptr<Backend> create(ThreadPool& pool, const BackendOptions& o) {
    return vulkan_backend_create(o.vram_bytes, device_of(o), pool);
}

void bench(const BackendOptions& o) {
    vulkan_bench_print(device_of(o));
}
#endif

}  // namespace

BackendEntry vulkan_backend_entry() {
#if COLI_HAVE_VULKAN
    return {.name = "vulkan",
            .rank = kRank,
            .support = vulkan_supports,
            .host_step = vulkan_host_step,
            .options = {kDevice},
            .probe = probe,
            .create = create,
            .bench = bench};
#else
    return {.name = "vulkan",
            .rank = kRank,
            .support = vulkan_supports,
            .host_step = vulkan_host_step,
            .options = {kDevice},
            .absent = "not compiled in: rebuild with -DCOLI_VULKAN=ON (needs Vulkan headers and glslc)"};
#endif
}

}  // namespace coli
