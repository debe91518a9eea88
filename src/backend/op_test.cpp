#include "backend/op_test.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "backend/op_grid.h"
#include "core/error.h"
#include "core/random.h"

namespace coli {

namespace {

using namespace op_grid;

class Grid : public CheckList {
public:
    using CheckList::CheckList;

    void matmul_cases() {
        struct S {
            int64_t rows, cols;
            int64_t max_tokens;  // largest token count of `tokens` to run
        };
        // Whole 16-byte chunks, odd row counts, and columns that are not whole chunks (scalar kernels); a
        // tall matrix for decode only (GEMV kernels that give each warp more rows when rows are many).
        const S shapes[] = {{64, 256, 130}, {37, 96, 130}, {300, 200, 130}, {256, 1024, 130}, {9000, 256, 8}};
        const int64_t tokens[] = {1, 3, 8, 17, 130};  // GEMV, GEMV groups, cuBLAS, dequantized GEMM
        uint32_t seed = 100;
        for (Format f : kAllFormats)
            for (const S& s : shapes) {
                if (!format_fits(f, s.cols)) continue;
                const Weight w = weight_random(f, s.rows, s.cols, ++seed);
                const Weight wb = b_.weight_upload(w);
                for (int64_t n : tokens) {
                    if (n > s.max_tokens) continue;
                    const std::vector<float> x = random_normal(n * s.cols, ++seed);
                    std::vector<float> want(n * s.rows);
                    matmul_ref(w.host, x.data(), n, want.data());
                    check_case(
                        {.op = OpKind::matmul,
                         .n = n,
                         .format = f,
                         .rows = s.rows,
                         .cols = s.cols,
                         .weight = &wb},
                        fmt::format("[{}x{}] n={}", s.rows, s.cols, n), naive() ? kRefTolExact : kOpTolDot,
                        [&](Backend& b) {
                            Tensor y = b.tensor_new_unfilled(n, s.rows);
                            b.matmul(wb, tensor_on(b, n, s.cols, x), y);
                            return tensor_host(b, y);
                        },
                        want);
                }
            }
    }

    void embedding_cases() {
        uint32_t seed = 200;
        for (Format f : kAllFormats)
            for (int64_t cols : {256, 96}) {
                if (!format_fits(f, cols)) continue;
                const int64_t vocab = 50;
                const Weight w = weight_random(f, vocab, cols, ++seed);
                const Weight wb = b_.weight_upload(w);
                for (const std::vector<int32_t>& ids :
                     {std::vector<int32_t>{7}, std::vector<int32_t>{0, 49, 3, 3, 12}}) {
                    const auto n = static_cast<int64_t>(ids.size());
                    auto run = [&](Backend& b) {
                        Tensor out = b.tensor_new_unfilled(n, cols);
                        b.embedding(&b == &b_ ? wb : w, ids, out);
                        return tensor_host(b, out);
                    };
                    check_same({.op = OpKind::embedding,
                                .n = n,
                                .format = f,
                                .rows = vocab,
                                .cols = cols,
                                .weight = &wb},
                               fmt::format("[{}x{}] n={}", vocab, cols, n), kOpTolExact, run, kRefTolExact,
                               [&] { return op_reference::embedding(w.host, ids); });
                }
            }
    }

    void rms_norm_cases() {
        uint32_t seed = 300;
        for (auto [n, d] : {std::pair<int64_t, int64_t>{1, 256}, {7, 2048}, {5, 100}}) {
            const std::vector<float> g = random_normal(d, ++seed);
            auto gw = std::make_shared<std::vector<float>>(g);
            const Weight w{WeightView{Format::f32, 1, d, gw->data(), nullptr}, nullptr, gw};
            const Weight wb = b_.weight_upload(w);
            const std::vector<float> x = random_normal(n * d, ++seed, 3.0f);
            auto run = [&](Backend& b) {
                Tensor out = b.tensor_new_unfilled(n, d);
                b.rms_norm(tensor_on(b, n, d, x), &b == &b_ ? wb : w, 1e-5f, out);
                return tensor_host(b, out);
            };
            check_same({.op = OpKind::rms_norm, .n = n, .weight = &wb, .width = d},
                       fmt::format("[{}x{}]", n, d), kOpTolRowReduce, run, kRefTolF32,
                       [&] { return op_reference::rms_norm(x, d, w.host, 1e-5f); });
        }
    }

