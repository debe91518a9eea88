#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "backend/activations.h"
#include "backend/cpu/cpu_tensor.h"
#include "core/pages.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::check_shape;
using cpu::data;
using cpu::row;

CpuBackend::CpuBackend(ThreadPool& pool) : pool_(pool) {}

std::string CpuBackend::description() const {
    return fmt::format("cpu ({} threads, {})", pool_.size(), simd_name(simd_active()));
}

Tensor CpuBackend::tensor_new(int64_t rows, int64_t cols) {
    check(rows >= 0 && cols >= 0, "tensor_new: negative shape [{}, {}]", rows, cols);
    const size_t bytes = std::max<size_t>(1, static_cast<size_t>(rows * cols)) * sizeof(float);
    // Fresh zero pages from the kernel, not new float[](): they cost memory and time only where written (a
    // KV cache sized for the whole context, at start); large ones in huge pages (core/pages.h).
    if (bytes >= kHugePageBytes) {
        void* p = pages_map(bytes);
        check(p != MAP_FAILED, "tensor_new: cannot allocate [{}, {}] floats", rows, cols);
        return Tensor(this, rows, cols, std::shared_ptr<void>(p, PagesUnmap{bytes}));
    }
    void* p = std::calloc(bytes, 1);
    check(p != nullptr, "tensor_new: cannot allocate [{}, {}] floats", rows, cols);
    return Tensor(this, rows, cols, std::shared_ptr<void>(p, std::free));
}

float* CpuBackend::scratch(Tensor& t, int64_t n) {
    if (t.numel() < n) t = tensor_new(1, n);
    return data(t);
}

void CpuBackend::tensor_write(Tensor& t, std::span<const float> src) {
    check(static_cast<int64_t>(src.size()) == t.numel(), "tensor_write: {} floats into {}", src.size(),
          t.numel());
    std::memcpy(data(t), src.data(), src.size_bytes());
}

void CpuBackend::tensor_read(const Tensor& t, std::span<float> dst) {
    check(static_cast<int64_t>(dst.size()) == t.numel(), "tensor_read: {} floats from {}", dst.size(),
          t.numel());
    std::memcpy(dst.data(), data(t), dst.size_bytes());
}

void CpuBackend::embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
    check_shape(out, static_cast<int64_t>(ids.size()), table.cols(), "embedding out");
    for (size_t i = 0; i < ids.size(); ++i) {
        check(ids[i] >= 0 && ids[i] < table.rows(), "token id {} is outside the vocabulary [0, {})", ids[i],
              table.rows());
        weight_decode_row(table.host, ids[i], row(out, static_cast<int64_t>(i)));
    }
}

void CpuBackend::rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) {
    check(w.format() == Format::f32 && w.rows() * w.cols() == x.cols(), "rms_norm: weight must be f32 [{}]",
          x.cols());
    check_shape(out, x.rows(), x.cols(), "rms_norm out");
    const auto* g = static_cast<const float*>(w.host.data);
    const int64_t d = x.cols();
    for (int64_t r = 0; r < x.rows(); ++r) {
        const float* xr = row(x, r);
        float* o = row(out, r);
        float sum_sq = 0;  // fp32 like the reference implementation
        for (int64_t i = 0; i < d; ++i) sum_sq += xr[i] * xr[i];
        const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(d) + eps);
        for (int64_t i = 0; i < d; ++i) o[i] = g[i] * (xr[i] * inv);
    }
}

void CpuBackend::matmul(const Weight& w, const Tensor& x, Tensor& y) {
    const int64_t n = x.rows(), cols = w.cols(), groups = cols > 0 ? x.cols() / cols : 0;
    check(groups >= 1 && x.cols() == groups * cols && w.rows() % groups == 0,
          "matmul x: [{}, {}] is not whole groups of a weight [{}, {}]", n, x.cols(), w.rows(), cols);
    check_shape(y, n, w.rows(), "matmul y");
    if (groups == 1) {
        coli::matmul(w.host, data(x), n, data(y), pool_);
        return;
    }
    // Block-diagonal: group g's rows of w against its columns of x, through the format's own kernel on a
    // view of those rows (no weight copy); the activations are gathered and scattered per group.
    const int64_t r = w.rows() / groups;
    std::vector<float> xs(n * cols), ys(n * r), decoded;  // [n, cols], [n, r]
    for (int64_t g = 0; g < groups; ++g) {
        std::optional<WeightView> view = weight_rows_view(w.host, g * r, r);
        if (!view) {  // fp8 rows that split a scale block: decoded to f32 (only then is the weight copied)
            decoded.resize(r * cols);
            for (int64_t j = 0; j < r; ++j) weight_decode_row(w.host, g * r + j, &decoded[j * cols]);
            view = WeightView{Format::f32, r, cols, decoded.data(), nullptr};
        }
        for (int64_t t = 0; t < n; ++t) std::copy_n(row(x, t) + g * cols, cols, &xs[t * cols]);
        coli::matmul(*view, xs.data(), n, ys.data(), pool_);
        for (int64_t t = 0; t < n; ++t) std::copy_n(&ys[t * r], r, row(y, t) + g * r);
    }
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
    check_shape(b, a.rows(), a.cols(), "add b");
    check_shape(out, a.rows(), a.cols(), "add out");
    const float *pa = data(a), *pb = data(b);
    float* po = data(out);
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
}

