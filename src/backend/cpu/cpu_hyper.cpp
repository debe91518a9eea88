// Hyper-connections on the CPU (DeepSeek-V4): the residual stream kept as S parallel streams, collapsed into
// a sublayer's input with `pre` weights and spread back with `post` and the Sinkhorn-normalized `comb`. In
// f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/activations.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_tensor.h"

namespace coli {

using cpu::row;

void CpuBackend::hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                            Tensor& out) {
    hc_weights_args_check(mix, base, scale, s, out);
    const int64_t S = s.streams;
    const auto* b = static_cast<const float*>(base.host.data);   // [mix.cols]
    const auto* k = static_cast<const float*>(scale.host.data);  // [3] or [1]
    const bool head = mix.cols() == S;
    std::vector<float> col(S);
    for (int64_t t = 0; t < mix.rows(); ++t) {
        const float* m = row(mix, t);
        float* o = row(out, t);
        for (int64_t j = 0; j < S; ++j) o[j] = sigmoid(m[j] * k[0] + b[j]) + s.eps;  // pre
        if (head) continue;
        for (int64_t j = S; j < 2 * S; ++j) o[j] = 2.0f * sigmoid(m[j] * k[1] + b[j]);  // post
        float* comb = o + 2 * S;                                                        // [S, S], [j][k]
        for (int64_t j = 0; j < S; ++j) {  // softmax over k of each row j, + eps
            float* r = comb + j * S;
            const int64_t c0 = 2 * S + j * S;
            for (int64_t c = 0; c < S; ++c) r[c] = m[c0 + c] * k[2] + b[c0 + c];
            const float top = *std::max_element(r, r + S);
            float total = 0;
            for (int64_t c = 0; c < S; ++c) total += r[c] = std::exp(r[c] - top);
            for (int64_t c = 0; c < S; ++c) r[c] = r[c] / total + s.eps;
        }
        // Sinkhorn: columns, then (iters - 1) rounds of rows and columns, each divided by its sum + eps.
        const auto columns = [&] {
            std::fill(col.begin(), col.end(), 0.0f);
            for (int64_t j = 0; j < S; ++j)
                for (int64_t c = 0; c < S; ++c) col[c] += comb[j * S + c];
            for (int64_t j = 0; j < S; ++j)
                for (int64_t c = 0; c < S; ++c) comb[j * S + c] /= col[c] + s.eps;
        };
        columns();
        for (int it = 1; it < s.sinkhorn_iters; ++it) {
            for (int64_t j = 0; j < S; ++j) {
                float* r = comb + j * S;
                float sum = 0;
                for (int64_t c = 0; c < S; ++c) sum += r[c];
                for (int64_t c = 0; c < S; ++c) r[c] /= sum + s.eps;
            }
            columns();
        }
    }
}

void CpuBackend::hc_collapse(const Tensor& x, const Tensor& weights, int streams, Tensor& out) {
    hc_collapse_args_check(x, weights, streams, out);
    const int64_t d = out.cols();
    for (int64_t t = 0; t < x.rows(); ++t) {
        const float* pre = row(weights, t);
        float* o = row(out, t);
        std::fill_n(o, d, 0.0f);
        for (int64_t j = 0; j < streams; ++j) {
            const float* xj = row(x, t) + j * d;
            for (int64_t c = 0; c < d; ++c) o[c] += pre[j] * xj[c];
        }
    }
}

void CpuBackend::hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                           Tensor& out) {
    hc_expand_args_check(x, y, weights, streams, out);
    const int64_t S = streams, d = y.cols();
    for (int64_t t = 0; t < x.rows(); ++t) {
        const float* post = row(weights, t) + S;
        const float* comb = post + S;  // [S, S], [j][k]
        const float* yt = row(y, t);
        for (int64_t k = 0; k < S; ++k) {
            float* o = row(out, t) + k * d;
            for (int64_t c = 0; c < d; ++c) o[c] = post[k] * yt[c];
            for (int64_t j = 0; j < S; ++j) {
                const float* xj = row(x, t) + j * d;
                for (int64_t c = 0; c < d; ++c) o[c] += comb[j * S + k] * xj[c];
            }
        }
    }
}

void CpuBackend::repeat_cols(const Tensor& x, int times, Tensor& out) {
    check_shape(out, x.rows(), int64_t{times} * x.cols(), "repeat_cols out");
    for (int64_t t = 0; t < x.rows(); ++t)
        for (int k = 0; k < times; ++k) std::copy_n(row(x, t), x.cols(), row(out, t) + k * x.cols());
}

}  // namespace coli
