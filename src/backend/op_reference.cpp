#include "backend/op_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "backend/backend.h"

namespace coli::op_reference {

namespace {

// Every element of w, decoded.                                              [rows, cols]
std::vector<double> decoded(const WeightView& w) {
    std::vector<float> row(w.cols);
    std::vector<double> all;
    all.reserve(static_cast<size_t>(w.rows * w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
        weight_decode_row(w, r, row.data());
        all.insert(all.end(), row.begin(), row.end());
    }
    return all;
}

double dot(const double* a, const double* b, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

double sigmoid_d(double x) {
    return 1 / (1 + std::exp(-x));
}

// p = softmax(s), in place.
void softmax(std::vector<double>& s) {
    const double top = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& v : s) sum += v = std::exp(v - top);
    for (double& v : s) v /= sum;
}

Floats to_floats(const std::vector<double>& v) {
    return Floats(v.begin(), v.end());
}

std::vector<double> to_doubles(In v) {
    return std::vector<double>(v.begin(), v.end());
}

// The k largest of p (ties to the lower index), largest first.
std::vector<int32_t> top_k(const std::vector<double>& p, int k) {
    std::vector<int32_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    order.resize(k);
    return order;
}

}  // namespace

Floats embedding(const WeightView& table, std::span<const int32_t> ids) {
    Floats out(ids.size() * table.cols);
    for (size_t i = 0; i < ids.size(); ++i) weight_decode_row(table, ids[i], &out[i * table.cols]);
    return out;
}

Floats rms_norm(In x, int64_t d, const WeightView& w, float eps) {
    const std::vector<double> g = decoded(w);
    Floats out(x.size());
    for (size_t r = 0; r < x.size() / d; ++r) {
        const float* v = &x[r * d];
        double sum_sq = 0;
        for (int64_t i = 0; i < d; ++i) sum_sq += double{v[i]} * v[i];
        const double inv = 1 / std::sqrt(sum_sq / d + eps);
        for (int64_t i = 0; i < d; ++i) out[r * d + i] = static_cast<float>(v[i] * inv * g[i]);
    }
    return out;
}

Floats add(In a, In b) {
    Floats out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
    return out;
}

Floats clamp(In x, float lo, float hi) {
    Floats out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    return out;
}

Floats rope(In x, int64_t cols, const RopeParams& p, int64_t pos0) {
    const std::vector<float> inv_freq = rope_inv_freq(p);
    const int half = p.rotary_dim / 2;
    Floats out(x.begin(), x.end());
    for (size_t r = 0; r < x.size() / cols; ++r)
        for (int64_t h = 0; h < cols / p.head_dim; ++h) {
            float* v = &out[r * cols + h * p.head_dim + p.rotary_offset];
            for (int i = 0; i < half; ++i) {
                // The angle is an f32 product, as transformers computes it (position times inverse
                // frequency); the inverse rotation turns by minus the angle.
                const int64_t position = (pos0 + static_cast<int64_t>(r)) * p.position_stride;
                const float angle = static_cast<float>(position) * inv_freq[i];
                const double c = std::cos(double{angle}) * p.attention_scaling,
                             s = (p.inverse ? -1 : 1) * std::sin(double{angle}) * p.attention_scaling;
                // neox pairs (i, i + half), interleaved (2i, 2i + 1).
                const int a = p.style == RopeStyle::neox ? i : 2 * i;
                const int b = p.style == RopeStyle::neox ? i + half : 2 * i + 1;
                const double x1 = v[a], x2 = v[b];
                v[a] = static_cast<float>(x1 * c - x2 * s);
                v[b] = static_cast<float>(x2 * c + x1 * s);
            }
        }
    return out;
}

Floats attention(In q, In k, In v, Floats& cache_k, Floats& cache_v, const AttentionShape& s, int64_t pos0) {
    const int64_t hd = s.head_dim, qw = int64_t{s.n_heads} * hd, kvw = int64_t{s.n_kv_heads} * hd;
    const auto n = static_cast<int64_t>(q.size()) / qw;
    std::copy(k.begin(), k.end(), cache_k.begin() + pos0 * kvw);
    std::copy(v.begin(), v.end(), cache_v.begin() + pos0 * kvw);
    const std::vector<double> kc = to_doubles(cache_k), vc = to_doubles(cache_v);
    Floats out(n * qw);
    for (int64_t i = 0; i < n; ++i)
        for (int h = 0; h < s.n_heads; ++h) {
            const int64_t kvh = h / (s.n_heads / s.n_kv_heads);  // GQA: consecutive heads share a kv head
            const std::vector<double> qh = to_doubles(q.subspan(i * qw + h * hd, hd));
            std::vector<double> p(pos0 + i + 1);
            for (int64_t t = 0; t <= pos0 + i; ++t)
                p[t] = s.scale * dot(qh.data(), &kc[t * kvw + kvh * hd], hd);
            softmax(p);
            for (int64_t c = 0; c < hd; ++c) {
                double o = 0;
                for (int64_t t = 0; t <= pos0 + i; ++t) o += p[t] * vc[t * kvw + kvh * hd + c];
                out[i * qw + h * hd + c] = static_cast<float>(o);
            }
        }
    return out;
}

Routing route_softmax_topk(In logits, int64_t n_experts, int k, bool renormalize) {
    const auto n = static_cast<int64_t>(logits.size()) / n_experts;
    Routing r{n, k, {}, {}};
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> p = to_doubles(logits.subspan(t * n_experts, n_experts));
        softmax(p);
        const std::vector<int32_t> top = top_k(p, k);
        double kept = 0;
        for (int32_t e : top) kept += p[e];
        for (int32_t e : top) {
            r.experts.push_back(e);
            r.weights.push_back(static_cast<float>(renormalize ? p[e] / kept : p[e]));
        }
    }
    return r;
}

Floats moe_experts(std::span<const ExpertWeights> experts, const Routing& r, In x, In y) {
    const int64_t d_model = static_cast<int64_t>(x.size()) / r.n_tokens;
    std::vector<double> out(y.begin(), y.end());
    for (const ExpertWeights& e : experts) {
        const int64_t d_ff = e.gate.rows();
        const std::vector<double> gate = decoded(e.gate.host), up = decoded(e.up.host),
                                  down = decoded(e.down.host);
        for (int64_t t = 0; t < r.n_tokens; ++t)
            for (int j = 0; j < r.k; ++j) {
                if (r.experts[t * r.k + j] != e.id) continue;
                const std::vector<double> xt = to_doubles(x.subspan(t * d_model, d_model));
                std::vector<double> act(d_ff);  // act(gate x, up x)
                for (int64_t f = 0; f < d_ff; ++f) {
                    const double g = dot(&gate[f * d_model], xt.data(), d_model),
                                 u = dot(&up[f * d_model], xt.data(), d_model);
                    if (e.act.kind == GluKind::situ) {  // b tanh(g / b) sigmoid(g) * lb tanh(u / lb)
                        const double b = e.act.beta, lb = e.act.linear_beta;
                        act[f] = b * std::tanh(g / b) * sigmoid_d(g) * lb * std::tanh(u / lb);
                    } else if (e.act.kind == GluKind::silu_clamp) {  // silu(min(g, L)) clamp(u, -L, L)
                        const double limit = e.act.beta, gc = std::min(g, limit);
                        act[f] = gc * sigmoid_d(gc) * std::clamp(u, -limit, limit);
                    } else {  // silu(g) u
                        act[f] = g * sigmoid_d(g) * u;
                    }
                }
                for (int64_t c = 0; c < d_model; ++c)
                    out[t * d_model + c] += r.weights[t * r.k + j] * dot(&down[c * d_ff], act.data(), d_ff);
            }
    }
    return to_floats(out);
}

Floats slice_cols(In x, int64_t cols, int64_t c0, int64_t width) {
    Floats out;
    for (size_t r = 0; r < x.size() / cols; ++r)
        for (int64_t c = c0; c < c0 + width; ++c) out.push_back(x[r * cols + c]);
    return out;
}

Floats mla_attention(In q, In latent, In k_pe, const WeightView& w_kvb, Floats& cache_latent,
                     Floats& cache_pe, const MlaShape& s, int64_t pos0, In selection) {
    const int64_t dn = s.nope_dim, dr = s.rope_dim, dv = s.v_dim, lora = s.kv_lora;
    const int64_t qw = int64_t{s.n_heads} * (dn + dr);
    const auto n = static_cast<int64_t>(q.size()) / qw;
    std::copy(latent.begin(), latent.end(), cache_latent.begin() + pos0 * lora);
    std::copy(k_pe.begin(), k_pe.end(), cache_pe.begin() + pos0 * dr);
    const std::vector<double> w = decoded(w_kvb), lat = to_doubles(cache_latent), pe = to_doubles(cache_pe);
    const auto top = static_cast<int64_t>(selection.size()) / n;
    Floats out(n * s.n_heads * dv);
    for (int64_t i = 0; i < n; ++i) {
        std::vector<int64_t> keys;  // every position up to the query's (causal), or the selected ones
        if (selection.empty())
            for (int64_t t = 0; t <= pos0 + i; ++t) keys.push_back(t);
        for (int64_t j = 0; j < top; ++j)
            if (selection[i * top + j] >= 0) keys.push_back(static_cast<int64_t>(selection[i * top + j]));
        for (int h = 0; h < s.n_heads; ++h) {
            const double* w_uk = &w[h * (dn + dv) * lora];  // [dn, lora]
            const double* w_uv = w_uk + dn * lora;          // [dv, lora]
            const std::vector<double> q_nope = to_doubles(q.subspan(i * qw + h * (dn + dr), dn)),
                                      q_pe = to_doubles(q.subspan(i * qw + h * (dn + dr) + dn, dr));
            std::vector<double> p;
            for (int64_t t : keys) {
                double score = dot(q_pe.data(), &pe[t * dr], dr);
                for (int64_t c = 0; c < dn; ++c)
                    score += q_nope[c] * dot(&w_uk[c * lora], &lat[t * lora], lora);
                p.push_back(s.scale * score);
            }
            softmax(p);
            for (int64_t c = 0; c < dv; ++c) {
                double o = 0;
                for (size_t j = 0; j < keys.size(); ++j)
                    o += p[j] * dot(&w_uv[c * lora], &lat[keys[j] * lora], lora);
                out[(i * s.n_heads + h) * dv + c] = static_cast<float>(o);
            }
        }
    }
    return out;
}

Routing route_sigmoid_topk(In logits, int64_t n_experts, const WeightView& bias, const SigmoidRouting& p,
                           std::span<const int32_t> fixed) {
    constexpr double kRenormGuard = 1e-20;  // added to the sum before renormalizing (SigmoidRouting)
    const auto n = static_cast<int64_t>(logits.size()) / n_experts;
    const std::vector<double> b = bias.rows == 0 ? std::vector<double>(n_experts, 0.0) : decoded(bias);
    const int64_t per_group = n_experts / p.n_group;
    Routing r{n, p.k, {}, {}};
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> score(n_experts), choice(n_experts);
        for (int64_t e = 0; e < n_experts; ++e) {
            const double l = logits[t * n_experts + e];
            score[e] =
                p.score == RouterScore::sqrt_softplus ? std::sqrt(std::log1p(std::exp(l))) : sigmoid_d(l);
            choice[e] = score[e] + b[e];
        }
        if (!fixed.empty()) {  // hash routing: the given experts, weighted as a top-k choice would be
            double sum = 0;
            for (int j = 0; j < p.k; ++j) sum += score[fixed[t * p.k + j]];
            for (int j = 0; j < p.k; ++j) {
                const int32_t e = fixed[t * p.k + j];
                r.experts.push_back(e);
                r.weights.push_back(static_cast<float>(
                    (p.renormalize ? score[e] / (sum + kRenormGuard) : score[e]) * p.scaling));
            }
            continue;
        }
        std::vector<double> group_score(p.n_group);  // the sum of the group's two best biased scores
        for (int g = 0; g < p.n_group; ++g) {
            std::vector<double> v(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
            std::sort(v.begin(), v.end(), std::greater<>());
            group_score[g] = v[0] + (per_group >= 2 ? v[1] : 0);
        }
        const std::vector<int32_t> kept = top_k(group_score, p.topk_group);
        for (int g = 0; g < p.n_group; ++g)
            if (std::find(kept.begin(), kept.end(), g) == kept.end())
                std::fill_n(choice.begin() + g * per_group, per_group, 0.0);  // masked to 0, not -inf
        const std::vector<int32_t> top = top_k(choice, p.k);
        double sum = 0;
        for (int32_t e : top) sum += score[e];
        for (int32_t e : top) {
            r.experts.push_back(e);
            r.weights.push_back(
                static_cast<float>((p.renormalize ? score[e] / (sum + kRenormGuard) : score[e]) * p.scaling));
        }
    }
    return r;
}

Floats layer_norm(In x, int64_t d, const WeightView& w, const WeightView& b, float eps) {
    const std::vector<double> g = decoded(w), bias = decoded(b);
    Floats out(x.size());
    for (size_t r = 0; r < x.size() / d; ++r) {
        const float* v = &x[r * d];
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; ++i) mean += v[i];
        mean /= d;
        for (int64_t i = 0; i < d; ++i) var += (v[i] - mean) * (v[i] - mean);
        const double inv = 1 / std::sqrt(var / d + eps);
        for (int64_t i = 0; i < d; ++i)
            out[r * d + i] = static_cast<float>((v[i] - mean) * inv * g[i] + bias[i]);
    }
    return out;
}