    void elementwise_cases() {
        uint32_t seed = 400;
        for (auto [n, d] : {std::pair<int64_t, int64_t>{1, 64}, {9, 1000}}) {
            const std::vector<float> a = random_normal(n * d, ++seed), c = random_normal(n * d, ++seed);
            check_same(
                {.op = OpKind::add, .n = n, .width = d}, fmt::format("[{}x{}]", n, d), kOpTolExact,
                [&](Backend& b) {
                    Tensor out = b.tensor_new_unfilled(n, d);
                    b.add(tensor_on(b, n, d, a), tensor_on(b, n, d, c), out);
                    return tensor_host(b, out);
                },
                kRefTolExact, [&] { return op_reference::add(a, c); });
            check_same(
                {.op = OpKind::clamp, .n = n, .width = d}, fmt::format("[{}x{}]", n, d), kOpTolExact,
                [&](Backend& b) {
                    Tensor t = tensor_on(b, n, d, a);
                    b.clamp(t, -0.5f, 0.75f);
                    return tensor_host(b, t);
                },
                kRefTolExact, [&] { return op_reference::clamp(a, -0.5f, 0.75f); });
        }
    }

    void rope_cases() {
        uint32_t seed = 500;
        struct S {
            RopeStyle style;
            int head_dim, rotary_dim, heads;
            int64_t n, pos0;
            float scaling;
            int offset;
            RopeYarn yarn;
        };
        const RopeYarn yarn{40.0f, 4096.0f, 32.0f, 1.0f};  // DeepSeek-V3's
        const S cases[] = {{RopeStyle::neox, 64, 64, 4, 1, 5, 1.0f, 0, {}},
                           {RopeStyle::neox, 128, 64, 2, 6, 0, 1.0f, 0, {}},
                           {RopeStyle::interleaved, 64, 64, 3, 4, 1000, 0.8f, 0, {}},
                           {RopeStyle::interleaved, 72, 32, 2, 1, 70000, 1.0f, 0, {}},
                           {RopeStyle::interleaved, 192, 64, 4, 3, 9000, 1.0f, 128, yarn},  // MLA q
                           {RopeStyle::neox, 64, 64, 1, 5, 100000, 1.2f, 0, yarn}};
        for (const S& s : cases) {
            const int64_t cols = int64_t{s.head_dim} * s.heads;
            const std::vector<float> x = random_normal(s.n * cols, ++seed);
            const RopeParams p{s.style, s.head_dim, s.rotary_dim, 10000.0f, s.scaling, s.offset, s.yarn};
            check_same(
                {.op = OpKind::rope, .n = s.n, .width = cols, .head_dim = s.head_dim},
                fmt::format("{} hd={} rot={}+{}{} n={} pos={}",
                            s.style == RopeStyle::neox ? "neox" : "interleaved", s.head_dim, s.offset,
                            s.rotary_dim, s.yarn.factor > 0 ? " yarn" : "", s.n, s.pos0),
                kOpTolRowReduce,
                [&](Backend& b) {
                    Tensor t = tensor_on(b, s.n, cols, x);
                    b.rope(t, p, s.pos0);
                    return tensor_host(b, t);
                },
                kRefTolF32, [&] { return op_reference::rope(x, cols, p, s.pos0); });
        }
    }

