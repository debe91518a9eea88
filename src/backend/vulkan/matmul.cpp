// matmul on Vulkan: decode GEMV for up to kVulkanGemvMaxTokens tokens on rows of whole 16-byte chunks
// (one pass over the weights), the tiled GEMM for everything else.
#include <algorithm>
#include <bit>

#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr int64_t kChunkBytes = 16;      // gemv.comp reads codes as uvec4
constexpr int64_t kGemvThreads = 128;    // gemv.comp's workgroup
constexpr int64_t kGemvMaxRows = 8;      // rows per gemv.comp workgroup at most
constexpr int64_t kChunksPerThread = 2;  // chunks in flight per thread (gemv.comp)
constexpr int64_t kGemmTile = 64;        // gemm.comp's tile edge (tokens and rows)

struct MatmulPush {
    uint32_t rows, cols, n;
};

int64_t row_bytes(const vk::DeviceWeight& w) {
    return static_cast<int64_t>(WeightView{w.format, 1, w.cols, nullptr, nullptr}.data_bytes());
}

// Rows per GEMV workgroup: short rows share a workgroup so that every thread has chunks to read.
int64_t gemv_rows_per_group(const vk::DeviceWeight& w) {
    const int64_t chunks = std::max<int64_t>(1, row_bytes(w) / kChunkBytes);
    const int64_t fit = std::max<int64_t>(1, kGemvThreads * kChunksPerThread / chunks);
    return std::min(kGemvMaxRows, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(fit))));
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
    if (n <= kVulkanGemvMaxTokens && row_bytes(w) % kChunkBytes == 0) {
        const int64_t per_group = gemv_rows_per_group(w), groups = (w.rows + per_group - 1) / per_group;
        const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(groups, vk::kMaxGroups));
        const auto gy = static_cast<uint32_t>((groups + gx - 1) / gx);
        run(ctx_->subgroup_arithmetic ? "gemv_subgroup" : "gemv_shared",
            {format, static_cast<uint32_t>(n), static_cast<uint32_t>(per_group)},
            {w.data, w.scales, x, y, w.data}, push, gx, gy);
        return;
    }
    run("gemm", {format}, {w.data, w.scales, x, y}, push,
        static_cast<uint32_t>((w.rows + kGemmTile - 1) / kGemmTile),
        static_cast<uint32_t>((n + kGemmTile - 1) / kGemmTile));
}

}  // namespace coli