std::vector<std::vector<double>> dsa_scores(In q, In weights, In k, Floats& cache, const DsaShape& s,
                                            int64_t pos0) {
    const int64_t d = s.head_dim, qw = int64_t{s.n_heads} * d;
    const auto n = static_cast<int64_t>(q.size()) / qw;
    std::copy(k.begin(), k.end(), cache.begin() + pos0 * d);
    const std::vector<double> kc = to_doubles(cache);
    std::vector<std::vector<double>> scores(n);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t t = 0; t <= pos0 + i; ++t) {
            double sum = 0;  // weight_scale sum_h weights[i][h] relu(scale q_h(i) . cache(t))
            for (int h = 0; h < s.n_heads; ++h) {
                const std::vector<double> qh = to_doubles(q.subspan(i * qw + h * d, d));
                sum += s.weight_scale * weights[i * s.n_heads + h] *
                       std::max(s.scale * dot(qh.data(), &kc[t * d], d), 0.0);
            }
            scores[i].push_back(sum);
        }
    return scores;
}

Floats dsa_select(const std::vector<std::vector<double>>& scores, int top_k) {
    Floats out(scores.size() * top_k);
    for (size_t i = 0; i < scores.size(); ++i) {
        const Floats row = to_floats(scores[i]);
        dsa_topk_row(row.data(), static_cast<int64_t>(row.size()), top_k, &out[i * top_k]);
    }
    return out;
}

