#include "backend/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "backend/activations.h"
#include "backend/residency.h"
#include "core/error.h"

namespace coli {

std::string_view op_name(OpKind op) {
    static constexpr std::array<std::string_view, static_cast<size_t>(OpKind::count_)> kNames = {
        "embedding",
        "rms_norm",
        "matmul",
        "add",
        "clamp",
        "rope",
        "attention",
        "route_softmax_topk",
        "moe_experts",
        "slice_cols",
        "mla_attention",
        "route_sigmoid_topk",
        "layer_norm",
        "dsa_select",
        "short_conv",
        "kda",
        "mul_sigmoid",
        "res_mix",
        "copy_rows",
        "compress_kv",
        "compressed_attention",
        "index_topk",
        "hc_weights",
        "hc_collapse",
        "hc_expand",
        "repeat_cols",
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
        {"groups", d.groups},     {"ratio", d.ratio},       {"window", d.window}, {"streams", d.streams},
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
    check(p.position_stride >= 1, "rope: position stride {}", p.position_stride);
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

// An expert's score from its router logit.
float router_score(float logit, RouterScore kind) {
    if (kind == RouterScore::sqrt_softplus) return std::sqrt(softplus(logit));
    return 1.0f / (1.0f + std::exp(-logit));
}

// Appends the chosen experts and their weights: their scores, renormalized (sum + 1e-20) when asked, times
// the scaling.
void route_weights_append(std::span<const float> score, std::span<const int> chosen, const SigmoidRouting& p,
                          std::vector<int32_t>& experts, std::vector<float>& weights) {
    float sum = 0;
    for (int e : chosen) sum += score[e];
    for (int e : chosen) {
        experts.push_back(e);
        const float w = p.renormalize ? score[e] / (sum + 1e-20f) : score[e];
        weights.push_back(w * p.scaling);
    }
}

// One token with fixed experts (hash routing): appends them and their weights.
void route_fixed_row(std::span<const float> logits, std::span<const int32_t> fixed, const SigmoidRouting& p,
                     std::vector<int32_t>& experts, std::vector<float>& weights) {
    const auto n = static_cast<int>(logits.size());
    std::vector<float> score(n);
    for (int e = 0; e < n; ++e) score[e] = router_score(logits[e], p.score);
    std::vector<int> chosen(fixed.begin(), fixed.end());
    for (int e : chosen) check(e >= 0 && e < n, "route_sigmoid_topk: fixed expert {} of {}", e, n);
    route_weights_append(score, chosen, p, experts, weights);
}

// One token: appends its k expert ids and weights.
void route_sigmoid_row(std::span<const float> logits, std::span<const float> bias, const SigmoidRouting& p,
                       std::vector<int32_t>& experts, std::vector<float>& weights) {
    const auto n = static_cast<int>(logits.size());
    check(bias.empty() || bias.size() == logits.size(), "route_sigmoid_topk: {} bias values for {} experts",
          bias.size(), n);
    check(p.n_group > 0 && n % p.n_group == 0 && p.topk_group > 0 && p.topk_group <= p.n_group,
          "route_sigmoid_topk: {} experts in {} groups, keep {}", n, p.n_group, p.topk_group);
    check(p.k > 0 && p.k <= n / p.n_group * p.topk_group, "route_sigmoid_topk: top {} of {} experts", p.k, n);
    constexpr float kMasked = 0.0f;  // as transformers' masked_fill (not -inf)
    std::vector<float> score(n), choice(n);
    for (int e = 0; e < n; ++e) {
        score[e] = router_score(logits[e], p.score);
        choice[e] = score[e] + (bias.empty() ? 0.0f : bias[e]);
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
    order.resize(p.k);
    route_weights_append(score, order, p, experts, weights);
}

}  // namespace

Routing route_sigmoid_host(int64_t n, int64_t n_experts, std::span<const float> logits, const Weight& bias,
                           const SigmoidRouting& p, std::span<const int32_t> fixed) {
    const bool biased = bias.rows() != 0;
    check(!biased || (bias.rows() == 1 && bias.cols() == n_experts),
          "route_sigmoid_topk: bias [{}, {}] for {} experts", bias.rows(), bias.cols(), n_experts);
    check(fixed.empty() || static_cast<int64_t>(fixed.size()) == n * p.k,
          "route_sigmoid_topk: {} fixed experts for {} tokens of {}", fixed.size(), n, p.k);
    std::vector<float> b(biased ? n_experts : 0);
    if (biased) weight_decode_row(bias.host, 0, b.data());
    Routing r{n, p.k, {}, {}};
    for (int64_t t = 0; t < n; ++t) {
        const auto row_logits = logits.subspan(t * n_experts, n_experts);
        if (fixed.empty())
            route_sigmoid_row(row_logits, b, p, r.experts, r.weights);
        else
            route_fixed_row(row_logits, fixed.subspan(t * p.k, p.k), p, r.experts, r.weights);
    }
    return r;
}

int64_t windows_closing(int64_t pos0, int64_t n, int ratio) {
    return (pos0 + n) / ratio - pos0 / ratio;
}

void copy_rows_args_check(const Tensor& dst, const Tensor& src, int64_t row0) {
    check(src.cols() == dst.cols() && dst.rows() > 0 && row0 >= 0,
          "copy_rows: [{}, {}] into [{}, {}] at row {}", src.rows(), src.cols(), dst.rows(), dst.cols(),
          row0);
}

void compress_kv_args_check(const Tensor& kv, const Tensor& gate, const Weight& ape, const Tensor& state_kv,
                            const Tensor& state_gate, const CompressShape& s, int64_t pos0,
                            const Tensor& out) {
    check(s.ratio > 0 && s.head_dim > 0 && (s.series == 1 || s.series == 2) && pos0 >= 0,
          "compress_kv: ratio {}, head_dim {}, series {}", s.ratio, s.head_dim, s.series);
    const int64_t n = kv.rows(), width = int64_t{s.series} * s.head_dim, slots = int64_t{s.series} * s.ratio;
    check_shape(kv, n, width, "compress_kv kv");
    check_shape(gate, n, width, "compress_kv gate");
    check(ape.format() == Format::f32 && ape.rows() == s.ratio && ape.cols() == width,
          "compress_kv: position bias must be f32 [{}, {}]", s.ratio, width);
    check_shape(state_kv, slots, width, "compress_kv kv state");
    check_shape(state_gate, slots, width, "compress_kv gate state");
    check_shape(out, windows_closing(pos0, n, s.ratio), s.head_dim, "compress_kv out");
}

void compressed_attention_args_check(const Tensor& q, const Tensor& kv, const Tensor& ring,
                                     const Tensor& entries, const Tensor* selection, const Weight& sinks,
                                     const CompressedAttentionShape& s, int64_t pos0, const Tensor& out) {
    const int64_t n = q.rows(), hd = s.head_dim;
    check(s.n_heads > 0 && hd > 0 && s.window > 0 && s.ratio >= 0 && pos0 >= 0,
          "compressed_attention: {} heads of {}, window {}, ratio {}", s.n_heads, hd, s.window, s.ratio);
    check_shape(q, n, int64_t{s.n_heads} * hd, "compressed_attention q");
    check_shape(out, n, int64_t{s.n_heads} * hd, "compressed_attention out");
    check_shape(kv, n, hd, "compressed_attention kv");
    check(ring.cols() == hd && ring.rows() >= s.window - 1,
          "compressed_attention: ring [{}, {}] for a window of {} keys of {}", ring.rows(), ring.cols(),
          s.window, hd);
    if (s.ratio > 0) {
        check(entries.cols() == hd && entries.rows() >= (pos0 + n) / s.ratio,
              "compressed_attention: entries [{}, {}] hold fewer than the {} windows closed", entries.rows(),
              entries.cols(), (pos0 + n) / s.ratio);
    }
    check(selection == nullptr || (s.ratio > 0 && selection->rows() == n && selection->cols() > 0),
          "compressed_attention: a selection of {} rows for {} queries (ratio {})",
          selection ? selection->rows() : 0, n, s.ratio);
    check(sinks.format() == Format::f32 && sinks.rows() * sinks.cols() == s.n_heads,
          "compressed_attention: sinks must be f32 [1, {}]", s.n_heads);
}

void index_topk_args_check(const Tensor& q, const Tensor& weights, const Tensor& keys, const DsaShape& s,
                           int64_t pos0, const Tensor& out) {
    const int64_t n = q.rows();
    check(s.n_heads > 0 && s.head_dim > 0 && s.top_k > 0 && s.ratio > 0 && pos0 >= 0,
          "index_topk: {} heads of {}, top {}, ratio {}", s.n_heads, s.head_dim, s.top_k, s.ratio);
    check_shape(q, n, int64_t{s.n_heads} * s.head_dim, "index_topk q");
    check_shape(weights, n, s.n_heads, "index_topk weights");
    check(keys.cols() == s.head_dim && keys.rows() >= (pos0 + n) / s.ratio,
          "index_topk: keys [{}, {}] hold fewer than the {} windows closed", keys.rows(), keys.cols(),
          (pos0 + n) / s.ratio);
    check_shape(out, n, s.top_k, "index_topk out");
}

void hc_weights_args_check(const Tensor& mix, const Weight& base, const Weight& scale, const HcShape& s,
                           const Tensor& out) {
    const int64_t S = s.streams, full = (2 + S) * S;
    check(S > 0 && (mix.cols() == full || mix.cols() == S),
          "hc_weights: {} columns for {} streams ({} or {})", mix.cols(), S, full, S);
    const int64_t scales = mix.cols() == S ? 1 : 3;
    check(s.sinkhorn_iters >= 1 || mix.cols() == S, "hc_weights: {} Sinkhorn iterations", s.sinkhorn_iters);
    check(base.format() == Format::f32 && base.rows() * base.cols() == mix.cols(),
          "hc_weights: base must be f32 [1, {}]", mix.cols());
    check(scale.format() == Format::f32 && scale.rows() * scale.cols() == scales,
          "hc_weights: scale must be f32 [1, {}]", scales);
    check_shape(out, mix.rows(), mix.cols(), "hc_weights out");
}

void hc_collapse_args_check(const Tensor& x, const Tensor& weights, int streams, const Tensor& out) {
    check(streams > 0 && x.cols() % streams == 0, "hc_collapse: {} columns in {} streams", x.cols(), streams);
    check(weights.rows() == x.rows() && weights.cols() >= streams,
          "hc_collapse: weights [{}, {}] for {} streams", weights.rows(), weights.cols(), streams);
    check_shape(out, x.rows(), x.cols() / streams, "hc_collapse out");
}

void hc_expand_args_check(const Tensor& x, const Tensor& y, const Tensor& weights, int streams,
                          const Tensor& out) {
    check(streams > 0 && x.cols() % streams == 0, "hc_expand: {} columns in {} streams", x.cols(), streams);
    check_shape(y, x.rows(), x.cols() / streams, "hc_expand y");
    check_shape(weights, x.rows(), int64_t{2 + streams} * streams, "hc_expand weights");
    check_shape(out, x.rows(), x.cols(), "hc_expand out");
}

namespace {
[[noreturn]] void no_kernel(const Backend& b, OpKind op) {
    fail("{} has no kernel for {}: its supports() must decline it", b.name(), op_name(op));
}
}  // namespace

void Backend::copy_rows(Tensor&, const Tensor&, int64_t) {
    no_kernel(*this, OpKind::copy_rows);
}
void Backend::compress_kv(const Tensor&, const Tensor&, const Weight&, const Tensor&, const Tensor&,
                          const CompressShape&, int64_t, Tensor&) {
    no_kernel(*this, OpKind::compress_kv);
}
void Backend::compressed_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor*,
                                   const Weight&, const CompressedAttentionShape&, int64_t, Tensor&) {
    no_kernel(*this, OpKind::compressed_attention);
}
void Backend::index_topk(const Tensor&, const Tensor&, const Tensor&, const DsaShape&, int64_t, Tensor&) {
    no_kernel(*this, OpKind::index_topk);
}
void Backend::hc_weights(const Tensor&, const Weight&, const Weight&, const HcShape&, Tensor&) {
    no_kernel(*this, OpKind::hc_weights);
}
void Backend::hc_collapse(const Tensor&, const Tensor&, int, Tensor&) {
    no_kernel(*this, OpKind::hc_collapse);
}
void Backend::hc_expand(const Tensor&, const Tensor&, const Tensor&, int, Tensor&) {
    no_kernel(*this, OpKind::hc_expand);
}
void Backend::repeat_cols(const Tensor&, int, Tensor&) {
    no_kernel(*this, OpKind::repeat_cols);
}

}  // namespace coli
