#include "backend/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "backend/residency.h"
#include "core/error.h"

namespace coli {

std::string_view op_name(OpKind op) {
    static constexpr std::array<std::string_view, static_cast<size_t>(OpKind::count_)> kNames = {
        "embedding",   "rms_norm",   "matmul",        "add",
        "clamp",       "rope",       "attention",     "route_softmax_topk",
        "moe_experts", "slice_cols", "mla_attention", "route_sigmoid_topk",
        "layer_norm",  "dsa_select", "short_conv",    "kda",
        "mul_sigmoid", "res_mix",
    };
    static_assert(std::ranges::none_of(kNames, [](std::string_view n) { return n.empty(); }),
                  "every op needs a name");
    return kNames[static_cast<size_t>(op)];
}

std::string op_params_text(const OpDesc& d) {
    const std::pair<const char*, int64_t> fields[] = {
        {"rows", d.rows},         {"cols", d.cols},         {"width", d.width},   {"heads", d.heads},
        {"kv_heads", d.kv_heads}, {"head_dim", d.head_dim}, {"latent", d.latent}, {"context", d.context},
        {"experts", d.experts},   {"top_k", d.top_k},       {"taps", d.taps},     {"entries", d.entries},
    };
    std::string s;
    for (const auto& [name, value] : fields)
        if (value != 0) s += fmt::format("{}{}={}", s.empty() ? "" : " ", name, value);
    return s;
}

void check_shape(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
    check(t.rows() == rows && t.cols() == cols, "{}: shape [{}, {}], expected [{}, {}]", what, t.rows(),
          t.cols(), rows, cols);
}

void attention_args_check(const Tensor& q, const Tensor& k, const Tensor& v, const KvCache& cache,
                          const AttentionShape& s, int64_t pos0, const Tensor& out) {
    const int64_t n = q.rows(), hd = s.head_dim;
    const int64_t kv_width = static_cast<int64_t>(s.n_kv_heads) * hd;
    check(s.n_kv_heads > 0 && s.n_heads % s.n_kv_heads == 0, "attention: {} heads over {} kv heads",
          s.n_heads, s.n_kv_heads);
    check_shape(q, n, s.n_heads * hd, "attention q");
    check_shape(k, n, kv_width, "attention k");
    check_shape(v, n, kv_width, "attention v");
    check_shape(out, n, s.n_heads * hd, "attention out");
    check_shape(cache.k, cache.k.rows(), kv_width, "attention k cache");
    check_shape(cache.v, cache.k.rows(), kv_width, "attention v cache");
    check(pos0 + n <= cache.k.rows(), "context full: {} tokens do not fit in a cache of {}", pos0 + n,
          cache.k.rows());
}

void mla_args_check(const Tensor& q, const Tensor& latent, const Tensor& k_pe, const Weight& w_kvb,
                    const KvCache& cache, const MlaShape& s, int64_t pos0, const Tensor* selection,
                    const Tensor& out) {
    const int64_t n = q.rows(), h = s.n_heads;
    check(h > 0 && s.nope_dim > 0 && s.rope_dim > 0 && s.v_dim > 0 && s.kv_lora > 0,
          "mla_attention: sizes must be positive");
    check_shape(q, n, h * (s.nope_dim + s.rope_dim), "mla_attention q");
    check_shape(latent, n, s.kv_lora, "mla_attention latent");
    check_shape(k_pe, n, s.rope_dim, "mla_attention k_pe");
    check(w_kvb.rows() == h * (s.nope_dim + s.v_dim) && w_kvb.cols() == s.kv_lora,
          "mla_attention: kv_b weight [{}, {}], expected [{}, {}]", w_kvb.rows(), w_kvb.cols(),
          h * (s.nope_dim + s.v_dim), s.kv_lora);
    check_shape(out, n, h * s.v_dim, "mla_attention out");
    check_shape(cache.k, cache.k.rows(), s.kv_lora, "mla_attention latent cache");
    check_shape(cache.v, cache.k.rows(), s.rope_dim, "mla_attention rope-key cache");
    check(pos0 + n <= cache.k.rows(), "context full: {} tokens do not fit in a cache of {}", pos0 + n,
          cache.k.rows());
    check(selection == nullptr || (selection->rows() == n && selection->cols() > 0),
          "mla_attention: the selection has {} rows for {} queries", selection ? selection->rows() : 0, n);
}

void dsa_args_check(const Tensor& q, const Tensor& weights, const Tensor& k, const Tensor& cache,
                    const DsaShape& s, int64_t pos0, const Tensor& out) {
    const int64_t n = q.rows();
    check(s.n_heads > 0 && s.head_dim > 0 && s.top_k > 0, "dsa_select: sizes must be positive");
    check_shape(q, n, int64_t{s.n_heads} * s.head_dim, "dsa_select q");
    check_shape(weights, n, s.n_heads, "dsa_select weights");
    check_shape(k, n, s.head_dim, "dsa_select k");
    check_shape(cache, cache.rows(), s.head_dim, "dsa_select key cache");
    check_shape(out, n, s.top_k, "dsa_select out");
    check(pos0 + n <= cache.rows(), "context full: {} tokens do not fit in a cache of {}", pos0 + n,
          cache.rows());
}

void kda_args_check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                    const Weight& a_log, const Weight& dt_bias, const KdaShape& s, const Tensor& state,
                    const Tensor& out) {
    const int64_t n = q.rows(), width = int64_t{s.n_heads} * s.head_dim;
    check(s.n_heads > 0 && s.head_dim > 0 && s.gate_lower_bound <= 0, "kda: {} heads of {}, gate bound {}",
          s.n_heads, s.head_dim, s.gate_lower_bound);
    for (const auto& [t, what] :
         {std::pair{&q, "kda q"}, {&k, "kda k"}, {&v, "kda v"}, {&g, "kda g"}, {&out, "kda out"}})
        check_shape(*t, n, width, what);
    check_shape(beta, n, s.n_heads, "kda beta");
    check_shape(state, width, s.head_dim, "kda state");
    check(a_log.format() == Format::f32 && a_log.rows() == 1 && a_log.cols() == s.n_heads,
          "kda: A_log must be f32 [1, {}]", s.n_heads);
    check(dt_bias.format() == Format::f32 && dt_bias.rows() == 1 && dt_bias.cols() == width,
          "kda: dt_bias must be f32 [1, {}]", width);
}

