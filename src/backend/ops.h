// Ops: what model code calls. Asks the chosen backend whether it supports each op (format, shape),
// runs it there if so, and otherwise runs it on the CPU backend and counts the fallback (rule 1 and 3).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace coli {

// Per-op counts of where ops ran; shown by `coli run`, served by `coli serve`.
struct OpCounters {
    std::array<uint64_t, static_cast<size_t>(OpKind::count_)> native{};  // ran on the chosen backend
    // Ran on the chosen backend with a read-back and work on the host (Backend::host_step).
    std::array<uint64_t, static_cast<size_t>(OpKind::count_)> host_steps{};
    std::array<uint64_t, static_cast<size_t>(OpKind::count_)> fallback{};  // ran on the CPU instead
    std::array<uint64_t, static_cast<size_t>(OpKind::count_)> faults{};    // of fallback: the backend failed
    std::map<std::string, uint64_t> fallback_by_format;                    // "matmul/mxfp4" -> count
    // Host seconds inside the calls on the chosen backend, native and host steps (on a GPU: recording,
    // launches and waits for results).
    std::array<double, static_cast<size_t>(OpKind::count_)> native_seconds{};
    double read_seconds = 0;      // host seconds in read(): on a GPU, mostly waiting for the device's results
    uint64_t transfer_bytes = 0;  // moved between backends

    uint64_t total_host_steps() const;
    uint64_t total_fallbacks() const;
    uint64_t total_faults() const;
    std::string summary() const;  // one line: "matmul 120/0/0, ... (native/host step/fallback)"
};

class Ops {
public:
    // `cpu` runs every op; it is also the fallback. `primary` may be the same object.
    Ops(Backend& primary, Backend& cpu);

    Backend& backend() const { return primary_; }
    const OpCounters& counters() const { return counters_; }
    // Appends the OpDesc of every op call from now on to *sink (weight left null: it need not outlive the
    // call), or stops with nullptr: how a test records the ops a forward calls.
    void record_to(std::vector<OpDesc>* sink) { record_ = sink; }

    // Memory.
    Tensor tensor(int64_t rows, int64_t cols);                                 // zero-filled
    Tensor tensor_from(int64_t rows, int64_t cols, std::span<const float> v);  // host -> backend
    std::vector<float> read(const Tensor& t);                                  // backend -> host
    void write(Tensor& t, std::span<const float> v);                           // host -> t, in place
    Weight weight(const Weight& host);  // uploads a host weight to the backend; names a format it declines

    // Ops (see backend.h for the exact semantics).
    Tensor embedding(const Weight& table, std::span<const int32_t> ids);  // [n, d]
    Tensor rms_norm(const Tensor& x, const Weight& w, float eps);         // [n, d]
    // groups > 1: block-diagonal (backend.h); x: [n, groups * w.cols].
    Tensor matmul(const Weight& w, const Tensor& x, int groups = 1);  // [n, w.rows]
    Tensor add(const Tensor& a, const Tensor& b);                     // [n, d]
    void clamp(Tensor& x, float lo, float hi);                        // in place
    void rope(Tensor& x, const RopeParams& p, int64_t pos0);          // in place
    Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                     const AttentionShape& s,
                     int64_t pos0);  // [n, H*hd]
    Routing route_softmax_topk(const Tensor& logits, int k, bool renormalize);
    void moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x, Tensor& y);
    Tensor slice_cols(const Tensor& x, int64_t c0, int64_t width);  // [n, width]
    Tensor mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                         KvCache& cache, const MlaShape& s, int64_t pos0,
                         const Tensor* selection = nullptr);  // [n, H*dv]
    // bias: [1, n_experts] or empty (no bias); fixed: [n * k] expert ids (hash routing) or empty.
    Routing route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                               std::span<const int32_t> fixed = {});
    Tensor layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps);  // [n, d]
    Tensor dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                      const DsaShape& s,
                      int64_t pos0);                                     // [n, top_k]
    Tensor short_conv(const Tensor& x, const Weight& w, Tensor& state);  // [n, C]
    Tensor kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
               const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state);  // [n, H d]
    Tensor mul_sigmoid(const Tensor& a, const Tensor& b);                                      // [n, d]
    Tensor res_mix(std::span<const Tensor> entries, const Weight& w, float eps);               // [n, d]
    // Compressed attention (DeepSeek-V4) and hyper-connections: see backend.h.
    void copy_rows(Tensor& dst, const Tensor& src, int64_t row0);  // in place
    Tensor compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                       const Tensor& state_gate, const CompressShape& s,
                       int64_t pos0);  // [windows_closing(pos0, n, ratio), hd]
    Tensor compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring, const Tensor& entries,
                                const Tensor* selection, const Weight& sinks,
                                const CompressedAttentionShape& s,
                                int64_t pos0);  // [n, H hd]
    Tensor index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                      int64_t pos0);  // [n, top_k]
    Tensor hc_weights(const Tensor& mix, const Weight& base, const Weight& scale,
                      const HcShape& s);                                                     // [n, mix.cols]
    Tensor hc_collapse(const Tensor& x, const Tensor& weights, int streams);                 // [n, D]
    Tensor hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams);  // [n, S D]
    Tensor repeat_cols(const Tensor& x, int times);                                          // [n, times D]
    // Rows of a batch, for the steps that run once per sequence (nn/batch.h); composed of slice_cols and
    // copy_rows, so every backend that runs those runs them.
    Tensor slice_rows(const Tensor& x, int64_t r0, int64_t n);  // [n, cols]: rows r0 .. r0 + n of x
    Tensor concat_rows(std::span<const Tensor> parts);          // [sum of rows, cols]: the parts in order
    // Each row of a beside the same row of b; composed of repeat_cols and hc_expand (weights 0 and 1: exact).
    Tensor concat_cols(const Tensor& a, const Tensor& b);  // [n, 2 cols]: a, b: [n, cols]

private:
    bool runs_native(const OpDesc& d);  // asks the backend and counts the answer
    // Runs f (the op on the primary backend). When it throws coli::Error (a device fault), the fault is
    // warned about and counted as a fallback, and false tells the caller to run the op on the CPU.
    template <typename F>
    bool ran_native(const OpDesc& d, F&& f);
    void fault_count(const OpDesc& d, const char* what);
    Tensor to(Backend& b, const Tensor& t);           // copy between backends, counted
    void write_back(Tensor& dst, const Tensor& src);  // src's values into dst on dst's backend, counted

    Backend& primary_;
    Backend& cpu_;
    OpCounters counters_;
    std::vector<OpDesc>* record_ = nullptr;                                 // see record_to
    std::array<bool, static_cast<size_t>(OpKind::count_)> fault_warned_{};  // one warning per op
    std::map<std::string, bool> declined_warned_;                           // one load-time note per format
};

}  // namespace coli
