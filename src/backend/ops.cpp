#include "backend/ops.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"

namespace coli {

namespace {
uint64_t sum(std::span<const uint64_t> counts) {
    return std::accumulate(counts.begin(), counts.end(), uint64_t{0});
}
}  // namespace

uint64_t OpCounters::total_host_steps() const {
    return sum(host_steps);
}

uint64_t OpCounters::total_fallbacks() const {
    return sum(fallback);
}

uint64_t OpCounters::total_faults() const {
    return sum(faults);
}

std::string OpCounters::summary() const {
    std::string out;
    for (size_t i = 0; i < native.size(); ++i) {
        if (native[i] + host_steps[i] + fallback[i] == 0) continue;
        out += fmt::format("{}{} {}/{}/{}", out.empty() ? "" : ", ", op_name(static_cast<OpKind>(i)),
                           native[i], host_steps[i], fallback[i]);
    }
    return out + " (native/host step/fallback)";
}

Ops::Ops(Backend& primary, Backend& cpu) : primary_(primary), cpu_(cpu) {}

bool Ops::runs_native(const OpDesc& d) {
    const auto i = static_cast<size_t>(d.op);
    if (record_ != nullptr) {
        record_->push_back(d);
        record_->back().weight = nullptr;
    }
    if (&primary_ == &cpu_) {
        ++counters_.native[i];
        return true;
    }
    if (primary_.supports(d)) {
        ++(primary_.host_step(d) ? counters_.host_steps : counters_.native)[i];
        return true;
    }
    ++counters_.fallback[i];
    ++counters_.fallback_by_format[fmt::format("{}/{}", op_name(d.op), format_name(d.format))];
    return false;
}

void Ops::fault_count(const OpDesc& d, const char* what) {
    const auto i = static_cast<size_t>(d.op);
    --(primary_.host_step(d) ? counters_.host_steps : counters_.native)[i];
    ++counters_.fallback[i];
    ++counters_.faults[i];
    ++counters_.fallback_by_format[fmt::format("{}/{}/fault", op_name(d.op), format_name(d.format))];
    if (!fault_warned_[i]) {
        fault_warned_[i] = true;
        log_warn("{} failed on {} ({}); it runs on the cpu instead, counted as a fallback", op_name(d.op),
                 primary_.name(), what);
    }
}

template <typename F>
bool Ops::ran_native(const OpDesc& d, F&& f) {
    if (!runs_native(d)) return false;
    const Timer timer;
    const auto timed = [&] {
        f();
        counters_.native_seconds[static_cast<size_t>(d.op)] += timer.seconds();
    };
    if (&primary_ == &cpu_) {
        timed();
        return true;
    }
    try {
        timed();
        return true;
    } catch (const Error& e) {
        fault_count(d, e.what());
        return false;
    }
}

Tensor Ops::to(Backend& b, const Tensor& t) {
    if (t.backend() == &b) return t;
    std::vector<float> host(t.numel());
    t.backend()->tensor_read(t, host);
    Tensor out = b.tensor_new(t.rows(), t.cols());
    b.tensor_write(out, host);
    counters_.transfer_bytes += host.size() * sizeof(float);
    return out;
}

Tensor Ops::tensor(int64_t rows, int64_t cols) {
    return primary_.tensor_new(rows, cols);
}

Tensor Ops::tensor_from(int64_t rows, int64_t cols, std::span<const float> v) {
    Tensor t = primary_.tensor_new(rows, cols);
    primary_.tensor_write(t, v);
    return t;
}

std::vector<float> Ops::read(const Tensor& t) {
    const Timer timer;
    std::vector<float> host(t.numel());
    t.backend()->tensor_read(t, host);
    counters_.read_seconds += timer.seconds();
    return host;
}

void Ops::write(Tensor& t, std::span<const float> v) {
    t.backend()->tensor_write(t, v);
}

Weight Ops::weight(const Weight& host) {
    Weight w = primary_.weight_upload(host);
    if (&primary_ == &cpu_) return w;
    // Rule 3: a weight the backend's fast path cannot take is named now, not discovered in the stats.
    const OpDesc d{
        .op = OpKind::matmul, .n = 1, .format = w.format(), .rows = w.rows(), .cols = w.cols(), .weight = &w};
    if (!primary_.supports(d)) {
        const std::string key = fmt::format("{} [{}, {}]", format_name(w.format()), w.rows(), w.cols());
        if (!declined_warned_[key]) {
            declined_warned_[key] = true;
            log_warn("{} declines {} weights of shape {}: ops on them run on the cpu (counted)",
                     primary_.name(), format_name(w.format()), key);
        }
    }
    return w;
}

Tensor Ops::embedding(const Weight& table, std::span<const int32_t> ids) {
    const auto n = static_cast<int64_t>(ids.size());
    Tensor out;
    if (ran_native({.op = OpKind::embedding,
                    .n = n,
                    .format = table.format(),
                    .rows = table.rows(),
                    .cols = table.cols(),
                    .weight = &table},
                   [&] {
                       out = primary_.tensor_new_unfilled(n, table.cols());
                       primary_.embedding(table, ids, out);
                   }))
        return out;
    out = cpu_.tensor_new(n, table.cols());
    cpu_.embedding(table, ids, out);
    return to(primary_, out);
}

Tensor Ops::rms_norm(const Tensor& x, const Weight& w, float eps) {
    Tensor out;
    if (ran_native(
            {.op = OpKind::rms_norm, .n = x.rows(), .format = w.format(), .weight = &w, .width = x.cols()},
            [&] {
                out = primary_.tensor_new_unfilled(x.rows(), x.cols());
                primary_.rms_norm(x, w, eps, out);
            }))
        return out;
    out = cpu_.tensor_new(x.rows(), x.cols());
    cpu_.rms_norm(to(cpu_, x), w, eps, out);
    return to(primary_, out);
}

Tensor Ops::matmul(const Weight& w, const Tensor& x, int groups) {
    check(groups >= 1 && x.cols() == groups * w.cols() && w.rows() % groups == 0,
          "matmul: x [{}, {}] in {} groups for a weight [{}, {}]", x.rows(), x.cols(), groups, w.rows(),
          w.cols());
    Tensor y;
    if (ran_native({.op = OpKind::matmul,
                    .n = x.rows(),
                    .format = w.format(),
                    .rows = w.rows(),
                    .cols = w.cols(),
                    .weight = &w,
                    .groups = groups},
                   [&] {
                       y = primary_.tensor_new_unfilled(x.rows(), w.rows());
                       primary_.matmul(w, x, y);
                   }))
        return y;
    y = cpu_.tensor_new(x.rows(), w.rows());
    cpu_.matmul(w, to(cpu_, x), y);
    return to(primary_, y);
}

Tensor Ops::add(const Tensor& a, const Tensor& b) {
    Tensor out;
    if (ran_native({.op = OpKind::add, .n = a.rows(), .width = a.cols()}, [&] {
            out = primary_.tensor_new_unfilled(a.rows(), a.cols());
            primary_.add(a, b, out);
        }))
        return out;
    out = cpu_.tensor_new(a.rows(), a.cols());
    cpu_.add(to(cpu_, a), to(cpu_, b), out);
    return to(primary_, out);
}

void Ops::write_back(Tensor& dst, const Tensor& src) {
    if (src.storage() == dst.storage()) return;
    std::vector<float> v = read(src);
    dst.backend()->tensor_write(dst, v);
    counters_.transfer_bytes += v.size() * sizeof(float);
}

// In-place ops: a backend fails before it writes (injected faults are checked on entry), so x is intact.
void Ops::clamp(Tensor& x, float lo, float hi) {
    if (ran_native({.op = OpKind::clamp, .n = x.rows(), .width = x.cols()},
                   [&] { primary_.clamp(x, lo, hi); }))
        return;
    Tensor h = to(cpu_, x);
    cpu_.clamp(h, lo, hi);
    write_back(x, h);
}

void Ops::rope(Tensor& x, const RopeParams& p, int64_t pos0) {
    if (ran_native({.op = OpKind::rope, .n = x.rows(), .width = x.cols(), .head_dim = p.head_dim},
                   [&] { primary_.rope(x, p, pos0); }))
        return;
    Tensor h = to(cpu_, x);
    cpu_.rope(h, p, pos0);
    write_back(x, h);
}

Tensor Ops::attention(const Tensor& q, const Tensor& k, const Tensor& v, KvCache& cache,
                      const AttentionShape& s, int64_t pos0) {
    Tensor out;
    if (ran_native({.op = OpKind::attention,
                    .n = q.rows(),
                    .heads = s.n_heads,
                    .kv_heads = s.n_kv_heads,
                    .head_dim = s.head_dim,
                    .context = cache.k.rows()},
                   [&] {
                       out = primary_.tensor_new_unfilled(q.rows(), q.cols());
                       primary_.attention(q, k, v, cache, s, pos0, out);
                   }))
        return out;
    // The cache lives on the primary backend: bring it over, run, and send the new rows back.
    KvCache host{to(cpu_, cache.k), to(cpu_, cache.v)};
    out = cpu_.tensor_new(q.rows(), q.cols());
    cpu_.attention(to(cpu_, q), to(cpu_, k), to(cpu_, v), host, s, pos0, out);
    write_back(cache.k, host.k);
    write_back(cache.v, host.v);
    return to(primary_, out);
}

Routing Ops::route_softmax_topk(const Tensor& logits, int k, bool renormalize) {
    Routing r;
    if (ran_native(
            {.op = OpKind::route_softmax_topk, .n = logits.rows(), .experts = logits.cols(), .top_k = k},
            [&] { r = primary_.route_softmax_topk(logits, k, renormalize); }))
        return r;
    return cpu_.route_softmax_topk(to(cpu_, logits), k, renormalize);
}

void Ops::moe_experts(std::span<const ExpertWeights> experts, const Routing& r, const Tensor& x, Tensor& y) {
    if (experts.empty()) return;
    const Weight& g = experts.front().gate;
    if (ran_native({.op = OpKind::moe_experts,
                    .n = x.rows(),
                    .format = g.format(),
                    .rows = g.rows(),
                    .cols = g.cols(),
                    .weight = &g,
                    .glu = experts.front().act.kind},
                   [&] { primary_.moe_experts(experts, r, x, y); }))
        return;
    Tensor hy = to(cpu_, y);
    cpu_.moe_experts(experts, r, to(cpu_, x), hy);
    write_back(y, hy);
}

Tensor Ops::slice_cols(const Tensor& x, int64_t c0, int64_t width) {
    check(c0 >= 0 && width > 0 && c0 + width <= x.cols(), "slice_cols: columns [{}, {}) of {}", c0,
          c0 + width, x.cols());
    Tensor out;
    if (ran_native({.op = OpKind::slice_cols, .n = x.rows(), .width = x.cols()}, [&] {
            out = primary_.tensor_new_unfilled(x.rows(), width);
            primary_.slice_cols(x, c0, out);
        }))
        return out;
    out = cpu_.tensor_new(x.rows(), width);
    cpu_.slice_cols(to(cpu_, x), c0, out);
    return to(primary_, out);
}

Tensor Ops::mla_attention(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                          KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection) {
    const int64_t width = static_cast<int64_t>(s.n_heads) * s.v_dim;
    Tensor out;
    if (ran_native({.op = OpKind::mla_attention,
                    .n = q.rows(),
                    .format = w_kvb.format(),
                    .weight = &w_kvb,
                    .heads = s.n_heads,
                    .head_dim = s.nope_dim + s.rope_dim,
                    .latent = s.kv_lora,
                    .context = cache.k.rows(),
                    .top_k = selection ? selection->cols() : 0},
                   [&] {
                       out = primary_.tensor_new_unfilled(q.rows(), width);
                       primary_.mla_attention(q, latent, k_pe, w_kvb, cache, s, pos0, selection, out);
                   }))
        return out;
    // The cache lives on the primary backend: bring it over, run, and send the new rows back.
    KvCache host{to(cpu_, cache.k), to(cpu_, cache.v)};
    const Tensor host_selection = selection ? to(cpu_, *selection) : Tensor{};
    out = cpu_.tensor_new(q.rows(), width);
    cpu_.mla_attention(to(cpu_, q), to(cpu_, latent), to(cpu_, k_pe), w_kvb, host, s, pos0,
                       selection ? &host_selection : nullptr, out);
    write_back(cache.k, host.k);
    write_back(cache.v, host.v);
    return to(primary_, out);
}

Routing Ops::route_sigmoid_topk(const Tensor& logits, const Weight& bias, const SigmoidRouting& p,
                                std::span<const int32_t> fixed) {
    Routing r;
    if (ran_native(
            {.op = OpKind::route_sigmoid_topk, .n = logits.rows(), .experts = logits.cols(), .top_k = p.k},
            [&] { r = primary_.route_sigmoid_topk(logits, bias, p, fixed); }))
        return r;
    return cpu_.route_sigmoid_topk(to(cpu_, logits), bias, p, fixed);
}

Tensor Ops::layer_norm(const Tensor& x, const Weight& w, const Weight& b, float eps) {
    Tensor out;
    if (ran_native(
            {.op = OpKind::layer_norm, .n = x.rows(), .format = w.format(), .weight = &w, .width = x.cols()},
            [&] {
                out = primary_.tensor_new_unfilled(x.rows(), x.cols());
                primary_.layer_norm(x, w, b, eps, out);
            }))
        return out;
    out = cpu_.tensor_new(x.rows(), x.cols());
    cpu_.layer_norm(to(cpu_, x), w, b, eps, out);
    return to(primary_, out);
}

Tensor Ops::dsa_select(const Tensor& q, const Tensor& weights, const Tensor& k, Tensor& cache,
                       const DsaShape& s, int64_t pos0) {
    Tensor out;
    if (ran_native({.op = OpKind::dsa_select,
                    .n = q.rows(),
                    .heads = s.n_heads,
                    .head_dim = s.head_dim,
                    .context = cache.rows(),
                    .top_k = s.top_k},
                   [&] {
                       out = primary_.tensor_new_unfilled(q.rows(), s.top_k);
                       primary_.dsa_select(q, weights, k, cache, s, pos0, out);
                   }))
        return out;
    // The key cache lives on the primary backend: bring it over, run, and send the new rows back.
    Tensor host = to(cpu_, cache);
    out = cpu_.tensor_new(q.rows(), s.top_k);
    cpu_.dsa_select(to(cpu_, q), to(cpu_, weights), to(cpu_, k), host, s, pos0, out);
    write_back(cache, host);
    return to(primary_, out);
}

Tensor Ops::short_conv(const Tensor& x, const Weight& w, Tensor& state) {
    Tensor out;
    if (ran_native({.op = OpKind::short_conv,
                    .n = x.rows(),
                    .format = w.format(),
                    .weight = &w,
                    .width = x.cols(),
                    .taps = w.cols()},
                   [&] {
                       out = primary_.tensor_new_unfilled(x.rows(), x.cols());
                       primary_.short_conv(x, w, state, out);
                   }))
        return out;
    Tensor host = to(cpu_, state);
    out = cpu_.tensor_new(x.rows(), x.cols());
    cpu_.short_conv(to(cpu_, x), w, host, out);
    write_back(state, host);
    return to(primary_, out);
}

Tensor Ops::kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                const Weight& a_log, const Weight& dt_bias, const KdaShape& s, Tensor& state) {
    Tensor out;
    if (ran_native({.op = OpKind::kda, .n = q.rows(), .heads = s.n_heads, .head_dim = s.head_dim}, [&] {
            out = primary_.tensor_new_unfilled(q.rows(), q.cols());
            primary_.kda(q, k, v, g, beta, a_log, dt_bias, s, state, out);
        }))
        return out;
    Tensor host = to(cpu_, state);
    out = cpu_.tensor_new(q.rows(), q.cols());
    cpu_.kda(to(cpu_, q), to(cpu_, k), to(cpu_, v), to(cpu_, g), to(cpu_, beta), a_log, dt_bias, s, host,
             out);
    write_back(state, host);
    return to(primary_, out);
}