Floats short_conv(In x, int64_t c, const WeightView& w, Floats& state) {
    const std::vector<double> wt = decoded(w);  // [C, K]
    const int64_t kernel = w.cols, n = static_cast<int64_t>(x.size()) / c;
    Floats all(state.begin(), state.end());  // [K - 1 + n, C]: the state's inputs, then x
    all.insert(all.end(), x.begin(), x.end());
    Floats out(n * c);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t ch = 0; ch < c; ++ch) {
            double sum = 0;  // the window ending at x's row t
            for (int64_t j = 0; j < kernel; ++j) sum += wt[ch * kernel + j] * all[(t + j) * c + ch];
            out[t * c + ch] = static_cast<float>(sum * sigmoid_d(sum));
        }
    std::copy(all.end() - static_cast<int64_t>(state.size()), all.end(), state.begin());
    return out;
}

Floats kda(In q, In k, In v, In g, In beta, const WeightView& a_log, const WeightView& dt_bias,
           const KdaShape& s, Floats& state) {
    const int64_t d = s.head_dim, width = int64_t{s.n_heads} * d;
    const auto n = static_cast<int64_t>(q.size()) / width;
    const std::vector<double> a = decoded(a_log), dt = decoded(dt_bias);
    std::vector<double> st = to_doubles(state);  // head h: rows [h d, + d), S[i][j] at (h d + i, j)
    Floats out(n * width);
    // v / sqrt(sum v^2 + eps), times scale.
    const auto l2norm = [&](In v, double scale) {
        std::vector<double> u = to_doubles(v);
        const double f = scale / std::sqrt(dot(u.data(), u.data(), d) + kKdaL2NormEps);
        for (double& x : u) x *= f;
        return u;
    };
    for (int64_t t = 0; t < n; ++t)
        for (int h = 0; h < s.n_heads; ++h) {
            const int64_t c0 = t * width + h * d;
            const std::vector<double> qh = l2norm(q.subspan(c0, d), 1 / std::sqrt(double(d))),
                                      kh = l2norm(k.subspan(c0, d), 1);
            const double b = sigmoid_d(beta[t * s.n_heads + h]);
            double* S = &st[h * d * d];  // [dk, dv]
            for (int64_t i = 0; i < d; ++i) {
                const double z = g[c0 + i] + dt[h * d + i];
                // The log-decay: bound sigmoid(exp(A) z) with a lower bound, else -exp(A) softplus(z).
                const double log_decay = s.gate_lower_bound < 0
                                             ? s.gate_lower_bound * sigmoid_d(std::exp(a[h]) * z)
                                             : -std::exp(a[h]) * std::log1p(std::exp(z));
                for (int64_t j = 0; j < d; ++j) S[i * d + j] *= std::exp(log_decay);  // S = Diag(alpha) S
            }
            for (int64_t j = 0; j < d; ++j) {  // S += k (b (v - S^T k))^T
                double stk = 0;
                for (int64_t i = 0; i < d; ++i) stk += S[i * d + j] * kh[i];
                const double u = b * (v[c0 + j] - stk);
                for (int64_t i = 0; i < d; ++i) S[i * d + j] += kh[i] * u;
            }
            for (int64_t j = 0; j < d; ++j) {  // out = S^T q
                double o = 0;
                for (int64_t i = 0; i < d; ++i) o += S[i * d + j] * qh[i];
                out[c0 + j] = static_cast<float>(o);
            }
        }
    state = to_floats(st);
    return out;
}