    void attention_cases() {
        uint32_t seed = 600;
        struct S {
            int heads, kv_heads, head_dim;
            int64_t n, pos0, ctx;
        };
        // MHA, GQA, MQA; decode (n = 1 after a prefix) and prefill; an odd head_dim; a long context; keys
        // split into parts (the Vulkan tiles' sums), and into splits whose last one is partial, for MHA
        // decode as OLMoE's and for queries whose causal ends lie in different splits (64 keys each there).
        const S cases[] = {
            {4, 4, 64, 1, 10, 32},        {8, 2, 128, 7, 0, 16},     {6, 1, 72, 5, 3, 64},
            {8, 2, 64, 1, 200, 256},      {4, 2, 32, 40, 0, 40},     {16, 2, 64, 2, 600, 640},
            {16, 16, 128, 1, 3000, 3001}, {4, 4, 64, 3, 2495, 2498}, {2, 2, 32, 20, 1080, 1100}};
        for (const S& s : cases) {
            const int64_t qw = int64_t{s.heads} * s.head_dim, kvw = int64_t{s.kv_heads} * s.head_dim;
            const std::vector<float> q = random_normal(s.n * qw, ++seed),
                                     k = random_normal(s.n * kvw, ++seed),
                                     v = random_normal(s.n * kvw, ++seed),
                                     kc = random_normal(s.ctx * kvw, ++seed),
                                     vc = random_normal(s.ctx * kvw, ++seed);
            const AttentionShape shape{s.heads, s.kv_heads, s.head_dim, 1.0f / std::sqrt(float(s.head_dim))};
            check_same(
                {.op = OpKind::attention,
                 .n = s.n,
                 .heads = s.heads,
                 .kv_heads = s.kv_heads,
                 .head_dim = s.head_dim,
                 .context = s.ctx},
                fmt::format("H={} Hkv={} hd={} n={} pos={}", s.heads, s.kv_heads, s.head_dim, s.n, s.pos0),
                kOpTolDot,
                [&](Backend& b) {
                    KvCache cache{tensor_on(b, s.ctx, kvw, kc), tensor_on(b, s.ctx, kvw, vc)};
                    Tensor out = b.tensor_new_unfilled(s.n, qw);
                    b.attention(tensor_on(b, s.n, qw, q), tensor_on(b, s.n, kvw, k),
                                tensor_on(b, s.n, kvw, v), cache, shape, s.pos0, out);
                    std::vector<float> all = tensor_host(b, out);  // and the cache rows it wrote
                    for (const Tensor* t : {&cache.k, &cache.v}) {
                        const std::vector<float> c = tensor_host(b, *t);
                        all.insert(all.end(), c.begin(), c.end());
                    }
                    return all;
                },
                kRefTolDot,
                [&] {
                    std::vector<float> kc2 = kc, vc2 = vc;
                    std::vector<float> all = op_reference::attention(q, k, v, kc2, vc2, shape, s.pos0);
                    all.insert(all.end(), kc2.begin(), kc2.end());
                    all.insert(all.end(), vc2.begin(), vc2.end());
                    return all;
                });
        }
    }

    void route_cases() {
        uint32_t seed = 700;
        struct S {
            int64_t n, experts;
            int k;
            bool renormalize;
        };
        const S cases[] = {{1, 64, 8, false}, {5, 64, 8, true}, {3, 60, 4, true}, {2, 384, 8, false}};
        for (const S& s : cases) {
            const std::vector<float> logits = random_normal(s.n * s.experts, ++seed, 2.0f);
            check_same(
                {.op = OpKind::route_softmax_topk, .n = s.n, .experts = s.experts, .top_k = s.k},
                fmt::format("n={} E={} k={}{}", s.n, s.experts, s.k, s.renormalize ? " renorm" : ""),
                kOpTolRowReduce,
                [&](Backend& b) {
                    return routing_floats(
                        b.route_softmax_topk(tensor_on(b, s.n, s.experts, logits), s.k, s.renormalize));
                },
                kRefTolF32,
                [&] {
                    return routing_floats(
                        op_reference::route_softmax_topk(logits, s.experts, s.k, s.renormalize));
                });
        }
    }

