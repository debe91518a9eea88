// The Metal-shaped devices this build lacks: each says why (host.h).
#include "backend/metal/host.h"
#include "core/error.h"

namespace coli::metal {

#if !COLI_METAL_HOST_APPLE
std::unique_ptr<Device> metal_device_open() {
    fail("metal: not compiled in: Metal needs macOS (build there with -DCOLI_METAL=ON)");
}
#endif

#if !COLI_METAL_HOST_VULKAN
std::unique_ptr<Device> metal_device_on_vulkan(int) {
    fail("metal on vulkan: this build has no Vulkan backend (configure with -DCOLI_VULKAN=ON)");
}
#endif

}  // namespace coli::metal
