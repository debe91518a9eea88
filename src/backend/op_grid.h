// The machinery of `coli test-ops` shared by its case files: test data on a backend, the normalized
// error, and the list of checks each case adds to (one backend against the reference).
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/op_reference.h"
#include "backend/op_test.h"
#include "core/error.h"
#include "core/random.h"

namespace coli::op_grid {

// A host weight owning its encoded bytes.
inline Weight weight_random(Format f, int64_t rows, int64_t cols, uint32_t seed) {
    const std::vector<float> w = random_normal(static_cast<size_t>(rows * cols), seed, 0.5f);
    auto e = std::make_shared<EncodedWeight>(weight_encode(f, w.data(), rows, cols));
    return Weight{e->view(), nullptr, e};
}

inline bool format_fits(Format f, int64_t cols) {
    try {
        format_check_shape(f, 1, cols);
        return true;
    } catch (const Error&) {
        return false;
    }
}

inline Tensor tensor_on(Backend& b, int64_t rows, int64_t cols, const std::vector<float>& v) {
    Tensor t = b.tensor_new(rows, cols);
    b.tensor_write(t, v);
    return t;
}

inline std::vector<float> tensor_host(Backend& b, const Tensor& t) {
    std::vector<float> v(t.numel());
    b.tensor_read(t, v);
    return v;
}

inline double normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = static_cast<double>(got[i]) - want[i];
        diff += d * d;
        norm += static_cast<double>(want[i]) * want[i];
    }
    if (std::isnan(diff)) return std::numeric_limits<double>::quiet_NaN();
    return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

inline constexpr Format kAllFormats[] = {Format::f32,           Format::bf16,     Format::f16,
                                         Format::int8_row,      Format::int4_g64, Format::mxfp4,
                                         Format::fp8_e4m3_block};

using Run = std::function<std::vector<float>(Backend&)>;
using Expect = std::function<std::vector<float>()>;

// A routing as floats, the weights then the ids: a different choice of expert fails the comparison.
inline std::vector<float> routing_floats(const Routing& r) {
    std::vector<float> v(r.weights);
    for (int32_t id : r.experts) v.push_back(static_cast<float>(id));
    return v;
}

// The checks of one backend against the reference, case by case. A backend of the reference's own kind (the
// CPU) is held to the naive references (op_reference.h) instead: comparing it with itself would prove
// nothing.
class CheckList {
public:
    CheckList(Backend& b, Backend& ref) : b_(b), ref_(ref), naive_(b.name() == ref.name()) {}
    std::vector<OpCheck> take() { return std::move(out_); }
    Backend& backend() const { return b_; }
    Backend& reference() const { return ref_; }
    bool naive() const { return naive_; }

    // Runs one case on the backend when it supports d; expected: the reference's output.
    void check_case(const OpDesc& d, std::string shape, double tol, const Run& run,
                    const std::vector<float>& expected) {
        OpCheck c{d.op, d.format, std::move(shape), OpCheckStatus::pass, 0, tol, {}};
        if (!b_.supports(d)) {
            c.status = OpCheckStatus::fallback;
        } else {
            try {
                c.error = normalized_error(run(b_), expected);
                if (!(c.error <= tol)) c.status = OpCheckStatus::fail;
            } catch (const std::exception& e) {
                c.status = OpCheckStatus::fail;
                c.note = e.what();
            }
        }
        out_.push_back(std::move(c));
    }
    // Runs one case on the backend and compares it with the reference backend's run within tol, or, when
    // naive(), with the naive reference's output within naive_tol.
    void check_same(const OpDesc& d, std::string shape, double tol, const Run& run, double naive_tol,
                    const Expect& naive_expected) {
        if (naive_)
            check_case(d, std::move(shape), naive_tol, run, naive_expected());
        else
            check_case(d, std::move(shape), tol, run, run(ref_));
    }

protected:
    Backend& b_;
    Backend& ref_;

private:
    bool naive_;
    std::vector<OpCheck> out_;
};

// moe_experts with the gate activation act, in f32 and mxfp4, at n = 1 and 6 (op_test_recurrent.cpp), named
// "<label> E=.. k=.. n=..": one case list for every GLU kind. seed and layer_base keep the kinds' experts
// apart.
void glu_expert_cases(CheckList& g, const GluActivation& act, std::string_view label, uint32_t seed,
                      int32_t layer_base);
// The cases of the linear-attention ops (op_test_recurrent.cpp): short_conv, kda, mul_sigmoid, res_mix,
// and SiTU experts.
void recurrent_cases(CheckList& g);
// The cases of the ops that compressed-attention families add (op_test_compressed.cpp): copy_rows,
// compress_kv, compressed_attention, index_topk, the hyper-connection ops, grouped matmul, rope's inverse
// and stride, sqrt-softplus and hash routing, and clamped SwiGLU experts.
void compressed_cases(CheckList& g);

}  // namespace coli::op_grid