void short_conv_args_check(const Tensor& x, const Weight& w, const Tensor& state, const Tensor& out) {
    const int64_t c = x.cols();
    check(w.format() == Format::f32 && w.rows() == c && w.cols() >= 2,
          "short_conv: weight must be f32 [{}, K >= 2], is {} [{}, {}]", c, format_name(w.format()), w.rows(),
          w.cols());
    check_shape(state, w.cols() - 1, c, "short_conv state");
    check_shape(out, x.rows(), c, "short_conv out");
}

void res_mix_args_check(std::span<const Tensor> entries, const Weight& w, const Tensor& out) {
    check(!entries.empty(), "res_mix: no entries");
    for (const Tensor& e : entries) check_shape(e, out.rows(), out.cols(), "res_mix entry");
    check(w.format() == Format::f32 && w.rows() == 1 && w.cols() == out.cols(),
          "res_mix: weight must be f32 [1, {}]", out.cols());
}

bool weight_left_on_host(const OpDesc& d) {
    const bool dense_weight = d.op == OpKind::matmul || d.op == OpKind::embedding ||
                              d.op == OpKind::rms_norm || d.op == OpKind::layer_norm ||
                              d.op == OpKind::mla_attention || d.op == OpKind::short_conv ||
                              d.op == OpKind::res_mix;
    return dense_weight && d.weight != nullptr && d.weight->device == nullptr;
}

void dsa_topk_row(const float* scores, int64_t visible, int top_k, float* out) {
    std::vector<int64_t> order(visible);
    for (int64_t s = 0; s < visible; ++s) order[s] = s;
    const int64_t keep = std::min<int64_t>(top_k, visible);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int64_t a, int64_t b) {
        return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    });
    for (int j = 0; j < top_k; ++j) out[j] = j < keep ? static_cast<float>(order[j]) : -1.0f;
}

void rope_args_check(const Tensor& x, const RopeParams& p) {
    check(p.head_dim > 0 && x.cols() % p.head_dim == 0, "rope: {} columns are not whole heads of {}",
          x.cols(), p.head_dim);
    check(p.rotary_dim > 0 && p.rotary_dim % 2 == 0 && p.rotary_offset >= 0 &&
              p.rotary_offset + p.rotary_dim <= p.head_dim,
          "rope: dims [{}, {}) do not fit a head of {}", p.rotary_offset, p.rotary_offset + p.rotary_dim,
          p.head_dim);
}