    void moe_cases() {
        uint32_t seed = 800;
        const int64_t d_model = 128, d_ff = 64;
        const int n_experts = 8, k = 2;
        // Many slots: every token's top-16 of 128 experts, each expert 3 tokens apart; more (token, k) slots
        // than one CUDA combine launch carries (kCudaCombineMaxSlots).
        const int wide_experts = 128, wide_k = 16;
        const int64_t wide_tokens = 24;
        for (Format f : kAllFormats) {
            // (layer, id) names an expert for device tiers: one layer per format, as a model's layers would
            // be.
            const auto layer = static_cast<int32_t>(f);
            const auto experts_make = [&](int count, int32_t l) {
                std::vector<ExpertWeights> experts;
                for (int e = 0; e < count; ++e)
                    experts.push_back({e,
                                       weight_random(f, d_ff, d_model, ++seed),
                                       weight_random(f, d_ff, d_model, ++seed),
                                       weight_random(f, d_model, d_ff, ++seed),
                                       l,
                                       {}});
                return experts;
            };
            const auto moe_case = [&](const std::vector<ExpertWeights>& experts, const Routing& r) {
                const int64_t n = r.n_tokens;
                const std::vector<float> x = random_normal(n * d_model, ++seed),
                                         y0 = random_normal(n * d_model, ++seed);
                const Weight& g = experts.front().gate;
                check_same(
                    {.op = OpKind::moe_experts,
                     .n = n,
                     .format = f,
                     .rows = g.rows(),
                     .cols = g.cols(),
                     .weight = &g},
                    fmt::format("E={} k={} d={} ff={} n={}", experts.size(), r.k, d_model, d_ff, n),
                    kOpTolDot,
                    [&](Backend& b) {
                        Tensor y = tensor_on(b, n, d_model, y0);
                        b.moe_experts(experts, r, tensor_on(b, n, d_model, x), y);
                        return tensor_host(b, y);
                    },
                    kRefTolDot, [&] { return op_reference::moe_experts(experts, r, x, y0); });
            };
            const std::vector<ExpertWeights> experts = experts_make(n_experts, layer);
            for (int64_t n : {1, 5, 40}) {
                const std::vector<float> logits = random_normal(n * n_experts, ++seed, 2.0f);
                moe_case(experts, ref_.route_softmax_topk(tensor_on(ref_, n, n_experts, logits), k, true));
            }
            Routing wide{wide_tokens, wide_k, {}, random_normal(wide_tokens * wide_k, ++seed)};
            for (int64_t t = 0; t < wide_tokens; ++t)
                for (int j = 0; j < wide_k; ++j)
                    wide.experts.push_back(static_cast<int32_t>((t * wide_k + j) % wide_experts));
            const auto wide_layer =
                layer + static_cast<int32_t>(std::size(kAllFormats));  // a layer of its own
            moe_case(experts_make(wide_experts, wide_layer), wide);
        }
    }

    void slice_cases() {
        uint32_t seed = 900;
        for (auto [n, cols, c0, width] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 576, 512, 64},
                                          {7, 96, 13, 40},
                                          {3, 64, 0, 64}}) {
            const std::vector<float> x = random_normal(n * cols, ++seed);
            check_same(
                {.op = OpKind::slice_cols, .n = n, .width = cols},
                fmt::format("[{}x{}] cols {}..{}", n, cols, c0, c0 + width), kOpTolExact,
                [&](Backend& b) {
                    Tensor out = b.tensor_new_unfilled(n, width);
                    b.slice_cols(tensor_on(b, n, cols, x), c0, out);
                    return tensor_host(b, out);
                },
                kRefTolExact, [&] { return op_reference::slice_cols(x, cols, c0, width); });
        }
    }

