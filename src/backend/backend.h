// The op contract (DESIGN.md): a backend runs ops and owns the memory they read and write. A backend
// knows ops, never models. Model code calls ops through Ops (ops.h), which asks supports() first and
// falls back to the CPU, counted, when the answer is no.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "backend/tensor.h"

namespace coli {

// Every op of the contract. Keep in sync with op_name().
enum class OpKind : uint8_t {
    embedding,
    rms_norm,
    matmul,
    add,
    clamp,
    rope,
    attention,
    route_softmax_topk,
    moe_experts,
    count_  // number of ops
};
std::string_view op_name(OpKind op);

// What a backend is asked before running an op: the op, its weight format and sizes.
struct OpDesc {
    OpKind op;
    Format format = Format::f32;     // weight format (matmul, embedding, moe_experts), else f32
    int64_t rows = 0;                // weight rows / tensor rows
    int64_t cols = 0;                // weight cols / tensor cols
    int64_t n = 0;                   // tokens
    const Weight* weight = nullptr;  // the op's weight when it has one (residency checks), else nullptr
};

// Checks that a tensor has the expected shape; the message names the op and the operand. Backends call it
// (and attention_args_check) on their inputs so that every backend rejects the same calls the same way.
void check_shape(const Tensor& t, int64_t rows, int64_t cols, const char* what);
// The shapes of an attention call (see Backend::attention), and that the new rows fit in the cache.
void attention_args_check(const Tensor& q, const Tensor& k, const Tensor& v, const KvCache& cache,
                          const AttentionShape& s, int64_t pos0, const Tensor& out);

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string_view name() const = 0;          // "cpu", "cuda", "vulkan", "metal"
    virtual std::string description() const = 0;        // device and build details, one line
    virtual bool supports(const OpDesc& op) const = 0;  // false: Ops runs it on the CPU, counted
    virtual std::string stats() const { return {}; }    // one line of placement statistics, or empty

    // Memory.
    virtual Tensor tensor_new(int64_t rows, int64_t cols) = 0;             // zero-filled
    virtual void tensor_write(Tensor& t, std::span<const float> src) = 0;  // host -> t (numel floats)
    virtual void tensor_read(const Tensor& t, std::span<float> dst) = 0;   // t -> host
    virtual Weight weight_upload(const Weight& w) = 0;                     // make w usable here

    // Ops. Outputs are preallocated by Ops with the shapes given in the comments.
    // out[i] = row ids[i] of table, decoded to f32.                        out: [n, table.cols]
    virtual void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) = 0;
    // out = x / sqrt(mean(x^2) + eps) * w, per row, in f32.                x, out: [n, d]; w: [1, d]
    virtual void rms_norm(const Tensor& x, const Weight& w, float eps, Tensor& out) = 0;
    // y = x w^T.                                                           x: [n, w.cols]; y: [n, w.rows]
    virtual void matmul(const Weight& w, const Tensor& x, Tensor& y) = 0;
    // out = a + b.                                                         all [n, d]
    virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
    // x = min(max(x, lo), hi), in place.                                  x: [n, d]
    virtual void clamp(Tensor& x, float lo, float hi) = 0;
    // Rotates x in place; row i is at position pos0 + i; each row holds cols / head_dim heads.
    virtual void rope(Tensor& x, const RopeParams& p, int64_t pos0) = 0;
    // Writes k, v into rows [pos0, pos0 + n) of the cache, then causal softmax attention of q over
    // cache rows [0, pos0 + i] for query i.        q, out: [n, H*hd]; k, v: [n, Hkv*hd]
    virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                           const AttentionShape& s, int64_t pos0, Tensor& out) = 0;
    // Softmax over each row of logits (f32), top k, optionally renormalized to sum 1. Result on host,
    // because the expert store needs it.                                  logits: [n, n_experts]
    virtual Routing route_softmax_topk(const Tensor& logits, int k, bool renormalize) = 0;
    // y[t] += sum over the routed (t, e) with e in experts, in ascending expert id, of
    // weight * down(silu(gate x[t]) * up x[t]).     x, y: [n, d_model]; experts sorted by id
    virtual void moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x,
                             Tensor& y) = 0;
};

}  // namespace coli