Tensor Ops::mul_sigmoid(const Tensor& a, const Tensor& b) {
    Tensor out;
    if (ran_native({.op = OpKind::mul_sigmoid, .n = a.rows(), .width = a.cols()}, [&] {
            out = primary_.tensor_new_unfilled(a.rows(), a.cols());
            primary_.mul_sigmoid(a, b, out);
        }))
        return out;
    out = cpu_.tensor_new(a.rows(), a.cols());
    cpu_.mul_sigmoid(to(cpu_, a), to(cpu_, b), out);
    return to(primary_, out);
}

Tensor Ops::res_mix(std::span<const Tensor> entries, const Weight& w, float eps) {
    check(!entries.empty(), "res_mix: no entries");
    const int64_t n = entries.front().rows(), d = entries.front().cols();
    Tensor out;
    if (ran_native({.op = OpKind::res_mix,
                    .n = n,
                    .format = w.format(),
                    .weight = &w,
                    .width = d,
                    .entries = static_cast<int64_t>(entries.size())},
                   [&] {
                       out = primary_.tensor_new_unfilled(n, d);
                       primary_.res_mix(entries, w, eps, out);
                   }))
        return out;
    std::vector<Tensor> host;
    for (const Tensor& e : entries) host.push_back(to(cpu_, e));
    out = cpu_.tensor_new(n, d);
    cpu_.res_mix(host, w, eps, out);
    return to(primary_, out);
}