Floats mul_sigmoid(In a, In b) {
    Floats out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = static_cast<float>(a[i] * sigmoid_d(b[i]));
    return out;
}

Floats res_mix(std::span<const Floats> entries, int64_t d, const WeightView& w, float eps) {
    const std::vector<double> wt = decoded(w);
    const auto n = static_cast<int64_t>(entries.front().size()) / d;
    Floats out(n * d);
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> score;  // sum_d entry[d] / rms(entry) w[d]
        for (const Floats& e : entries) {
            const std::vector<double> v = to_doubles(In(e).subspan(t * d, d));
            score.push_back(dot(v.data(), wt.data(), d) / std::sqrt(dot(v.data(), v.data(), d) / d + eps));
        }
        softmax(score);
        for (int64_t c = 0; c < d; ++c) {
            double o = 0;
            for (size_t m = 0; m < entries.size(); ++m) o += score[m] * entries[m][t * d + c];
            out[t * d + c] = static_cast<float>(o);
        }
    }
    return out;
}

Floats matmul_grouped(const WeightView& w, In x, int groups) {
    const std::vector<double> wt = decoded(w);  // [rows, cols]
    const int64_t cols = w.cols, r = w.rows / groups, xw = groups * cols;
    const auto n = static_cast<int64_t>(x.size()) / xw;
    Floats out(n * w.rows);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t o = 0; o < w.rows; ++o) {
            const int64_t g = o / r;  // the group of output o reads its group's columns of x
            double sum = 0;
            for (int64_t c = 0; c < cols; ++c) sum += wt[o * cols + c] * x[t * xw + g * cols + c];
            out[t * w.rows + o] = static_cast<float>(sum);
        }
    return out;
}