void CpuBackend::clamp(Tensor& x, float lo, float hi) {
    float* p = data(x);
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = std::min(std::max(p[i], lo), hi);
}

void CpuBackend::slice_cols(const Tensor& x, int64_t c0, Tensor& out) {
    check(out.rows() == x.rows() && c0 >= 0 && c0 + out.cols() <= x.cols(),
          "slice_cols: columns [{}, {}) of {}", c0, c0 + out.cols(), x.cols());
    for (int64_t r = 0; r < x.rows(); ++r) std::copy_n(row(x, r) + c0, out.cols(), row(out, r));
}

void CpuBackend::layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps, Tensor& out) {
    const int64_t d = x.cols();
    check(w.rows() == 1 && w.cols() == d && b.rows() == 1 && b.cols() == d,
          "layer_norm: weight [{}, {}] and bias [{}, {}] for rows of {}", w.rows(), w.cols(), b.rows(),
          b.cols(), d);
    check_shape(out, x.rows(), d, "layer_norm out");
    std::vector<float> gain(d), bias(d);
    weight_decode_row(w.host, 0, gain.data());
    weight_decode_row(b.host, 0, bias.data());
    for (int64_t r = 0; r < x.rows(); ++r) {
        const float* v = row(x, r);
        float mean = 0;
        for (int64_t i = 0; i < d; ++i) mean += v[i];
        mean /= static_cast<float>(d);
        float var = 0;
        for (int64_t i = 0; i < d; ++i) var += (v[i] - mean) * (v[i] - mean);
        const float inv = 1.0f / std::sqrt(var / static_cast<float>(d) + eps);
        float* o = row(out, r);
        for (int64_t i = 0; i < d; ++i) o[i] = (v[i] - mean) * inv * gain[i] + bias[i];
    }
}

void CpuBackend::mul_sigmoid(const Tensor& a, const Tensor& b, Tensor& out) {
    check_shape(b, a.rows(), a.cols(), "mul_sigmoid b");
    check_shape(out, a.rows(), a.cols(), "mul_sigmoid out");
    const float *pa = data(a), *pb = data(b);
    float* po = data(out);
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] * sigmoid(pb[i]);
}

void CpuBackend::res_mix(std::span<const Tensor> entries, const Weight& w, float eps, Tensor& out) {
    res_mix_args_check(entries, w, out);
    const int64_t d = out.cols();
    const auto m = static_cast<int64_t>(entries.size());
    const auto* wt = static_cast<const float*>(w.host.data);
    std::vector<float> score(m);
    for (int64_t t = 0; t < out.rows(); ++t) {
        for (int64_t e = 0; e < m; ++e) {
            const float* v = row(entries[e], t);
            float sum_sq = 0, dot = 0;
            for (int64_t i = 0; i < d; ++i) {
                sum_sq += v[i] * v[i];
                dot += v[i] * wt[i];
            }
            score[e] = dot / std::sqrt(sum_sq / static_cast<float>(d) + eps);
        }
        const float top = *std::max_element(score.begin(), score.end());
        float total = 0;
        for (float& sc : score) total += sc = std::exp(sc - top);
        float* o = row(out, t);
        std::fill(o, o + d, 0.0f);
        for (int64_t e = 0; e < m; ++e) {
            const float p = score[e] / total;
            const float* v = row(entries[e], t);
            for (int64_t i = 0; i < d; ++i) o[i] += p * v[i];
        }
    }
}

}  // namespace coli
