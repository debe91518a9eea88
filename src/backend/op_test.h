// The op test (the model of ggml's test-backend-ops): every op of backend.h on a backend against the
// CPU backend, and the CPU backend against naive references (op_reference.h), over a grid of shapes and
// weight formats, with a normalized-error tolerance per op.
// Needs no model. Used by `coli test-ops` and by CTest. Outputs are made as Ops makes them
// (tensor_new_unfilled), except moe_experts', which adds into its output.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"

namespace coli {

class ThreadPool;

// Normalized error: sqrt(sum (out - ref)^2 / sum ref^2) over the op's output.
// Exact ops: decoding a weight format, add and clamp are one IEEE operation per element everywhere.
inline constexpr double kOpTolExact = 0.0;
// Row reductions (rms_norm) and transcendental functions (rope's sin/cos, softmax's exp): a different
// summation order or a libm 1-ulp difference moves a result by a few 2^-24.
inline constexpr double kOpTolRowReduce = 1e-6;
// Dot products (matmul, moe_experts, attention): f32 accumulation in another order is ~sqrt(cols) * 2^-24;
// the bf16 tensor-core path splits x into bf16 hi + lo, leaving a 2^-17 relative residual per element.
inline constexpr double kOpTolDot = 2e-5;

// The CPU backend against the naive references (op_reference.h), which compute in double.
// Copies, weight decodes and single IEEE operations (add, clamp): the same bits.
inline constexpr double kRefTolExact = 0.0;
// f32 row reductions and libm calls (norms, rope, gates, routing weights): a few 2^-24 per rounding; the
// norms' sums of 2048 squares reach 4e-7.
inline constexpr double kRefTolF32 = 1e-6;
// f32 dot products, softmax sums and recurrences against double ones: ~sqrt(terms) 2^-24 per result; 4e-7
// at most over the grid (MLA's latent dots).
inline constexpr double kRefTolDot = 2e-6;

enum class OpCheckStatus : uint8_t {
    pass,      // ran natively, within tolerance
    fail,      // ran natively, outside tolerance (or threw)
    fallback,  // the backend declined (supports() false): the dispatcher would run it on the CPU
};

// One case of the grid on one backend.
struct OpCheck {
    OpKind op;             // the op
    Format format;         // weight format (f32 for ops without a weight)
    std::string shape;     // the case, readable: "[37x96] n=3"
    OpCheckStatus status;  // outcome
    double error = 0;      // normalized error against the reference
    double tolerance = 0;  // the op's tolerance
    std::string note;      // why it failed (exception text), else empty
};

// Runs the whole grid on b. The reference is `reference` (a CPU backend) except for matmul, whose
// reference is the scalar formats::matmul_ref (the CPU backend must match it bit for bit), and except when b
// is a CPU backend itself: then every op's reference is its naive one (op_reference.h).
std::vector<OpCheck> op_test_backend(Backend& b, Backend& reference);

// The support matrix of several backends' results, one row per (op, format), as text.
struct OpTestColumn {
    std::string backend;          // column title
    std::vector<OpCheck> checks;  // empty when skipped
    std::string skipped;          // why the backend was skipped (not compiled in, no device), or empty
};
std::string op_test_matrix(const std::vector<OpTestColumn>& columns);

}  // namespace coli
