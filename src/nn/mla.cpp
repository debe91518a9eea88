#include "nn/mla.h"

namespace coli {
namespace {

// The q_a and kv_a RMSNorms' epsilon: transformers builds them with the class default in every MLA family,
// not with config.rms_norm_eps.
constexpr float kMlaNormEps = 1e-6f;

}  // namespace

MlaWeights mla_load(WeightLoader& load, const std::string& prefix, const Mla& m) {
    MlaWeights w;
    if (m.q_lora > 0) {
        w.q_a = load.matrix(prefix + "q_a_proj.weight");
        w.q_a_norm = load.vector(prefix + "q_a_layernorm.weight");
        w.q_b = load.matrix(prefix + "q_b_proj.weight");
    } else {
        w.q_b = load.matrix(prefix + "q_proj.weight");
    }
    w.kv_a = load.matrix(prefix + "kv_a_proj_with_mqa.weight");
    w.kv_a_norm = load.vector(prefix + "kv_a_layernorm.weight");
    w.kv_b = load.matrix(prefix + "kv_b_proj.weight");
    w.o = load.matrix(prefix + "o_proj.weight");
    if (m.output_gate) w.gate = load.matrix(prefix + "g_proj.weight");
    return w;
}

KvCache mla_cache_new(Ops& ops, const Mla& m, int64_t max_ctx) {
    return {ops.tensor(max_ctx, m.shape.kv_lora), ops.tensor(max_ctx, m.shape.rope_dim)};
}

Tensor mla_query_latent(Ops& ops, const Mla& m, const MlaWeights& w, const Tensor& x) {
    return m.q_lora > 0 ? ops.rms_norm(ops.matmul(w.q_a, x), w.q_a_norm, kMlaNormEps) : x;
}

Tensor mla_forward(Ops& ops, const Mla& m, const MlaWeights& w, const Tensor& x, const Tensor& c_q,
                   KvCache& cache, int64_t pos0, const Tensor* selection) {
    const int64_t kv_lora = m.shape.kv_lora, dr = m.shape.rope_dim;
    Tensor q = ops.matmul(w.q_b, c_q);  // [n, H (dn + dr)]
    Tensor kv = ops.matmul(w.kv_a, x);  // [n, kv_lora + dr]
    Tensor latent = ops.rms_norm(ops.slice_cols(kv, 0, kv_lora), w.kv_a_norm, kMlaNormEps);  // [n, kv_lora]
    Tensor k_pe = ops.slice_cols(kv, kv_lora, dr);  // [n, dr]: one key for all heads
    if (m.rope_q) {
        ops.rope(q, *m.rope_q, pos0);  // the last dr dims of each head
        ops.rope(k_pe, *m.rope_k, pos0);
    }
    Tensor a = ops.mla_attention(q, latent, k_pe, w.kv_b, cache, m.shape, pos0, selection);  // [n, H dv]
    if (m.output_gate) a = ops.mul_sigmoid(a, ops.matmul(w.gate, x));
    return ops.matmul(w.o, a);  // [n, D]
}

}  // namespace coli