void Ops::copy_rows(Tensor& dst, const Tensor& src, int64_t row0) {
    copy_rows_args_check(dst, src, row0);
    if (ran_native({.op = OpKind::copy_rows, .n = src.rows(), .width = src.cols(), .context = dst.rows()},
                   [&] { primary_.copy_rows(dst, src, row0); }))
        return;
    Tensor h = to(cpu_, dst);
    cpu_.copy_rows(h, to(cpu_, src), row0);
    write_back(dst, h);
}

Tensor Ops::compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                        const Tensor& state_gate, const CompressShape& s, int64_t pos0) {
    check(s.ratio > 0, "compress_kv: ratio {}", s.ratio);
    const int64_t windows = windows_closing(pos0, kv.rows(), s.ratio);
    check(windows >= 1, "compress_kv: no window closes among positions [{}, {})", pos0, pos0 + kv.rows());
    Tensor out;
    if (ran_native({.op = OpKind::compress_kv,
                    .n = kv.rows(),
                    .format = ape.format(),
                    .weight = &ape,
                    .width = kv.cols(),
                    .head_dim = s.head_dim,
                    .ratio = s.ratio},
                   [&] {
                       out = primary_.tensor_new_unfilled(windows, s.head_dim);
                       primary_.compress_kv(kv, gate, ape, state_kv, state_gate, s, pos0, out);
                   }))
        return out;
    out = cpu_.tensor_new(windows, s.head_dim);
    cpu_.compress_kv(to(cpu_, kv), to(cpu_, gate), ape, to(cpu_, state_kv), to(cpu_, state_gate), s, pos0,
                     out);
    return to(primary_, out);
}

