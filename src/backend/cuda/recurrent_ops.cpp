// The CUDA backend's ops for linear-attention layers and their gates (Kimi): short_conv, kda, mul_sigmoid
// and res_mix (kernels in recurrent.cu and elementwise.cu).
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"

namespace coli {

using cuda::dev;

namespace {
const float* f32_data(const cuda::DeviceWeight& w) {
    return static_cast<const float*>(w.data);
}
}  // namespace

void CudaBackend::short_conv(const Tensor& x, const Weight& w, Tensor& state, Tensor& out) {
    fault_check(OpKind::short_conv);
    short_conv_args_check(x, w, state, out);
    for (const Tensor* t : {&x, static_cast<const Tensor*>(&state)}) check_owner(*t, "short_conv");
    cuda::short_conv(dev(x), f32_data(resident(w, "short_conv")), static_cast<int>(w.cols()), x.rows(),
                     x.cols(), dev(state), dev(out), ctx_->compute);
}

void CudaBackend::kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state,
                      Tensor& out) {
    fault_check(OpKind::kda);
    kda_args_check(q, k, v, g, beta, a_log, dt_bias, s, state, out);
    for (const Tensor* t : {&q, &k, &v, &g, &beta, static_cast<const Tensor*>(&state)})
        check_owner(*t, "kda");
    const cuda::KdaArgs a{s.n_heads, s.head_dim, s.gate_lower_bound};
    cuda::kda(dev(q), dev(k), dev(v), dev(g), dev(beta), f32_data(resident(a_log, "kda")),
              f32_data(resident(dt_bias, "kda")), q.rows(), a, dev(state), dev(out), ctx_->compute);
}

void CudaBackend::mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) {
    fault_check(OpKind::mul_sigmoid);
    check_owner(a, "mul_sigmoid a");
    check_owner(b, "mul_sigmoid b");
    check_shape(b, a.rows(), a.cols(), "mul_sigmoid b");
    check_shape(out, a.rows(), a.cols(), "mul_sigmoid out");
    cuda::mul_sigmoid(dev(a), dev(b), a.numel(), dev(out), ctx_->compute);
}

void CudaBackend::res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) {
    fault_check(OpKind::res_mix);
    res_mix_args_check(entries, w, out);
    std::vector<const float*> rows;
    for (const Tensor& e : entries) {
        check_owner(e, "res_mix entry");
        rows.push_back(dev(e));
    }
    cuda::res_mix(rows.data(), static_cast<int>(rows.size()), f32_data(resident(w, "res_mix")), eps,
                  out.rows(), out.cols(), dev(out), ctx_->compute);
}

}  // namespace coli