    void sigmoid_route_cases() {
        uint32_t seed = 1000;
        struct S {
            int64_t n, experts;
            SigmoidRouting p;
        };
        const S cases[] = {{1, 256, {8, 8, 4, true, 2.5f}},  // DeepSeek-V3
                           {5, 16, {4, 4, 2, true, 2.5f}},
                           {3, 384, {8, 1, 1, true, 2.827f}},  // Kimi K2
                           {2, 64, {6, 1, 1, false, 1.0f}}};
        for (const S& s : cases) {
            const std::vector<float> logits = random_normal(s.n * s.experts, ++seed, 2.0f);
            auto bias_values = std::make_shared<std::vector<float>>(random_normal(s.experts, ++seed, 0.1f));
            const Weight bias{WeightView{Format::f32, 1, s.experts, bias_values->data(), nullptr}, nullptr,
                              bias_values};
            check_same(
                {.op = OpKind::route_sigmoid_topk, .n = s.n, .experts = s.experts, .top_k = s.p.k},
                fmt::format("n={} E={} k={} groups {}/{}", s.n, s.experts, s.p.k, s.p.topk_group,
                            s.p.n_group),
                kOpTolRowReduce,
                [&](Backend& b) {
                    return routing_floats(
                        b.route_sigmoid_topk(tensor_on(b, s.n, s.experts, logits), bias, s.p, {}));
                },
                kRefTolF32,
                [&] {
                    return routing_floats(
                        op_reference::route_sigmoid_topk(logits, s.experts, bias.host, s.p));
                });
        }
    }

    void mla_cases() {
        uint32_t seed = 1100;
        struct S {
            MlaShape shape;
            int64_t n, pos0, ctx;
        };
        // Decode after a prefix and prefill, at small sizes with DeepSeek's proportions; a long context.
        const S cases[] = {{{4, 32, 16, 24, 32, 0.15f}, 1, 9, 16},
                           {{4, 32, 16, 24, 32, 0.15f}, 6, 0, 8},
                           {{2, 64, 32, 64, 128, 0.1f}, 3, 40, 64},
                           {{2, 32, 16, 24, 64, 0.1f}, 2, 1100, 1200},  // keys in several tiles
                           {{80, 32, 16, 24, 96, 0.1f}, 2, 70, 80}};    // heads and latent in partial tiles
        for (Format f : {Format::f32, Format::bf16, Format::fp8_e4m3_block}) {
            for (const S& s : cases) {
                const MlaShape& m = s.shape;
                const int64_t qw = int64_t{m.n_heads} * (m.nope_dim + m.rope_dim);
                if (!format_fits(f, m.kv_lora)) continue;
                const Weight w =
                    weight_random(f, int64_t{m.n_heads} * (m.nope_dim + m.v_dim), m.kv_lora, ++seed);
                const Weight wb = b_.weight_upload(w);
                const std::vector<float> q = random_normal(s.n * qw, ++seed),
                                         latent = random_normal(s.n * m.kv_lora, ++seed),
                                         k_pe = random_normal(s.n * m.rope_dim, ++seed),
                                         lc = random_normal(s.ctx * m.kv_lora, ++seed),
                                         kc = random_normal(s.ctx * m.rope_dim, ++seed);
                // DSA-style selection: every third visible key, the row padded with -1.
                constexpr int kPicked = 6;
                std::vector<float> picks(s.n * kPicked, -1.0f);
                for (int64_t i = 0; i < s.n; ++i)
                    for (int j = 0; j < kPicked && 3 * j <= s.pos0 + i; ++j)
                        picks[i * kPicked + j] = 3.0f * j;
                for (bool sparse : {false, true})
                    check_same(
                        {.op = OpKind::mla_attention,
                         .n = s.n,
                         .format = f,
                         .weight = &wb,
                         .heads = m.n_heads,
                         .head_dim = m.nope_dim + m.rope_dim,
                         .latent = m.kv_lora,
                         .context = s.ctx,
                         .top_k = sparse ? kPicked : 0},
                        fmt::format("H={} nope={} rope={} v={} lora={} n={} pos={}{}", m.n_heads, m.nope_dim,
                                    m.rope_dim, m.v_dim, m.kv_lora, s.n, s.pos0, sparse ? " selected" : ""),
                        kOpTolDot,
                        [&](Backend& b) {
                            const Tensor sel = tensor_on(b, s.n, kPicked, picks);
                            KvCache cache{tensor_on(b, s.ctx, m.kv_lora, lc),
                                          tensor_on(b, s.ctx, m.rope_dim, kc)};
                            Tensor out = b.tensor_new_unfilled(s.n, int64_t{m.n_heads} * m.v_dim);
                            b.mla_attention(tensor_on(b, s.n, qw, q), tensor_on(b, s.n, m.kv_lora, latent),
                                            tensor_on(b, s.n, m.rope_dim, k_pe), &b == &b_ ? wb : w, cache, m,
                                            s.pos0, sparse ? &sel : nullptr, out);
                            std::vector<float> all = tensor_host(b, out);  // and the cache rows it wrote
                            for (const Tensor* t : {&cache.k, &cache.v}) {
                                const std::vector<float> c = tensor_host(b, *t);
                                all.insert(all.end(), c.begin(), c.end());
                            }
                            return all;
                        },
                        kRefTolDot,
                        [&] {
                            std::vector<float> lc2 = lc, kc2 = kc;
                            std::vector<float> all = op_reference::mla_attention(
                                q, latent, k_pe, w.host, lc2, kc2, m, s.pos0,
                                sparse ? std::span<const float>(picks) : std::span<const float>());
                            all.insert(all.end(), lc2.begin(), lc2.end());
                            all.insert(all.end(), kc2.begin(), kc2.end());
                            return all;
                        });
            }
        }
    }

