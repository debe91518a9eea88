#include "backend/vulkan/support.h"

#include "backend/vulkan/limits.h"

namespace coli {

bool vulkan_supports(const OpDesc& d) {
    switch (d.op) {
        case OpKind::moe_experts:  // SwiGLU, SiTU and clamped SwiGLU experts
            return d.rows * d.cols < kVulkanMaxElements;
        case OpKind::matmul:  // grouped (block-diagonal): a grid dimension of groups
            return d.groups <= kVulkanMaxGroups && d.rows * d.cols < kVulkanMaxElements;
        case OpKind::embedding:
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
        case OpKind::route_softmax_topk:  // host steps (vulkan_host_step)
        case OpKind::route_sigmoid_topk:
            return true;
        case OpKind::dsa_select:  // scores and top-k on the device
        case OpKind::index_topk:  // the same shaders over compressed keys
            return d.heads <= kVulkanDsaMaxHeads;
        case OpKind::short_conv:  // the kernel's window is kept in registers
            return d.taps >= 2 && d.taps <= kVulkanConvMaxTaps;
        case OpKind::kda:  // one workgroup per head, one invocation per value column
            return vulkan_kda_head_dim_ok(d.head_dim) && d.heads <= kVulkanMaxGroups;
        case OpKind::mul_sigmoid:
        case OpKind::res_mix:  // any number of entries: a pass per entry
            return true;
        case OpKind::copy_rows:   // buffer copies
        case OpKind::hc_weights:  // one invocation per token, any number of streams
        case OpKind::hc_collapse:
        case OpKind::hc_expand:
        case OpKind::repeat_cols:
            return true;
        case OpKind::compress_kv:  // one invocation per (window, channel), any ratio
            return true;
        case OpKind::compressed_attention:  // attention's shaders over each query's keys
            return true;
        case OpKind::count_:
            break;
    }
    return false;
}

bool vulkan_host_step(const OpDesc& d) {
    // The logits are read back and routed on the host, by the CPU backend's code.
    return d.op == OpKind::route_softmax_topk || d.op == OpKind::route_sigmoid_topk;
}

}  // namespace coli
