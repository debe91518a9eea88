// The CUDA backend's ops for DeepSeek-V4's hyper-connections: hc_weights, hc_collapse, hc_expand (hyper.cu)
// and repeat_cols (strided device copies, as slice_cols).
#include "backend/cuda/cuda_backend_impl.h"

namespace coli {

using cuda::cuda_check;
using cuda::dev;

void CudaBackend::hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                             Tensor& out) {
    fault_check(OpKind::hc_weights);
    hc_weights_args_check(mix, base, scale, s, out);
    check_owner(mix, "hc_weights mix");
    if (mix.numel() == 0) return;
    check_owner(out, "hc_weights out");
    const cuda::HcArgs a{s.streams, mix.cols(), s.sinkhorn_iters, s.eps};
    cuda::hc_weights(dev(mix), static_cast<const float*>(resident(base, "hc_weights").data),
                     static_cast<const float*>(resident(scale, "hc_weights").data), mix.rows(), a, dev(out),
                     ctx_->compute);
}

void CudaBackend::hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out) {
    fault_check(OpKind::hc_collapse);
    hc_collapse_args_check(x, weights, streams, out);
    check_owner(x, "hc_collapse x");
    check_owner(weights, "hc_collapse weights");
    if (out.numel() == 0) return;
    check_owner(out, "hc_collapse out");
    cuda::hc_collapse(dev(x), dev(weights), x.rows(), out.cols(), streams, weights.cols(), dev(out),
                      ctx_->compute);
}

void CudaBackend::hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                            Tensor& out) {
    fault_check(OpKind::hc_expand);
    hc_expand_args_check(x, y, weights, streams, out);
    for (const Tensor* t : {&x, &y, &weights}) check_owner(*t, "hc_expand");
    if (out.numel() == 0) return;
    check_owner(out, "hc_expand out");
    cuda::hc_expand(dev(x), dev(y), dev(weights), x.rows(), y.cols(), streams, dev(out), ctx_->compute);
}

void CudaBackend::repeat_cols(const Tensor& x, int times, Tensor& out) {
    fault_check(OpKind::repeat_cols);
    check_shape(out, x.rows(), int64_t{times} * x.cols(), "repeat_cols out");
    check_owner(x, "repeat_cols x");
    if (out.numel() == 0) return;
    check_owner(out, "repeat_cols out");
    const size_t row_bytes = static_cast<size_t>(x.cols()) * sizeof(float);
    for (int k = 0; k < times; ++k)  // copy k: out's columns [k D, (k + 1) D) of every row
        cuda_check(cudaMemcpy2DAsync(dev(out) + k * x.cols(), static_cast<size_t>(out.cols()) * sizeof(float),
                                     dev(x), row_bytes, row_bytes, static_cast<size_t>(x.rows()),
                                     cudaMemcpyDeviceToDevice, ctx_->compute),
                   "repeat_cols");
}

}  // namespace coli
