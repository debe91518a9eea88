#include "nn/mla.h"

namespace coli {
namespace {

// The q_a and kv_a RMSNorms' epsilon: transformers builds them with the class default in every MLA family,
// not with config.rms_norm_eps.
constexpr float kMlaNormEps = 1e-6f;

}  // namespace

MlaWeights mla_load(WeightLoader& load, const std::string& prefix, const Mla& m, int64_t d_model) {
    const MlaShape& s = m.shape;
    const int64_t heads = s.n_heads, q_width = heads * (s.nope_dim + s.rope_dim), v_width = heads * s.v_dim;
    const std::string q_keys = "num_attention_heads, qk_nope_head_dim, qk_rope_head_dim";
    MlaWeights w;
    if (m.q_lora > 0) {
        w.q_a = load.matrix(prefix + "q_a_proj.weight", {{m.q_lora, d_model}, "q_lora_rank and hidden_size"});
        w.q_a_norm = load.vector(prefix + "q_a_layernorm.weight", {{m.q_lora}, "q_lora_rank"});
        w.q_b = load.matrix(prefix + "q_b_proj.weight", {{q_width, m.q_lora}, q_keys + " and q_lora_rank"});
    } else {
        w.q_b = load.matrix(prefix + "q_proj.weight", {{q_width, d_model}, q_keys + " and hidden_size"});
    }
    w.kv_a =
        load.matrix(prefix + "kv_a_proj_with_mqa.weight",
                    {{s.kv_lora + s.rope_dim, d_model}, "kv_lora_rank, qk_rope_head_dim and hidden_size"});
    w.kv_a_norm = load.vector(prefix + "kv_a_layernorm.weight", {{s.kv_lora}, "kv_lora_rank"});
    w.kv_b = load.matrix(prefix + "kv_b_proj.weight",
                         {{heads * (s.nope_dim + s.v_dim), s.kv_lora},
                          "num_attention_heads, qk_nope_head_dim, v_head_dim and kv_lora_rank"});
    const std::string o_keys = "hidden_size, num_attention_heads and v_head_dim";
    w.o = load.matrix(prefix + "o_proj.weight", {{d_model, v_width}, o_keys});
    if (m.output_gate) w.gate = load.matrix(prefix + "g_proj.weight", {{v_width, d_model}, o_keys});
    return w;
}

KvCache mla_cache_new(Ops& ops, const Mla& m, int64_t max_ctx) {
    return {ops.tensor(max_ctx, m.shape.kv_lora), ops.tensor(max_ctx, m.shape.rope_dim)};
}

Tensor mla_query_latent(Ops& ops, const Mla& m, const MlaWeights& w, const Tensor& x) {
    return m.q_lora > 0 ? ops.rms_norm(ops.matmul(w.q_a, x), w.q_a_norm, kMlaNormEps) : x;
}

Tensor mla_forward(Ops& ops, const Mla& m, const MlaWeights& w, const Tensor& x, const Tensor& c_q,
                   Batch batch, const std::function<KvCache&(int seq)>& cache, const Tensor* selection) {
    const int64_t kv_lora = m.shape.kv_lora, dr = m.shape.rope_dim;
    Tensor q = ops.matmul(w.q_b, c_q);  // [n, H (dn + dr)]
    Tensor kv = ops.matmul(w.kv_a, x);  // [n, kv_lora + dr]
    Tensor latent = ops.rms_norm(ops.slice_cols(kv, 0, kv_lora), w.kv_a_norm, kMlaNormEps);  // [n, kv_lora]
    Tensor k_pe = ops.slice_cols(kv, kv_lora, dr);  // [n, dr]: one key for all heads
    // [n, H dv]: each sequence's rows over its own cache
    Tensor a = per_segment(ops, batch, {q, latent, k_pe, selection ? *selection : Tensor()},
                           [&](const Segment& g, std::span<const Tensor> t) {
                               Tensor qs = t[0], ks = t[2];
                               if (m.rope_q) {
                                   ops.rope(qs, *m.rope_q, g.pos0);  // the last dr dims of each head
                                   ops.rope(ks, *m.rope_k, g.pos0);
                               }
                               return ops.mla_attention(qs, t[1], ks, w.kv_b, cache(g.seq), m.shape, g.pos0,
                                                        selection ? &t[3] : nullptr);
                           });
    if (m.output_gate) a = ops.mul_sigmoid(a, ops.matmul(w.gate, x));
    return ops.matmul(w.o, a);  // [n, D]
}

}  // namespace coli