    void layer_norm_cases() {
        uint32_t seed = 1200;
        for (auto [n, d] : {std::pair<int64_t, int64_t>{1, 128}, {6, 100}}) {
            auto gb = std::make_shared<std::vector<float>>(random_normal(2 * d, ++seed));
            const Weight w{WeightView{Format::f32, 1, d, gb->data(), nullptr}, nullptr, gb};
            const Weight bias{WeightView{Format::f32, 1, d, gb->data() + d, nullptr}, nullptr, gb};
            const Weight wb = b_.weight_upload(w), bb = b_.weight_upload(bias);
            const std::vector<float> x = random_normal(n * d, ++seed, 3.0f);
            check_same(
                {.op = OpKind::layer_norm, .n = n, .weight = &wb, .width = d}, fmt::format("[{}x{}]", n, d),
                kOpTolRowReduce,
                [&](Backend& b) {
                    Tensor out = b.tensor_new_unfilled(n, d);
                    b.layer_norm(tensor_on(b, n, d, x), &b == &b_ ? wb : w, &b == &b_ ? bb : bias, 1e-6f,
                                 out);
                    return tensor_host(b, out);
                },
                kRefTolF32, [&] { return op_reference::layer_norm(x, d, w.host, bias.host, 1e-6f); });
        }
    }

