#include "backend/cuda/support.h"

#include <algorithm>
#include <iterator>

namespace coli {

bool cuda_supports(const OpDesc& d) {
    switch (d.op) {
        case OpKind::matmul:  // every weight format, any shape; grouped: per group on a view of its rows
            return true;
        case OpKind::embedding:
        case OpKind::rms_norm:
        case OpKind::add:
        case OpKind::clamp:
        case OpKind::rope:
        case OpKind::moe_experts:  // every GluKind through glu()
            return true;           // every weight format, any shape (odd shapes take the scalar kernels)
        case OpKind::attention:
            return true;  // any context: keys in splits
        case OpKind::route_softmax_topk:
            return d.experts <= kCudaRouteMaxExperts;
        case OpKind::slice_cols:
        case OpKind::route_sigmoid_topk:  // a host step (cuda_host_step)
            return true;
        case OpKind::layer_norm:
            return true;
        case OpKind::dsa_select:  // on the device; shared memory per block: CudaBackend::device_supports
            return d.top_k <= kCudaDsaMaxTopK && d.head_dim % kCudaDsaHeadDimMultiple == 0;
        case OpKind::mla_attention:  // any context (scores in passes)
            return d.latent <= kCudaMlaMaxLatent;
        case OpKind::short_conv:
            return d.taps >= 2 && d.taps <= kCudaConvMaxKernel;
        case OpKind::kda:
            return std::ranges::find(kCudaKdaHeadDims, d.head_dim) != std::end(kCudaKdaHeadDims);
        case OpKind::mul_sigmoid:
            return true;
        case OpKind::res_mix:
            return d.entries <= kCudaResMixMaxEntries;
        case OpKind::copy_rows:    // device copies
        case OpKind::repeat_cols:  // strided device copies
        case OpKind::hc_weights:   // one thread per token, any number of streams
        case OpKind::hc_collapse:
        case OpKind::hc_expand:
        case OpKind::compress_kv:  // one thread per (window, channel), any ratio
            return true;
        case OpKind::compressed_attention:  // any window and entries: key splits, as attention
            return true;
        case OpKind::index_topk:  // dsa_select's top-k kernel; a block's keys in shared memory
            return d.top_k <= kCudaDsaMaxTopK && d.head_dim <= kCudaIndexMaxHeadDim;
        case OpKind::count_:
            break;
    }
    return false;
}

bool cuda_host_step(const OpDesc& d) {
    return d.op == OpKind::route_sigmoid_topk;  // the logits are read back and routed by route_sigmoid_host
}

}  // namespace coli
