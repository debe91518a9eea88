// KDA prefill in chunks on the CPU (docs/models.md 5.1; transformers' chunk_kimi_delta_attention): one head,
// one chunk of up to kKdaChunk tokens, from the state the previous chunk (or the session) left.
#pragma once

#include <cstdint>
#include <vector>

namespace coli::cpu {

inline constexpr int kKdaChunk = 64;  // tokens per chunk, as transformers

// One head's tokens of a chunk, prepared as the token recurrence uses them.
struct KdaChunkIn {
    int n = 0;                     // tokens, 1..kKdaChunk
    int d = 0;                     // head dim (dk = dv)
    const float* q = nullptr;      // [n, d] l2-normalized, times 1/sqrt(d)
    const float* k = nullptr;      // [n, d] l2-normalized
    const float* alpha = nullptr;  // [n, d] per-channel decay exp(g), in [0, 1]
    const float* beta = nullptr;   // [n] sigmoid(beta)
    const float* v = nullptr;      // rows of v, v_stride apart
    int64_t v_stride = 0;
    float* out = nullptr;  // rows of out, out_stride apart
    int64_t out_stride = 0;
};

// Working memory of kda_chunk for head dim d, reused from chunk to chunk (one per thread).
struct KdaChunkScratch {
    explicit KdaChunkScratch(int d);
    std::vector<float> decay_in, decay_out, q_in, k_in, k_out_t, ks, u, m, p, q_rel, k_rel, k_left_t, carry;
};

// Advances state S [d, d] (rows indexed by key channel) over the chunk and writes its outputs, equal to the
// token recurrence of Backend::kda up to rounding.
void kda_chunk(const KdaChunkIn& x, float* state, KdaChunkScratch& scratch);

}  // namespace coli::cpu