    void dsa_cases() {
        uint32_t seed = 1300;
        // How the scores come out: random, all equal (a zero query: every score is 0), or equal in groups
        // (the cache's keys repeat every kKeyPeriod rows): ties go to the lower positions.
        enum class Scores { random, all_equal, groups };
        constexpr int64_t kKeyPeriod = 5;
        constexpr float kNoKeyScore = 1e3f;  // far from every index score here, which are of order 1
        struct S {
            DsaShape shape;
            int64_t n, pos0, ctx;
            Scores scores;
        };
        // Fewer visible keys than top_k (padded), decode after a prefix, prefill; rows longer than a
        // selection workgroup and top_k beyond it, with and without ties; DeepSeek's and GLM's top_k.
        const S cases[] = {{{4, 32, 8, 0.17f, 0.5f}, 3, 0, 8, Scores::random},
                           {{4, 32, 8, 0.17f, 0.5f}, 1, 40, 64, Scores::random},
                           {{2, 64, 16, 0.125f, 0.7f}, 12, 20, 40, Scores::random},
                           {{2, 16, 300, 0.2f, 0.5f}, 2, 600, 602, Scores::random},
                           {{2, 16, 300, 0.2f, 0.5f}, 1, 500, 501, Scores::all_equal},
                           {{2, 16, 300, 0.2f, 0.5f}, 3, 397, 400, Scores::groups},
                           {{2, 16, 2048, 0.2f, 0.5f}, 1, 2500, 2501, Scores::random},
                           {{40, 24, 8, 0.2f, 0.5f}, 2, 70, 72, Scores::random}};  // a head_dim with a tail
        for (const S& s : cases) {
            const DsaShape& m = s.shape;
            const int64_t qw = int64_t{m.n_heads} * m.head_dim;
            std::vector<float> q = random_normal(s.n * qw, ++seed);
            const std::vector<float> w = random_normal(s.n * m.n_heads, ++seed),
                                     k = random_normal(s.n * m.head_dim, ++seed);
            std::vector<float> kc = random_normal(s.ctx * m.head_dim, ++seed);
            if (s.scores == Scores::all_equal) std::fill(q.begin(), q.end(), 0.0f);
            if (s.scores == Scores::groups)
                for (int64_t r = kKeyPeriod; r < s.ctx; ++r)
                    std::copy_n(kc.begin() + (r % kKeyPeriod) * m.head_dim, m.head_dim,
                                kc.begin() + r * m.head_dim);
            const Run run = [&](Backend& b) {
                Tensor cache = tensor_on(b, s.ctx, m.head_dim, kc);
                Tensor out = b.tensor_new_unfilled(s.n, m.top_k);
                b.dsa_select(tensor_on(b, s.n, qw, q), tensor_on(b, s.n, m.n_heads, w),
                             tensor_on(b, s.n, m.head_dim, k), cache, m, s.pos0, out);
                std::vector<float> all = tensor_host(b, out);  // and the key rows it wrote
                const std::vector<float> c = tensor_host(b, cache);
                all.insert(all.end(), c.begin(), c.end());
                return all;
            };
            // The naive scores are exact and the CPU's f32, so keys whose scores differ by less than f32
            // rounding may come in another order: against the naive reference each selected position stands
            // for its exact score (kNoKeyScore for none), which a wrong choice moves.
            std::vector<float> naive_cache = kc;
            const std::vector<std::vector<double>> scores =
                op_reference::dsa_scores(q, w, k, naive_cache, m, s.pos0);
            const auto by_score = [&](std::vector<float> all) {
                for (int64_t i = 0; i < s.n; ++i)
                    for (int j = 0; j < m.top_k; ++j) {
                        float& p = all[i * m.top_k + j];
                        p = p < 0 ? kNoKeyScore : static_cast<float>(scores[i].at(static_cast<size_t>(p)));
                    }
                return all;
            };
            check_same(
                {.op = OpKind::dsa_select,
                 .n = s.n,
                 .heads = m.n_heads,
                 .head_dim = m.head_dim,
                 .context = s.ctx,
                 .top_k = m.top_k},
                fmt::format("H={} d={} top={} n={} pos={}{}", m.n_heads, m.head_dim, m.top_k, s.n, s.pos0,
                            s.scores == Scores::all_equal ? " all equal"
                            : s.scores == Scores::groups  ? " ties"
                                                          : ""),
                kOpTolExact, naive() ? Run([&](Backend& b) { return by_score(run(b)); }) : run, kRefTolDot,
                [&] {
                    std::vector<float> all = op_reference::dsa_select(scores, m.top_k);
                    all.insert(all.end(), naive_cache.begin(), naive_cache.end());
                    return by_score(all);
                });
        }
    }
};

}  // namespace

