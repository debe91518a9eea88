// Compressed attention on the CPU (DeepSeek-V4's CSA and HCA layers): ring and append writes of rows, the
// KV compressor's windowed softmax pooling, sliding-window attention over raw keys plus compressed entries
// with a sink, and the indexer's top-k over compressed keys. In f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_tensor.h"
#include "core/thread_pool.h"

namespace coli {

using cpu::row;

namespace {

// (query, head) pairs per task at least: fewer cost more in dispatch than in arithmetic.
constexpr int64_t kMinPairsPerTask = 4;

float dot(const float* a, const float* b, int64_t n) {
    float sum = 0;
    for (int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
    return sum;
}

}  // namespace

void CpuBackend::copy_rows(Tensor& dst, const Tensor& src, int64_t row0) {
    copy_rows_args_check(dst, src, row0);
    const int64_t m = src.rows(), ring = dst.rows();
    // Rows that a later row of src overwrites are skipped: only the last `ring` land.
    for (int64_t i = std::max<int64_t>(0, m - ring); i < m; ++i)
        std::copy_n(row(src, i), src.cols(), row(dst, (row0 + i) % ring));
}

void CpuBackend::compress_kv(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                             const Tensor& state_gate, const CompressShape& s, int64_t pos0, Tensor& out) {
    compress_kv_args_check(kv, gate, ape, state_kv, state_gate, s, pos0, out);
    const int64_t hd = s.head_dim, ratio = s.ratio, slots = int64_t{s.series} * ratio;
    const auto* bias = static_cast<const float*>(ape.host.data);  // [ratio, series hd]
    // Position j's raw row: this call's input from pos0 on, else the state's row j mod (series ratio).
    const auto raw = [&](const Tensor& now, const Tensor& state, int64_t j) {
        return j >= pos0 ? row(now, j - pos0) : row(state, j % slots);
    };
    const int64_t w0 = pos0 / ratio;
    // Per window: the slots' logits and values of every channel, then a softmax over the slots.
    std::vector<float> logit(slots * hd), value(slots * hd);  // [slot, hd]
    for (int64_t w = w0; w < w0 + out.rows(); ++w) {
        int64_t used = 0;  // slots that take part (series 2's window -1 has none)
        const auto take = [&](int64_t j, int64_t r, int64_t c0) {
            const float* v = raw(kv, state_kv, j) + c0;
            const float* g = raw(gate, state_gate, j) + c0;
            const float* b = bias + r * ape.cols() + c0;
            for (int64_t d = 0; d < hd; ++d) {
                logit[used * hd + d] = g[d] + b[d];
                value[used * hd + d] = v[d];
            }
            ++used;
        };
        if (s.series == 2 && w >= 1)  // the window before, from the first hd channels
            for (int64_t r = 0; r < ratio; ++r) take((w - 1) * ratio + r, r, 0);
        const int64_t c0 = s.series == 2 ? hd : 0;
        for (int64_t r = 0; r < ratio; ++r) take(w * ratio + r, r, c0);
        float* o = row(out, w - w0);
        for (int64_t d = 0; d < hd; ++d) {
            float top = -INFINITY;
            for (int64_t k = 0; k < used; ++k) top = std::max(top, logit[k * hd + d]);
            float total = 0, mixed = 0;
            for (int64_t k = 0; k < used; ++k) {
                const float e = std::exp(logit[k * hd + d] - top);
                total += e;
                mixed += e * value[k * hd + d];
            }
            o[d] = mixed / total;
        }
    }
}

void CpuBackend::compressed_attention(const Tensor& q, const Tensor& kv, const Tensor& ring,
                                      const Tensor& entries, const Tensor* selection, const Weight& sinks,
                                      const CompressedAttentionShape& s, int64_t pos0, Tensor& out) {
    compressed_attention_args_check(q, kv, ring, entries, selection, sinks, s, pos0, out);
    const int64_t n = q.rows(), hd = s.head_dim, heads = s.n_heads;
    // Each query's keys (= values): the raw window, then the visible compressed entries.
    std::vector<std::vector<const float*>> keys(n);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = pos0 + i;
        for (int64_t p = std::max<int64_t>(0, t - s.window + 1); p <= t; ++p)
            keys[i].push_back(p >= pos0 ? row(kv, p - pos0) : row(ring, p % ring.rows()));
        if (s.ratio == 0) continue;
        const int64_t visible = (t + 1) / s.ratio;
        if (selection == nullptr) {
            for (int64_t w = 0; w < visible; ++w) keys[i].push_back(row(entries, w));
            continue;
        }
        for (int64_t j = 0; j < selection->cols(); ++j) {
            const float id = row(*selection, i)[j];
            if (id < 0) continue;
            const auto w = static_cast<int64_t>(id);
            check(w < visible, "compressed_attention: query {} selects entry {} of {} visible", t, w,
                  visible);
            keys[i].push_back(row(entries, w));
        }
    }
    const auto* sink = static_cast<const float*>(sinks.host.data);  // [H]
    pool_.parallel_for(n * heads, kMinPairsPerTask, [&](int64_t begin, int64_t end) {
        std::vector<float> score;
        for (int64_t pair = begin; pair < end; ++pair) {
            const int64_t i = pair / heads, h = pair % heads;
            const float* qh = row(q, i) + h * hd;
            const std::vector<const float*>& ks = keys[i];
            score.resize(ks.size());
            float top = sink[h];  // the sink takes part in the softmax's denominator only
            for (size_t j = 0; j < ks.size(); ++j)
                top = std::max(top, score[j] = dot(qh, ks[j], hd) * s.scale);
            float total = std::exp(sink[h] - top);
            for (float& p : score) total += p = std::exp(p - top);
            float* o = row(out, i) + h * hd;
            std::fill_n(o, hd, 0.0f);
            for (size_t j = 0; j < ks.size(); ++j) {
                const float p = score[j] / total;
                for (int64_t d = 0; d < hd; ++d) o[d] += p * ks[j][d];
            }
        }
    });
}

void CpuBackend::index_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                            int64_t pos0, Tensor& out) {
    index_topk_args_check(q, weights, keys, s, pos0, out);
    const int64_t n = q.rows(), d = s.head_dim;
    std::vector<float> score(keys.rows());
    for (int64_t i = 0; i < n; ++i) {
        const int64_t visible = (pos0 + i + 1) / s.ratio;  // entries whose window has closed
        const float* w = row(weights, i);                  // [n_heads]
        pool_.parallel_for(visible, kMinPairsPerTask * 16, [&](int64_t begin, int64_t end) {
            for (int64_t e = begin; e < end; ++e) {
                float sum = 0;
                for (int h = 0; h < s.n_heads; ++h) {
                    const float qk = dot(row(q, i) + h * d, row(keys, e), d) * s.scale;
                    sum += w[h] * s.weight_scale * std::max(qk, 0.0f);
                }
                score[e] = sum;
            }
        });
        dsa_topk_row(score.data(), visible, s.top_k, row(out, i));
    }
}

}  // namespace coli
