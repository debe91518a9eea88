#include "nn/mtp.h"

namespace coli {

MtpWeights mtp_load(WeightLoader& load, const std::string& prefix, int64_t d_model) {
    const ConfigShape row{{d_model}, "hidden_size"};
    MtpWeights w;
    w.enorm = load.vector(prefix + "enorm.weight", row);
    w.hnorm = load.vector(prefix + "hnorm.weight", row);
    w.eh_proj = load.matrix(prefix + "eh_proj.weight", {{d_model, 2 * d_model}, "hidden_size"});
    w.head_norm = load.vector(prefix + "shared_head.norm.weight", row);
    return w;
}

Tensor mtp_input(Ops& ops, const MtpWeights& w, const Tensor& e, const Tensor& h, float eps) {
    Tensor both = ops.concat_cols(ops.rms_norm(e, w.enorm, eps), ops.rms_norm(h, w.hnorm, eps));  // [n, 2D]
    return ops.matmul(w.eh_proj, both);                                                           // [n, D]
}

}  // namespace coli