std::vector<OpCheck> op_test_backend(Backend& b, Backend& reference) {
    Grid g(b, reference);
    g.embedding_cases();
    g.rms_norm_cases();
    g.matmul_cases();
    g.elementwise_cases();
    g.rope_cases();
    g.attention_cases();
    g.route_cases();
    g.moe_cases();
    g.slice_cases();
    g.sigmoid_route_cases();
    g.mla_cases();
    g.layer_norm_cases();
    g.dsa_cases();
    recurrent_cases(g);
    compressed_cases(g);
    return g.take();
}

std::string op_test_matrix(const std::vector<OpTestColumn>& columns) {
    // Row key (op, format) in contract order; cell: "ok 12/12 (max err 3e-07 <= 2e-05)".
    struct Cell {
        int pass = 0, fail = 0, fallback = 0;
        double max_error = 0, tolerance = 0;
    };
    std::map<std::pair<int, int>, std::map<size_t, Cell>> rows;
    for (size_t c = 0; c < columns.size(); ++c)
        for (const OpCheck& k : columns[c].checks) {
            Cell& cell = rows[{static_cast<int>(k.op), static_cast<int>(k.format)}][c];
            if (k.status == OpCheckStatus::pass) ++cell.pass;
            if (k.status == OpCheckStatus::fail) ++cell.fail;
            if (k.status == OpCheckStatus::fallback) ++cell.fallback;
            if (k.status != OpCheckStatus::fallback && !(k.error <= cell.max_error)) cell.max_error = k.error;
            cell.tolerance = k.tolerance;
        }
    constexpr int kOpWidth = 20, kFormatWidth = 16, kCellWidth = 40;
    std::string out = fmt::format("{:<{}} {:<{}}", "op", kOpWidth, "format", kFormatWidth);
    for (const auto& col : columns) out += fmt::format(" {:<{}}", col.backend, kCellWidth);
    out += "\n";
    for (const auto& [key, cells] : rows) {
        out += fmt::format("{:<{}} {:<{}}", op_name(static_cast<OpKind>(key.first)), kOpWidth,
                           format_name(static_cast<Format>(key.second)), kFormatWidth);
        for (size_t c = 0; c < columns.size(); ++c) {
            std::string text;
            if (!columns[c].skipped.empty()) {
                text = "SKIPPED";
            } else if (auto it = cells.find(c); it != cells.end()) {
                const Cell& k = it->second;
                const int total = k.pass + k.fail + k.fallback;
                if (k.fail > 0)
                    text = fmt::format("FAIL {}/{} (err {:.1e} > {:.0e})", k.fail, total, k.max_error,
                                       k.tolerance);
                else if (k.fallback == total)
                    text = "fallback (declined)";
                else
                    text = fmt::format("ok {}/{}{} (err {:.1e} <= {:.0e})", k.pass, total,
                                       k.fallback ? fmt::format(" +{} fallback", k.fallback) : "",
                                       k.max_error, k.tolerance);
            } else {
                text = "-";
            }
            out += fmt::format(" {:<{}}", text, kCellWidth);
        }
        out += "\n";
    }
    for (const auto& col : columns) {
        if (!col.skipped.empty()) out += fmt::format("SKIPPED {}: {}\n", col.backend, col.skipped);
        for (const OpCheck& k : col.checks)
            if (k.status == OpCheckStatus::fail)
                out += fmt::format("FAIL {} {} {} {}: error {:.3e} > {:.1e}{}\n", col.backend, op_name(k.op),
                                   format_name(k.format), k.shape, k.error, k.tolerance,
                                   k.note.empty() ? "" : " (" + k.note + ")");
    }
    return out;
}

}  // namespace coli
