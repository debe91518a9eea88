#include "backend/vulkan/support.h"

#include "backend/vulkan/limits.h"

namespace coli {

bool vulkan_supports(const OpDesc& d) {
    switch (d.op) {
        case OpKind::moe_experts:  // SwiGLU and SiTU experts
            return d.rows * d.cols < kVulkanMaxElements;
        case OpKind::embedding:
        case OpKind::matmul:
            return d.rows * d.cols < kVulkanMaxElements;  // every weight format; 32-bit element indices
        case OpKind::rms_norm:
        case OpKind::layer_norm:
        case OpKind::add:
        case OpKind::clamp:
        case OpKind::rope:
        case OpKind::slice_cols:
        case OpKind::attention:      // any context: scores in query chunks
        case OpKind::mla_attention:  // any context and latent width
            return true;
        case OpKind::route_softmax_topk:  // the logits go to the host, where the routing is used
        case OpKind::route_sigmoid_topk:
            return true;
        case OpKind::dsa_select:
            return true;          // scores on the device, the top-k on the host
        case OpKind::short_conv:  // d.cols: the kernel width K, kept in registers
            return d.cols >= 2 && d.cols <= kVulkanConvMaxTaps;
        case OpKind::kda:  // d.cols: the head size, one invocation per value column
            return vulkan_kda_head_dim_ok(d.cols);
        case OpKind::mul_sigmoid:
        case OpKind::res_mix:  // any number of entries: a pass per entry
            return true;
        case OpKind::count_:
            break;
    }
    return false;
}

}  // namespace coli