Tensor Ops::compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring, const Tensor& entries,
                                 const Tensor* selection, const Weight& sinks,
                                 const CompressedAttentionShape& s, int64_t pos0) {
    Tensor out;
    if (ran_native({.op = OpKind::compressed_attention,
                    .n = q.rows(),
                    .heads = s.n_heads,
                    .head_dim = s.head_dim,
                    .context = ring.rows(),
                    .top_k = selection ? selection->cols() : 0,
                    .ratio = s.ratio,
                    .window = s.window},
                   [&] {
                       out = primary_.tensor_new_unfilled(q.rows(), q.cols());
                       primary_.compressed_attention(q, kv, ring, entries, selection, sinks, s, pos0, out);
                   }))
        return out;
    const Tensor host_entries = entries.empty() ? Tensor{} : to(cpu_, entries);
    const Tensor host_selection = selection ? to(cpu_, *selection) : Tensor{};
    out = cpu_.tensor_new(q.rows(), q.cols());
    cpu_.compressed_attention(to(cpu_, q), to(cpu_, kv), to(cpu_, ring), host_entries,
                              selection ? &host_selection : nullptr, sinks, s, pos0, out);
    return to(primary_, out);
}

Tensor Ops::index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                       int64_t pos0) {
    Tensor out;
    if (ran_native({.op = OpKind::index_topk,
                    .n = q.rows(),
                    .heads = s.n_heads,
                    .head_dim = s.head_dim,
                    .context = keys.rows(),
                    .top_k = s.top_k,
                    .ratio = s.ratio},
                   [&] {
                       out = primary_.tensor_new_unfilled(q.rows(), s.top_k);
                       primary_.index_topk(q, weights, keys, s, pos0, out);
                   }))
        return out;
    out = cpu_.tensor_new(q.rows(), s.top_k);
    cpu_.index_topk(to(cpu_, q), to(cpu_, weights), to(cpu_, keys), s, pos0, out);
    return to(primary_, out);
}

