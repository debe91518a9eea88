// matmul on Vulkan: decode GEMV for up to kVulkanGemvMaxTokens tokens on rows of whole 16-byte chunks
// (one pass over the weights), the tiled GEMM for everything else.
#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr int64_t kChunkBytes = 16;  // gemv.comp reads codes as uvec4
constexpr int64_t kGemmTile = 64;    // gemm.comp's tile edge (tokens and rows)

struct MatmulPush {
    uint32_t rows, cols, n;
};

bool gemv_fits(const vk::DeviceWeight& w) {
    const WeightView row{w.format, 1, w.cols, nullptr, nullptr};
    return row.data_bytes() % kChunkBytes == 0;
}

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
    const MatmulPush push{static_cast<uint32_t>(w.rows), static_cast<uint32_t>(w.cols),
                          static_cast<uint32_t>(n)};
    const auto format = static_cast<uint32_t>(w.format);
    if (n <= kVulkanGemvMaxTokens && gemv_fits(w)) {
        const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(w.rows, vk::kMaxGroups));
        const auto gy = static_cast<uint32_t>((w.rows + gx - 1) / gx);
        run(ctx_->subgroup_arithmetic ? "gemv_subgroup" : "gemv_shared", {format, static_cast<uint32_t>(n)},
            {w.data, w.scales, x, y, w.data}, push, gx, gy);
        return;
    }
    run("gemm", {format}, {w.data, w.scales, x, y}, push,
        static_cast<uint32_t>((w.rows + kGemmTile - 1) / kGemmTile),
        static_cast<uint32_t>((n + kGemmTile - 1) / kGemmTile));
}

}  // namespace coli
