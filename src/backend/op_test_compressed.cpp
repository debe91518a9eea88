// `coli test-ops` cases of the ops and op extensions that compressed-attention
// families add (DeepSeek-V4): ring writes, the KV compressor, sliding-window
// attention over raw keys and compressed entries, the indexer over compressed
// keys, hyper-connections, grouped matmul, rope's inverse and position stride,
// the sqrt-softplus and hash routers, and experts with the clamped SwiGLU.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "backend/op_grid.h"

namespace coli::op_grid {

namespace {

// An f32 host weight [rows, cols] holding v.
Weight weight_f32(std::vector<float> v, int64_t rows, int64_t cols) {
    auto owned = std::make_shared<std::vector<float>>(std::move(v));
    return Weight{WeightView{Format::f32, rows, cols, owned->data(), nullptr}, nullptr, owned};
}

void copy_rows_cases(CheckList& g) {
    uint32_t seed = 2000;
    // An append, a write that wraps the ring's end, and one longer than the ring
    // (only its last rows land).
    for (auto [ring, m, row0] : {std::tuple<int64_t, int64_t, int64_t>{16, 4, 3}, {5, 3, 4}, {5, 7, 2}}) {
        const int64_t c = 24;
        const std::vector<float> dst = random_normal(ring * c, ++seed), src = random_normal(m * c, ++seed);
        g.check_same(
            {.op = OpKind::copy_rows, .n = m, .width = c, .context = ring},
            fmt::format("{} rows into {} at {}", m, ring, row0), kOpTolExact,
            [&](Backend& b) {
                Tensor d = tensor_on(b, ring, c, dst);
                b.copy_rows(d, tensor_on(b, m, c, src), row0);
                return tensor_host(b, d);
            },
            kRefTolExact, [&] { return op_reference::copy_rows(dst, src, c, row0); });
    }
}

void compress_kv_cases(CheckList& g) {
    uint32_t seed = 2100;
    struct S {
        int series, ratio;
        int64_t pos0, n;
    };
    // Windows that start in the state (pos0 mid-window), several windows in one
    // call, series 2's window 0 (no previous window), a decode step that closes a
    // window whose slots are all but one in the state.
    const S cases[] = {{1, 4, 2, 7}, {1, 8, 5, 20}, {2, 4, 0, 8}, {2, 4, 6, 3}, {2, 4, 11, 1}, {2, 4, 3, 14}};
    const int64_t hd = 16;
    for (const S& s : cases) {
        const CompressShape shape{s.ratio, static_cast<int>(hd), s.series};
        const int64_t width = s.series * hd, slots = int64_t{s.series} * s.ratio;
        const Weight ape = weight_f32(random_normal(s.ratio * width, ++seed), s.ratio, width);
        const Weight ape_b = g.backend().weight_upload(ape);
        const std::vector<float> kv = random_normal(s.n * width, ++seed),
                                 gate = random_normal(s.n * width, ++seed, 2.0f),
                                 st_kv = random_normal(slots * width, ++seed),
                                 st_gate = random_normal(slots * width, ++seed, 2.0f);
        const int64_t windows = windows_closing(s.pos0, s.n, s.ratio);
        g.check_same(
            {.op = OpKind::compress_kv,
             .n = s.n,
             .weight = &ape_b,
             .width = width,
             .head_dim = hd,
             .ratio = s.ratio},
            fmt::format("series {} ratio {} pos={} n={} ({} windows)", s.series, s.ratio, s.pos0, s.n,
                        windows),
            kOpTolRowReduce,
            [&](Backend& b) {
                Tensor out = b.tensor_new_unfilled(windows, hd);
                b.compress_kv(tensor_on(b, s.n, width, kv), tensor_on(b, s.n, width, gate),
                              &b == &g.backend() ? ape_b : ape, tensor_on(b, slots, width, st_kv),
                              tensor_on(b, slots, width, st_gate), shape, s.pos0, out);
                return tensor_host(b, out);
            },
            kRefTolDot,
            [&] { return op_reference::compress_kv(kv, gate, ape.host, st_kv, st_gate, shape, s.pos0); });
    }
}

void compressed_attention_cases(CheckList& g) {
    uint32_t seed = 2200;
    struct S {
        int64_t n, pos0, ring;
        int window, ratio;
        int top_k;  // 0: every visible entry
    };
    // A prefill longer than the window and the ring, a continuation that reads
    // the ring (of window - 1 rows), a selection with -1 entries, a sliding-only
    // layer, decode steps.
    const S cases[] = {{20, 0, 8, 8, 4, 0}, {5, 13, 7, 8, 4, 0}, {3, 30, 8, 8, 4, 4},
                       {9, 4, 8, 8, 0, 0},  {1, 50, 8, 8, 4, 0}, {1, 61, 8, 8, 4, 3}};
    const int heads = 4, hd = 32;
    for (const S& s : cases) {
        const CompressedAttentionShape shape{heads, hd, s.window, s.ratio, 1.0f / std::sqrt(float{hd})};
        const int64_t qw = int64_t{heads} * hd, cap = s.ratio > 0 ? (s.pos0 + s.n) / s.ratio + 2 : 0;
        const std::vector<float> q = random_normal(s.n * qw, ++seed), kv = random_normal(s.n * hd, ++seed),
                                 ring = random_normal(s.ring * hd, ++seed),
                                 entries = random_normal(cap * hd, ++seed);
        const Weight sinks = weight_f32(random_normal(heads, ++seed), 1, heads);
        std::vector<float> selection;  // [n, top_k]: visible ids, every third one -1
        for (int64_t i = 0; i < s.n * s.top_k; ++i) {
            const int64_t visible = (s.pos0 + i / s.top_k + 1) / s.ratio;
            selection.push_back(i % 3 == 1 ? -1.0f : static_cast<float>((i * 5) % visible));
        }
        for (int64_t i = 0; i < s.n && s.top_k > 0; ++i) {  // distinct ids per row
            float* r = &selection[i * s.top_k];
            for (int j = 0; j < s.top_k; ++j)
                if (r[j] >= 0 && std::count(r, r + j, r[j]) > 0) r[j] = -1;
        }
        g.check_same(
            {.op = OpKind::compressed_attention,
             .n = s.n,
             .heads = heads,
             .head_dim = hd,
             .context = s.ring,
             .top_k = s.top_k,
             .ratio = s.ratio,
             .window = s.window},
            fmt::format("window {} ratio {} ring {} n={} pos={}{}", s.window, s.ratio, s.ring, s.n, s.pos0,
                        s.top_k > 0 ? fmt::format(" top_k={}", s.top_k) : ""),
            kOpTolDot,
            [&](Backend& b) {
                const Tensor e = cap > 0 ? tensor_on(b, cap, hd, entries) : Tensor{};
                const Tensor sel = s.top_k > 0 ? tensor_on(b, s.n, s.top_k, selection) : Tensor{};
                Tensor out = b.tensor_new_unfilled(s.n, qw);
                b.compressed_attention(tensor_on(b, s.n, qw, q), tensor_on(b, s.n, hd, kv),
                                       tensor_on(b, s.ring, hd, ring), e, s.top_k > 0 ? &sel : nullptr,
                                       b.weight_upload(sinks), shape, s.pos0, out);
                return tensor_host(b, out);
            },
            kRefTolDot,
            [&] {
                return op_reference::compressed_attention(q, kv, ring, entries, selection, sinks.host, shape,
                                                          s.pos0);
            });
    }
}

void index_topk_cases(CheckList& g) {
    uint32_t seed = 2300;
    // A prefill whose first queries see fewer entries than top_k (none at first),
    // and a later decode step.
    for (auto [n, pos0] : {std::pair<int64_t, int64_t>{12, 0}, {2, 40}}) {
        const DsaShape s{4, 32, 4, 1.0f / std::sqrt(32.0f), 0.5f, 4};
        const int64_t qw = int64_t{s.n_heads} * s.head_dim, cap = (pos0 + n) / s.ratio + 1;
        const std::vector<float> q = random_normal(n * qw, ++seed), w = random_normal(n * s.n_heads, ++seed),
                                 keys = random_normal(cap * s.head_dim, ++seed);
        g.check_same(
            {.op = OpKind::index_topk,
             .n = n,
             .heads = s.n_heads,
             .head_dim = s.head_dim,
             .context = cap,
             .top_k = s.top_k,
             .ratio = s.ratio},
            fmt::format("ratio {} top_k={} n={} pos={}", s.ratio, s.top_k, n, pos0), kOpTolExact,
            [&](Backend& b) {
                Tensor out = b.tensor_new_unfilled(n, s.top_k);
                b.index_topk(tensor_on(b, n, qw, q), tensor_on(b, n, s.n_heads, w),
                             tensor_on(b, cap, s.head_dim, keys), s, pos0, out);
                return tensor_host(b, out);
            },
            kRefTolExact,
            [&] {
                return op_reference::dsa_select(op_reference::index_scores(q, w, keys, s, pos0), s.top_k);
            });
    }
}

void hyper_connection_cases(CheckList& g) {
    uint32_t seed = 2400;
    const int streams = 4;
    const int64_t n = 3, d = 64, full = int64_t{2 + streams} * streams;
    const HcShape hc{streams, 20, 1e-6f};
    for (int64_t cols : {full, int64_t{streams}}) {  // a sublayer's weights; the head's (pre only)
        const int64_t scales = cols == streams ? 1 : 3;
        const std::vector<float> mix = random_normal(n * cols, ++seed, 2.0f);
        const Weight base = weight_f32(random_normal(cols, ++seed), 1, cols);
        const Weight scale = weight_f32(random_normal(scales, ++seed), 1, scales);
        g.check_same(
            {.op = OpKind::hc_weights, .n = n, .weight = &base, .width = cols, .streams = streams},
            fmt::format("S={} cols={} sinkhorn {}", streams, cols, hc.sinkhorn_iters), kOpTolRowReduce,
            [&](Backend& b) {
                Tensor out = b.tensor_new_unfilled(n, cols);
                b.hc_weights(tensor_on(b, n, cols, mix), b.weight_upload(base), b.weight_upload(scale), hc,
                             out);
                return tensor_host(b, out);
            },
            kRefTolDot, [&] { return op_reference::hc_weights(mix, cols, base.host, scale.host, hc); });
    }
    const std::vector<float> x = random_normal(n * streams * d, ++seed), y = random_normal(n * d, ++seed);
    std::vector<float> weights = random_normal(n * full, ++seed);
    for (float& v : weights) v = std::abs(v);  // positive, as hc_weights makes them
    g.check_same(
        {.op = OpKind::hc_collapse, .n = n, .width = streams * d, .streams = streams},
        fmt::format("S={} D={} n={}", streams, d, n), kOpTolRowReduce,
        [&](Backend& b) {
            Tensor out = b.tensor_new_unfilled(n, d);
            b.hc_collapse(tensor_on(b, n, streams * d, x), tensor_on(b, n, full, weights), streams, out);
            return tensor_host(b, out);
        },
        kRefTolF32, [&] { return op_reference::hc_collapse(x, weights, full, streams, d); });
    g.check_same(
        {.op = OpKind::hc_expand, .n = n, .width = streams * d, .streams = streams},
        fmt::format("S={} D={} n={}", streams, d, n), kOpTolRowReduce,
        [&](Backend& b) {
            Tensor out = b.tensor_new_unfilled(n, streams * d);
            b.hc_expand(tensor_on(b, n, streams * d, x), tensor_on(b, n, d, y),
                        tensor_on(b, n, full, weights), streams, out);
            return tensor_host(b, out);
        },
        kRefTolF32, [&] { return op_reference::hc_expand(x, y, weights, streams, d); });
    g.check_same(
        {.op = OpKind::repeat_cols, .n = n, .width = d, .streams = streams},
        fmt::format("[{}x{}] x{}", n, d, streams), kOpTolExact,
        [&](Backend& b) {
            Tensor out = b.tensor_new_unfilled(n, streams * d);
            b.repeat_cols(tensor_on(b, n, d, y), streams, out);
            return tensor_host(b, out);
        },
        kRefTolExact, [&] { return op_reference::repeat_cols(y, d, streams); });
}

void grouped_matmul_cases(CheckList& g) {
    uint32_t seed = 2500;
    struct S {
        int groups;
        int64_t rows, cols;  // of the weight: groups blocks of rows / groups rows
    };
    // 8 groups of 128 rows (whole fp8 scale blocks: views of the weight), 2
    // groups of 48 (fp8 decodes them).
    const S shapes[] = {{2, 96, 64}, {8, 1024, 128}};
    for (Format f : {Format::f32, Format::bf16, Format::fp8_e4m3_block, Format::mxfp4})
        for (const S& s : shapes) {
            if (!format_fits(f, s.cols)) continue;
            const Weight w = weight_random(f, s.rows, s.cols, ++seed);
            const Weight wb = g.backend().weight_upload(w);
            for (int64_t n : {1, 5, 17}) {  // decode GEMVs and a prefill GEMM
                const int64_t xw = s.groups * s.cols;
                const std::vector<float> x = random_normal(n * xw, ++seed);
                g.check_same(
                    {.op = OpKind::matmul,
                     .n = n,
                     .format = f,
                     .rows = s.rows,
                     .cols = s.cols,
                     .weight = &wb,
                     .groups = s.groups},
                    fmt::format("[{}x{}] groups={} n={}", s.rows, s.cols, s.groups, n), kOpTolDot,
                    [&](Backend& b) {
                        Tensor y = b.tensor_new_unfilled(n, s.rows);
                        b.matmul(&b == &g.backend() ? wb : w, tensor_on(b, n, xw, x), y);
                        return tensor_host(b, y);
                    },
                    kRefTolDot, [&] { return op_reference::matmul_grouped(w.host, x, s.groups); });
            }
        }
}

void rope_v4_cases(CheckList& g) {
    uint32_t seed = 2600;
    // The inverse rotation (V4's attention output), a position stride (compressed
    // entries at w ratio), both.
    for (auto [inverse, stride, pos0] :
         {std::tuple<bool, int, int64_t>{true, 1, 7}, {false, 4, 3}, {true, 128, 2}}) {
        const int head_dim = 96, rotary = 64, offset = 32,
                  heads = 2;  // rope on the last dims, as V4
        const int64_t n = 4, cols = int64_t{head_dim} * heads;
        const std::vector<float> x = random_normal(n * cols, ++seed);
        RopeParams p{RopeStyle::interleaved, head_dim, rotary, 10000.0f, 1.0f, offset, {}};
        p.inverse = inverse;
        p.position_stride = stride;
        g.check_same(
            {.op = OpKind::rope, .n = n, .width = cols, .head_dim = head_dim},
            fmt::format("interleaved hd={} rot={}+{}{} stride {} n={} pos={}", head_dim, offset, rotary,
                        inverse ? " inverse" : "", stride, n, pos0),
            kOpTolRowReduce,
            [&](Backend& b) {
                Tensor t = tensor_on(b, n, cols, x);
                b.rope(t, p, pos0);
                return tensor_host(b, t);
            },
            kRefTolF32, [&] { return op_reference::rope(x, cols, p, pos0); });
    }
}

void v4_route_cases(CheckList& g) {
    uint32_t seed = 2700;
    const int64_t experts = 64;
    const int k = 6;
    SigmoidRouting p{k, 1, 1, true, 1.5f};
    p.score = RouterScore::sqrt_softplus;
    for (int form = 0; form < 3; ++form) {  // biased top-k; no bias; fixed experts (hash routing)
        const int64_t n = 4;
        const std::vector<float> logits = random_normal(n * experts, ++seed, 2.0f);
        const Weight bias =
            form == 0 ? weight_f32(random_normal(experts, ++seed, 0.1f), 1, experts) : Weight{};
        std::vector<int32_t> fixed;
        for (int64_t i = 0; form == 2 && i < n * k; ++i)
            fixed.push_back(static_cast<int32_t>((i * 7 + i / k * 3) % experts));
        g.check_same(
            {.op = OpKind::route_sigmoid_topk, .n = n, .experts = experts, .top_k = k},
            fmt::format("sqrt_softplus n={} E={} k={}{}", n, experts, k,
                        form == 0   ? " biased"
                        : form == 1 ? " no bias"
                                    : " fixed"),
            kOpTolRowReduce,
            [&](Backend& b) {
                return routing_floats(b.route_sigmoid_topk(tensor_on(b, n, experts, logits), bias, p, fixed));
            },
            kRefTolF32,
            [&] {
                return routing_floats(op_reference::route_sigmoid_topk(logits, experts, bias.host, p, fixed));
            });
    }
}

void clamped_expert_cases(CheckList& g) {
    // A limit well inside the projections' spread (about 12 here): many gates and ups are clamped.
    const GluActivation clamped{GluKind::silu_clamp, 4.0f, 0.0f};
    glu_expert_cases(g, clamped, fmt::format("clamped SwiGLU limit {}", clamped.beta), 2800, 200);
}

}  // namespace

void compressed_cases(CheckList& g) {
    copy_rows_cases(g);
    compress_kv_cases(g);
    compressed_attention_cases(g);
    index_topk_cases(g);
    hyper_connection_cases(g);
    grouped_matmul_cases(g);
    rope_v4_cases(g);
    v4_route_cases(g);
    clamped_expert_cases(g);
}

}  // namespace coli::op_grid
