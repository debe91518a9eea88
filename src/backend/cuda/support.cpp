#include "backend/cuda/support.h"

#include <algorithm>
#include <iterator>

namespace coli {

bool cuda_supports(const OpDesc& d) {
    switch (d.op) {
        case OpKind::embedding:
        case OpKind::rms_norm:
        case OpKind::matmul:
        case OpKind::add:
        case OpKind::clamp:
        case OpKind::rope:
        case OpKind::moe_experts:
            return true;  // every weight format, any shape (odd shapes take the scalar kernels)
        case OpKind::attention:
            return true;  // any context: keys in splits
        case OpKind::route_softmax_topk:
            return d.cols <= kCudaRouteMaxExperts;
        case OpKind::slice_cols:
        case OpKind::route_sigmoid_topk:  // the logits go to the host, where the routing is used
            return true;
        case OpKind::layer_norm:
            return true;
        case OpKind::dsa_select:
            return true;  // scores and top-k on the device; top_k up to kCudaDsaMaxTopK (checked at the call)
        case OpKind::mla_attention:
            return true;  // any context (scores in passes); kv_lora up to kCudaMlaMaxLatent
        case OpKind::short_conv:
            return d.cols <= kCudaConvMaxKernel;  // cols: the kernel width
        case OpKind::kda:
            return std::ranges::find(kCudaKdaHeadDims, d.cols) !=
                   std::end(kCudaKdaHeadDims);  // cols: head_dim
        case OpKind::mul_sigmoid:
            return true;
        case OpKind::res_mix:
            return d.rows <= kCudaResMixMaxEntries;  // rows: the entries
        case OpKind::count_:
            break;
    }
    return false;
}

}  // namespace coli