Floats copy_rows(In dst, In src, int64_t cols, int64_t row0) {
    Floats out(dst.begin(), dst.end());
    const auto ring = static_cast<int64_t>(dst.size()) / cols, m = static_cast<int64_t>(src.size()) / cols;
    // In order: a row written twice keeps the later one, which is what "the last R rows" means.
    for (int64_t i = 0; i < m; ++i) std::copy_n(&src[i * cols], cols, &out[((row0 + i) % ring) * cols]);
    return out;
}

Floats compress_kv(In kv, In gate, const WeightView& ape, In state_kv, In state_gate, const CompressShape& s,
                   int64_t pos0) {
    const int64_t hd = s.head_dim, width = int64_t{s.series} * hd, slots = int64_t{s.series} * s.ratio;
    const auto n = static_cast<int64_t>(kv.size()) / width;
    const std::vector<double> bias = decoded(ape);  // [ratio, series hd]
    // Element c of position j's raw row: this call's row j - pos0, or the state's row j mod slots.
    const auto at = [&](In now, In state, int64_t j, int64_t c) {
        return j >= pos0 ? double{now[(j - pos0) * width + c]} : double{state[(j % slots) * width + c]};
    };
    const int64_t w0 = pos0 / s.ratio, w1 = (pos0 + n) / s.ratio;
    Floats out;
    for (int64_t w = w0; w < w1; ++w)
        for (int64_t d = 0; d < hd; ++d) {
            std::vector<double> logit, value;
            if (s.series == 2 && w >= 1)
                for (int64_t r = 0; r < s.ratio; ++r) {
                    const int64_t j = (w - 1) * s.ratio + r;
                    logit.push_back(at(gate, state_gate, j, d) + bias[r * width + d]);
                    value.push_back(at(kv, state_kv, j, d));
                }
            const int64_t c = s.series == 2 ? hd + d : d;
            for (int64_t r = 0; r < s.ratio; ++r) {
                const int64_t j = w * s.ratio + r;
                logit.push_back(at(gate, state_gate, j, c) + bias[r * width + c]);
                value.push_back(at(kv, state_kv, j, c));
            }
            softmax(logit);
            double o = 0;
            for (size_t k = 0; k < logit.size(); ++k) o += logit[k] * value[k];
            out.push_back(static_cast<float>(o));
        }
    return out;
}