Tensor Ops::hc_weights(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s) {
    Tensor out;
    if (ran_native({.op = OpKind::hc_weights,
                    .n = mix.rows(),
                    .format = base.format(),
                    .weight = &base,
                    .width = mix.cols(),
                    .streams = s.streams},
                   [&] {
                       out = primary_.tensor_new_unfilled(mix.rows(), mix.cols());
                       primary_.hc_weights(mix, base, scale, s, out);
                   }))
        return out;
    out = cpu_.tensor_new(mix.rows(), mix.cols());
    cpu_.hc_weights(to(cpu_, mix), base, scale, s, out);
    return to(primary_, out);
}

Tensor Ops::hc_collapse(const Tensor& x, const Tensor& weights, int streams) {
    check(streams > 0 && x.cols() % streams == 0, "hc_collapse: {} columns in {} streams", x.cols(), streams);
    const int64_t d = x.cols() / streams;
    Tensor out;
    if (ran_native({.op = OpKind::hc_collapse, .n = x.rows(), .width = x.cols(), .streams = streams}, [&] {
            out = primary_.tensor_new_unfilled(x.rows(), d);
            primary_.hc_collapse(x, weights, streams, out);
        }))
        return out;
    out = cpu_.tensor_new(x.rows(), d);
    cpu_.hc_collapse(to(cpu_, x), to(cpu_, weights), streams, out);
    return to(primary_, out);
}