std::vector<float> rope_inv_freq(const RopeParams& p) {
    const int d = p.rotary_dim, half = d / 2;
    std::vector<float> inv(half);
    for (int i = 0; i < half; ++i)
        inv[i] = 1.0f / std::pow(p.theta, static_cast<float>(2 * i) / static_cast<float>(d));
    if (p.yarn.factor <= 0) return inv;
    // YaRN: dims that rotate fewer than beta_slow times over the original context are interpolated
    // (divided by factor), more than beta_fast times extrapolated (kept), linearly in between.
    const auto corr_dim = [&](double rotations) {
        return d * std::log(p.yarn.original_ctx / (rotations * 2 * std::numbers::pi)) /
               (2 * std::log(p.theta));
    };
    double low = std::max(std::floor(corr_dim(p.yarn.beta_fast)), 0.0);
    double high = std::min(std::ceil(corr_dim(p.yarn.beta_slow)), static_cast<double>(d - 1));
    if (low == high) high += 0.001;  // as transformers: avoid a zero-width ramp
    for (int i = 0; i < half; ++i) {
        const float ramp = std::clamp(
            (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f, 1.0f);
        const float extrapolated = inv[i], interpolated = inv[i] / p.yarn.factor;
        const float keep = 1.0f - ramp;  // share of the extrapolated frequency
        inv[i] = interpolated * (1.0f - keep) + extrapolated * keep;
    }
    return inv;
}

namespace {

// One token: appends its k expert ids and weights.
void route_sigmoid_row(std::span<const float> logits, std::span<const float> bias, const SigmoidRouting& p,
                       std::vector<int32_t>& experts, std::vector<float>& weights) {
    const auto n = static_cast<int>(logits.size());
    check(bias.size() == logits.size(), "route_sigmoid_topk: {} bias values for {} experts", bias.size(), n);
    check(p.n_group > 0 && n % p.n_group == 0 && p.topk_group > 0 && p.topk_group <= p.n_group,
          "route_sigmoid_topk: {} experts in {} groups, keep {}", n, p.n_group, p.topk_group);
    check(p.k > 0 && p.k <= n / p.n_group * p.topk_group, "route_sigmoid_topk: top {} of {} experts", p.k, n);
    constexpr float kMasked = 0.0f;  // as transformers' masked_fill (not -inf)
    std::vector<float> score(n), choice(n);
    for (int e = 0; e < n; ++e) {
        score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
        choice[e] = score[e] + bias[e];
    }
    // Groups ranked by the sum of their two best biased scores; the biased scores of all but the best
    // topk_group groups are set to 0.
    const int per_group = n / p.n_group;
    std::vector<float> group_score(p.n_group);
    for (int g = 0; g < p.n_group; ++g) {
        std::vector<float> v(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
        std::partial_sort(v.begin(), v.begin() + std::min(2, per_group), v.end(), std::greater<>());
        group_score[g] = per_group >= 2 ? v[0] + v[1] : v[0];
    }
    std::vector<int> groups(p.n_group);
    for (int g = 0; g < p.n_group; ++g) groups[g] = g;
    std::stable_sort(groups.begin(), groups.end(),
                     [&](int a, int b) { return group_score[a] > group_score[b]; });
    for (size_t r = p.topk_group; r < groups.size(); ++r)
        std::fill_n(choice.begin() + groups[r] * per_group, per_group, kMasked);
    // Top k of the biased scores (ties to the lower id); weights are the unbiased scores.
    std::vector<int> order(n);
    for (int e = 0; e < n; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + p.k, order.end(), [&](int a, int b) {
        return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
    });
    float sum = 0;
    for (int j = 0; j < p.k; ++j) sum += score[order[j]];
    for (int j = 0; j < p.k; ++j) {
        experts.push_back(order[j]);
        const float w = p.renormalize ? score[order[j]] / (sum + 1e-20f) : score[order[j]];
        weights.push_back(w * p.scaling);
    }
}

}  // namespace

Routing route_sigmoid_host(int64_t n, int64_t n_experts, std::span<const float> logits, const Weight& bias,
                           const SigmoidRouting& p) {
    check(bias.rows() == 1 && bias.cols() == n_experts, "route_sigmoid_topk: bias [{}, {}] for {} experts",
          bias.rows(), bias.cols(), n_experts);
    std::vector<float> b(n_experts);
    weight_decode_row(bias.host, 0, b.data());
    Routing r{n, p.k, {}, {}};
    for (int64_t t = 0; t < n; ++t)
        route_sigmoid_row(logits.subspan(t * n_experts, n_experts), b, p, r.experts, r.weights);
    return r;
}

}  // namespace coli