Floats compressed_attention(In q, In kv, In ring, In entries, In selection, const WeightView& sinks,
                            const CompressedAttentionShape& s, int64_t pos0) {
    const int64_t hd = s.head_dim, qw = int64_t{s.n_heads} * hd;
    const auto n = static_cast<int64_t>(q.size()) / qw, ring_rows = static_cast<int64_t>(ring.size()) / hd;
    const std::vector<double> sink = decoded(sinks);
    Floats out(n * qw);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = pos0 + i;
        std::vector<const float*> keys;
        for (int64_t p = 0; p <= t; ++p)
            if (p > t - s.window)
                keys.push_back(p >= pos0 ? &kv[(p - pos0) * hd] : &ring[(p % ring_rows) * hd]);
        if (s.ratio > 0) {
            const int64_t visible = (t + 1) / s.ratio;
            const int64_t top_k = static_cast<int64_t>(selection.size()) / n;
            for (int64_t w = 0; w < visible; ++w) {
                const bool listed =
                    selection.empty() || std::find(&selection[i * top_k], &selection[(i + 1) * top_k],
                                                   static_cast<float>(w)) != &selection[(i + 1) * top_k];
                if (listed) keys.push_back(&entries[w * hd]);
            }
        }
        for (int h = 0; h < s.n_heads; ++h) {
            const std::vector<double> qh = to_doubles(q.subspan(i * qw + h * hd, hd));
            std::vector<double> e;  // exp(logit) of every key, then of the sink
            for (const float* k : keys)
                e.push_back(s.scale * dot(qh.data(), to_doubles({k, size_t(hd)}).data(), hd));
            e.push_back(sink[h]);
            softmax(e);  // the sink's share is dropped: it only adds to the denominator
            for (int64_t d = 0; d < hd; ++d) {
                double o = 0;
                for (size_t j = 0; j < keys.size(); ++j) o += e[j] * keys[j][d];
                out[i * qw + h * hd + d] = static_cast<float>(o);
            }
        }
    }
    return out;
}

