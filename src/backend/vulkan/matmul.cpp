// matmul on Vulkan: decode GEMV (gemv.cpp) for up to kVulkanGemvMaxTokens tokens on rows of whole 16-byte
// chunks (one pass over the weights), the tiled GEMM for everything else. Both take the grouped
// (block-diagonal) form, each row block of the weight reading its block of x's columns.
#include "backend/vulkan/limits.h"
#include "backend/vulkan/vulkan_backend_impl.h"
#include "core/error.h"

namespace coli {

namespace {

constexpr int64_t kGemmTile = 64;  // gemm.comp's tile edge (tokens and rows)

struct MatmulPush {
    uint32_t rows, cols, n;  // rows of a group
    uint32_t groups;
};

}  // namespace

void VulkanBackend::matmul(const Weight& w, const Tensor& x, Tensor& y) {
    fault_check(OpKind::matmul);
    check_owner(x, "matmul x");
    const int64_t groups = w.cols() > 0 ? x.cols() / w.cols() : 1;
    check(groups >= 1 && x.cols() == groups * w.cols() && w.rows() % groups == 0,
          "matmul: x [{}, {}] for a [{}, {}] weight", x.rows(), x.cols(), w.rows(), w.cols());
    check_shape(y, x.rows(), w.rows(), "matmul y");
    matmul_device(resident(w, "matmul"), buffer_of(x), x.rows(), buffer_of(y), groups);
}

void VulkanBackend::matmul_device(const vk::DeviceWeight& w, const vk::BufferPtr& x, int64_t n,
                                  const vk::BufferPtr& y, int64_t groups) {
    if (n == 0) return;
    if (n <= kVulkanGemvMaxTokens && vk::gemv_fits(w, groups)) {
        vk::GemvJobs jobs{{&w}, 1, {0, static_cast<uint32_t>(n)}, x, nullptr, y, {}};
        jobs.groups = static_cast<uint32_t>(groups);
        gemv(jobs);
        return;
    }
    const int64_t rows = w.rows / groups;  // of a group
    const MatmulPush push{static_cast<uint32_t>(rows), static_cast<uint32_t>(w.cols),
                          static_cast<uint32_t>(n), static_cast<uint32_t>(groups)};
    run_slots("gemm", {static_cast<uint32_t>(w.format)}, {w.data, w.scales, x, y}, {}, push,
              static_cast<uint32_t>((rows + kGemmTile - 1) / kGemmTile),
              static_cast<uint32_t>((n + kGemmTile - 1) / kGemmTile), static_cast<uint32_t>(groups));
}

}  // namespace coli