Tensor Ops::hc_expand(const Tensor& x, const Tensor& y, const Tensor& weights, int streams) {
    Tensor out;
    if (ran_native({.op = OpKind::hc_expand, .n = x.rows(), .width = x.cols(), .streams = streams}, [&] {
            out = primary_.tensor_new_unfilled(x.rows(), x.cols());
            primary_.hc_expand(x, y, weights, streams, out);
        }))
        return out;
    out = cpu_.tensor_new(x.rows(), x.cols());
    cpu_.hc_expand(to(cpu_, x), to(cpu_, y), to(cpu_, weights), streams, out);
    return to(primary_, out);
}

Tensor Ops::repeat_cols(const Tensor& x, int times) {
    check(times >= 1, "repeat_cols: {} times", times);
    Tensor out;
    if (ran_native({.op = OpKind::repeat_cols, .n = x.rows(), .width = x.cols(), .streams = times}, [&] {
            out = primary_.tensor_new_unfilled(x.rows(), times * x.cols());
            primary_.repeat_cols(x, times, out);
        }))
        return out;
    out = cpu_.tensor_new(x.rows(), times * x.cols());
    cpu_.repeat_cols(to(cpu_, x), times, out);
    return to(primary_, out);
}

Tensor Ops::slice_rows(const Tensor& x, int64_t r0, int64_t n) {
    check(r0 >= 0 && n > 0 && r0 + n <= x.rows(), "slice_rows: rows [{}, {}) of {}", r0, r0 + n, x.rows());
    if (r0 == 0 && n == x.rows()) return x;
    // Row-major: rows r0 .. r0 + n are one run of columns of the tensor seen as a single row.
    return slice_cols(x.reshaped(1, x.numel()), r0 * x.cols(), n * x.cols()).reshaped(n, x.cols());
}

Tensor Ops::concat_rows(std::span<const Tensor> parts) {
    check(!parts.empty(), "concat_rows: no parts");
    if (parts.size() == 1) return parts[0];
    int64_t rows = 0;
    for (const Tensor& p : parts) {
        check(p.cols() == parts[0].cols(), "concat_rows: [{}, {}] after [{}, {}]", p.rows(), p.cols(),
              parts[0].rows(), parts[0].cols());
        rows += p.rows();
    }
    Tensor out = primary_.tensor_new_unfilled(rows, parts[0].cols());  // every row is written below
    int64_t row0 = 0;
    for (const Tensor& p : parts) {
        copy_rows(out, p, row0);
        row0 += p.rows();
    }
    return out;
}

Tensor Ops::concat_cols(const Tensor& a, const Tensor& b) {
    check(a.rows() == b.rows() && a.cols() == b.cols(), "concat_cols: [{}, {}] beside [{}, {}]", a.rows(),
          a.cols(), b.rows(), b.cols());
    // Two hyper-connection streams: out_k = post_k a + sum_j comb_jk x_j over x = [b, b], with post = (1, 0)
    // and comb_01 = 1 the only other weight that is not 0, so out = [a, b] exactly.
    constexpr int kStreams = 2;
    constexpr std::array<float, (2 + kStreams)* kStreams> kWeights = {0, 0,         // pre (unread)
                                                                      1, 0,         // post
                                                                      0, 1, 0, 0};  // comb [j][k]
    std::vector<float> weights;
    for (int64_t r = 0; r < a.rows(); ++r) weights.insert(weights.end(), kWeights.begin(), kWeights.end());
    return hc_expand(repeat_cols(b, kStreams), a,
                     tensor_from(a.rows(), static_cast<int64_t>(kWeights.size()), weights), kStreams);
}

}  // namespace coli