std::vector<std::vector<double>> index_scores(In q, In weights, In keys, const DsaShape& s, int64_t pos0) {
    const int64_t d = s.head_dim, qw = int64_t{s.n_heads} * d;
    const auto n = static_cast<int64_t>(q.size()) / qw;
    const std::vector<double> kc = to_doubles(keys);
    std::vector<std::vector<double>> scores(n);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t w = 0; w < (pos0 + i + 1) / s.ratio; ++w) {
            double sum = 0;
            for (int h = 0; h < s.n_heads; ++h) {
                const std::vector<double> qh = to_doubles(q.subspan(i * qw + h * d, d));
                sum += s.weight_scale * weights[i * s.n_heads + h] *
                       std::max(s.scale * dot(qh.data(), &kc[w * d], d), 0.0);
            }
            scores[i].push_back(sum);
        }
    return scores;
}

Floats hc_weights(In mix, int64_t cols, const WeightView& base, const WeightView& scale, const HcShape& s) {
    const std::vector<double> b = decoded(base), k = decoded(scale);
    const int S = s.streams;
    Floats out(mix.size());
    for (size_t t = 0; t < mix.size() / cols; ++t) {
        const float* m = &mix[t * cols];
        float* o = &out[t * cols];
        for (int j = 0; j < S; ++j) o[j] = static_cast<float>(sigmoid_d(m[j] * k[0] + b[j]) + s.eps);
        if (cols == S) continue;
        for (int j = 0; j < S; ++j) o[S + j] = static_cast<float>(2 * sigmoid_d(m[S + j] * k[1] + b[S + j]));
        std::vector<std::vector<double>> c(S);  // c[j][k]
        for (int j = 0; j < S; ++j) {
            for (int kk = 0; kk < S; ++kk)
                c[j].push_back(m[2 * S + j * S + kk] * k[2] + b[2 * S + j * S + kk]);
            softmax(c[j]);
            for (double& v : c[j]) v += s.eps;
        }
        const auto normalize_columns = [&] {
            for (int kk = 0; kk < S; ++kk) {
                double sum = 0;
                for (int j = 0; j < S; ++j) sum += c[j][kk];
                for (int j = 0; j < S; ++j) c[j][kk] /= sum + s.eps;
            }
        };
        normalize_columns();
        for (int it = 1; it < s.sinkhorn_iters; ++it) {
            for (int j = 0; j < S; ++j) {
                const double sum = std::accumulate(c[j].begin(), c[j].end(), 0.0);
                for (double& v : c[j]) v /= sum + s.eps;
            }
            normalize_columns();
        }
        for (int j = 0; j < S; ++j)
            for (int kk = 0; kk < S; ++kk) o[2 * S + j * S + kk] = static_cast<float>(c[j][kk]);
    }
    return out;
}

Floats hc_collapse(In x, In weights, int64_t wcols, int streams, int64_t d) {
    const auto n = static_cast<int64_t>(x.size()) / (streams * d);
    Floats out(n * d);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < d; ++c) {
            double sum = 0;
            for (int j = 0; j < streams; ++j)
                sum += double{weights[t * wcols + j]} * x[(t * streams + j) * d + c];
            out[t * d + c] = static_cast<float>(sum);
        }
    return out;
}

Floats hc_expand(In x, In y, In weights, int streams, int64_t d) {
    const int S = streams;
    const int64_t wcols = int64_t{2 + S} * S;
    const auto n = static_cast<int64_t>(y.size()) / d;
    Floats out(x.size());
    for (int64_t t = 0; t < n; ++t) {
        const float* w = &weights[t * wcols];
        for (int kk = 0; kk < S; ++kk)
            for (int64_t c = 0; c < d; ++c) {
                double v = double{w[S + kk]} * y[t * d + c];
                for (int j = 0; j < S; ++j) v += double{w[2 * S + j * S + kk]} * x[(t * S + j) * d + c];
                out[(t * S + kk) * d + c] = static_cast<float>(v);
            }
    }
    return out;
}

Floats repeat_cols(In x, int64_t d, int times) {
    Floats out;
    for (size_t t = 0; t < x.size() / d; ++t)
        for (int k = 0; k < times; ++k) out.insert(out.end(), x.begin() + t * d, x.begin() + (t + 1) * d);
    return out;
}

}  // namespace coli::op_reference
