// matmul on Vulkan: decode GEMV (gemv.cpp) for up to kVulkanGemvMaxTokens tokens on rows of whole 16-byte
// chunks (one pass over the weights), the tiled GEMM for everything else.
#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr int64_t kGemmTile = 64;  // gemm.comp's tile edge (tokens and rows)

struct MatmulPush {
    uint32_t rows, cols, n;
};

}  // namespace

void VulkanBackend::matmul(const Weight& w, const Tensor& x, Tensor& y) {
    fault_check(OpKind::matmul);
    check_owner(x, "matmul x");
    check_shape(x, x.rows(), w.cols(), "matmul x");
    check_shape(y, x.rows(), w.rows(), "matmul y");
    matmul_device(resident(w, "matmul"), buffer_of(x), x.rows(), buffer_of(y));
}

void VulkanBackend::matmul_device(const vk::DeviceWeight& w, const vk::BufferPtr& x, int64_t n,
                                  const vk::BufferPtr& y) {
    if (n == 0) return;
    if (n <= kVulkanGemvMaxTokens && vk::gemv_fits(w)) {
        gemv({{&w}, 1, {0, static_cast<uint32_t>(n)}, x, nullptr, y, {}});
        return;
    }
    const MatmulPush push{static_cast<uint32_t>(w.rows), static_cast<uint32_t>(w.cols),
                          static_cast<uint32_t>(n)};
    run("gemm", {static_cast<uint32_t>(w.format)}, {w.data, w.scales, x, y}, push,
        static_cast<uint32_t>((w.rows + kGemmTile - 1) / kGemmTile),
        static_cast<uint32_t>((n + kGemmTile - 1) / kGemmTile));
}

}  // namespace coli
