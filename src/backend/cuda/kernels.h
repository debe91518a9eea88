// Launchers of the CUDA kernels (defined in the .cu files beside this). Plain pointers to device memory,
// all [rows, cols] row-major f32 unless named otherwise; every launch is asynchronous on `s` and checks
// the launch error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/activations.h"
#include "backend/cuda/limits.h"
#include "formats/format.h"

namespace coli::cuda {

// An encoded weight matrix in device memory, in the layout of format.h (scales copied to aligned memory).
struct DeviceWeight {
    Format format = Format::f32;   // encoding of data / scales
    int64_t rows = 0;              // output features
    int64_t cols = 0;              // input features
    const void* data = nullptr;    // codes
    const void* scales = nullptr;  // per-format scales, nullptr for f32/bf16/f16
};

// Throws coli::Error naming `what` and CUDA's message when err is not cudaSuccess (coli::OutOfMemory for
// cudaErrorMemoryAllocation: an expert tier lowers its capacity and tries again).
void cuda_check(cudaError_t err, const char* what);

// y[t][r] = dot(x[t], row r of w) for t < n, one pass over w per kCudaGemvMaxTokens tokens.
//                                                                           x: [n, cols]; y: [n, rows]
void gemv(const DeviceWeight& w, const float* x, int64_t n, float* y, cudaStream_t s);

// One matrix of a batched GEMV.
struct GemvJob {
    DeviceWeight w;  // the matrix; every job of a batch has the same format
    const float* x;  // [n, w.cols]
    float* y;        // [n, w.rows]
    int n;           // tokens, 1..kCudaGemvMaxTokens
};
// Whether w can be a job of gemv_batch (rows of whole 16-byte chunks).
bool gemv_batch_fits(const DeviceWeight& w);
// Every job's gemv, in as few launches as the kernel's parameter space allows.
void gemv_batch(const GemvJob* jobs, int count, cudaStream_t s);
// Streaming multiprocessors of the current device, asked once per process: the GEMVs' grid plans.
int sm_count();
// Whether the tensor-core GEMV (gemv_mma.cu) takes w for n tokens: int4-g64, mxfp4 and fp8-e4m3-block, rows
// of whole 16-byte chunks, and x of n tokens fitting its shared-memory layout.
bool gemv_mma_fits(const DeviceWeight& w, int n);
// Every job's gemv on the tensor cores; every job fits gemv_mma_fits with its n, all share a format.
void gemv_mma(const GemvJob* jobs, int count, cudaStream_t s);

// Rows [r0, r1) of w decoded and split: w = hi + lo (lo = bf16(w - hi)); lo may be null when bf16 holds every
// value of w exactly (bf16, mxfp4).                           hi, lo: [r1 - r0, cols] bf16
void dequant_bf16(const DeviceWeight& w, int64_t r0, int64_t r1, uint16_t* hi, uint16_t* lo, cudaStream_t s);
// x = hi + lo with hi = bf16(x), lo = bf16(x - hi): bf16 GEMMs on both parts give a near-f32 product.
void split_bf16(const float* x, int64_t count, uint16_t* hi, uint16_t* lo, cudaStream_t s);

// out[i] = decoded row ids[i] of table (ids on the device).                out: [n, table.cols]
void embedding(const DeviceWeight& table, const int32_t* ids, int64_t n, float* out, cudaStream_t s);
// out = x / sqrt(mean(x^2) + eps) * w per row.                              x, out: [n, d]; w: [d]
void rms_norm(const float* x, const float* w, float eps, int64_t n, int64_t d, float* out, cudaStream_t s);
// out = (x - mean) / sqrt(var + eps) * w + b per row.                     x, out: [n, d]; w, b: [d]
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t n, int64_t d, float* out,
                cudaStream_t s);
void add(const float* a, const float* b, float* out, int64_t count, cudaStream_t s);  // out = a + b
void clamp(float* x, int64_t count, float lo, float hi, cudaStream_t s);              // in place

// Rotary embedding in place; inv_freq[rotary_dim / 2] on the device.       x: [n, cols], cols = heads *
// head_dim
struct RopeArgs {
    int head_dim;             // stride between heads
    int rotary_dim;           // dims rotated per head
    int rotary_offset;        // first rotated dim of each head
    bool neox;                // neox pairs (i, i + half), else interleaved (2i, 2i + 1)
    float attention_scaling;  // multiplies cos and sin
    int position_stride;      // row r is at position (pos0 + r) position_stride
    bool inverse;             // rotate by -angle (sin negated)
};
void rope(float* x, int64_t n, int64_t cols, const float* inv_freq, const RopeArgs& a, int64_t pos0,
          cudaStream_t s);

// Causal attention of q over cache rows [0, pos0 + i] for query i (k, v already written to the cache).
struct AttentionArgs {
    int n_heads, n_kv_heads, head_dim;  // GQA layout
    float scale;                        // softmax scale
};
// How attention (attention.cu) splits the keys of each row, and how many queries one pass takes.
struct AttentionSplit {
    int64_t keys;     // keys of a split
    int64_t splits;   // splits of the longest row
    int64_t queries;  // queries per pass: their partial results fit attention_scratch_floats
};
AttentionSplit attention_split(int64_t n, int64_t pos0, const AttentionArgs& a);
int64_t attention_scratch_floats(const AttentionSplit& p, const AttentionArgs& a);
// scratch: attention_scratch_floats(p, a) floats.
void attention(const float* q, const float* k_cache, const float* v_cache, int64_t n, int64_t pos0,
               const AttentionArgs& a, const AttentionSplit& p, float* scratch, float* out, cudaStream_t s);

// The kernels of absorbed multi-head latent attention (backend.h mla_attention; mla_attend.cpp runs them
// with the cuBLAS products).       q: [n, H (dn + dr)]; q_abs, mixed: [n, H, kv_lora]; out: [n, H dv]
struct MlaArgs {
    int n_heads, nope_dim, rope_dim, v_dim;  // MlaShape
    int64_t kv_lora;
    float scale;  // softmax scale
};
// q_abs[i][h] = W_UK[h]^T q_nope[i][h], W_UK[h] the rows [h (dn + dv), + dn) of w_kvb.
void mla_absorb(const float* q, const DeviceWeight& w_kvb, int64_t n, const MlaArgs& a, float* q_abs,
                cudaStream_t s);
// Row j of query i's selection (a key position, -1 for none) copied to row (i, j) of latent_rows and
// rope_rows, zeros for -1.   selection: [n, sel_cols]; latent_rows: [n, sel_cols, kv_lora]; rope_rows: [n,
// sel_cols, rope_dim]
void mla_gather(const float* latents, const float* rope_keys, const float* selection, int64_t n,
                int64_t sel_cols, const MlaArgs& a, float* latent_rows, float* rope_rows, cudaStream_t s);
// Softmax in place over each row (query q, head h) of scores [n, n_heads, keys], masking key j when
// selection (row q of [n, keys]) holds -1 there, or without selection when j > causal0 + q.
void mla_softmax(float* scores, int64_t n, int n_heads, int64_t keys, int64_t causal0, const float* selection,
                 cudaStream_t s);
// out[k] = sum over c < chunks of parts[c][k], in chunk order.                parts: [chunks, count]
void sum_chunks(const float* parts, int64_t chunks, int64_t count, float* out, cudaStream_t s);
// out[i][h] = W_UV[h] mixed[i][h], W_UV[h] the rows [h (dn + dv) + dn, + dv) of w_kvb.
void mla_output(const float* mixed, const DeviceWeight& w_kvb, int64_t n, const MlaArgs& a, float* out,
                cudaStream_t s);

// DSA index scores (backend.h dsa_select) of keys [0, pos0 + i] for query i into row i of scores
// [n, pos0 + n]; the keys of the new tokens are already in the cache; head_dim a multiple of 4.
//   q: [n, heads * dim]; weights: [n, heads]
struct DsaArgs {
    int n_heads, head_dim;
    float scale, weight_scale;  // DsaShape
};
void dsa_scores(const float* q, const float* weights, const float* keys, int64_t n, int64_t pos0,
                const DsaArgs& a, float* scores, cudaStream_t s);
// Shared memory one dsa_scores block needs, in bytes.
size_t dsa_scores_smem_bytes(const DsaArgs& a);
// index_topk's scores (backend.h): row i of scores [n, (pos0 + n) / ratio] holds, for the compressed keys
// e < (pos0 + i + 1) / ratio, sum_h weights[i][h] weight_scale relu(scale q_h(i) . keys[e]), equal to the
// CPU's bit for bit (its summation order); head_dim <= kCudaIndexMaxHeadDim.
//   q: [n, heads * dim]; weights: [n, heads]; keys: [>= (pos0 + n) / ratio, dim]
void index_scores(const float* q, const float* weights, const float* keys, int64_t n, int64_t pos0, int ratio,
                  const DsaArgs& a, float* scores, cudaStream_t s);
// Row i of out = dsa_topk_row(row i of scores, (pos0 + i + 1) / ratio, top_k), top_k <= kCudaDsaMaxTopK
// (ratio 1: dsa_select's keys; more: index_topk's compressed keys).
//   scores: [n, total]; out: [n, top_k]
void dsa_topk(const float* scores, int64_t n, int64_t total, int64_t pos0, int ratio, int top_k, float* out,
              cudaStream_t s);

// DeepSeek-V4's compressed attention (backend.h compressed_attention; compressed_attention.cu): the device
// memory of one call.
struct CompressedAttentionIo {
    const float* q;          // [n, heads * head_dim]
    const float* kv;         // [n, head_dim]: the raw keys of positions pos0..
    const float* ring;       // [ring_rows, head_dim]: raw keys of earlier positions p at row p mod ring_rows
    const float* entries;    // [>= (pos0 + n) / ratio, head_dim]; nullptr when ratio = 0
    const float* selection;  // [n, entry_slots] entry ids (-1: none), or nullptr: every closed entry
    const float* sinks;      // [heads]
};
// Its shape; a query's key slots are window raw positions, then entry_slots entries.
struct CompressedAttentionArgs {
    int n_heads, head_dim, window, ratio;  // CompressedAttentionShape (ratio 0: sliding window only)
    float scale;                           // softmax scale
    int64_t pos0;                          // position of query 0
    int64_t ring_rows;                     // rows of the ring
    int64_t entry_slots;                   // selection columns, or (pos0 + n) / ratio without one; 0: ratio 0
};
// Its key splits (keys: slots of a split) and the queries of one pass, as attention_split.
AttentionSplit compressed_attention_split(int64_t n, const CompressedAttentionArgs& a);
int64_t compressed_attention_scratch_floats(const AttentionSplit& p, const CompressedAttentionArgs& a);
// out [n, heads * head_dim]; scratch: compressed_attention_scratch_floats(p, a) floats.
void compressed_attention(const CompressedAttentionIo& io, const CompressedAttentionArgs& a, int64_t n,
                          const AttentionSplit& p, float* scratch, float* out, cudaStream_t s);

// DeepSeek-V4's KV compressor (backend.h compress_kv) of the windows closing in a call.
//   kv, gate: [n, series head_dim]; ape: [ratio, series head_dim]; state_kv, state_gate: [series ratio,
//   series head_dim]; out: [windows, head_dim]
struct CompressArgs {
    int ratio, head_dim, series;  // CompressShape
};
void compress_kv(const float* kv, const float* gate, const float* ape, const float* state_kv,
                 const float* state_gate, int64_t pos0, const CompressArgs& a, int64_t windows, float* out,
                 cudaStream_t s);

// DeepSeek-V4's hyper-connections (backend.h hc_weights, hc_collapse, hc_expand; hyper.cu).
struct HcArgs {
    int streams;         // S
    int64_t cols;        // mix's width: (2 + S) S, or S (a head's: pre only)
    int sinkhorn_iters;  // HcShape
    float eps;
};
//   mix, out: [n, cols]; base: [cols]; scale: [3], or [1] for a head
void hc_weights(const float* mix, const float* base, const float* scale, int64_t n, const HcArgs& a,
                float* out, cudaStream_t s);
//   x: [n, streams d]; weights: [n, w_cols >= streams]; out: [n, d]
void hc_collapse(const float* x, const float* weights, int64_t n, int64_t d, int streams, int64_t w_cols,
                 float* out, cudaStream_t s);
//   x, out: [n, streams d]; y: [n, d]; weights: [n, (2 + streams) streams]
void hc_expand(const float* x, const float* y, const float* weights, int64_t n, int64_t d, int streams,
               float* out, cudaStream_t s);

// Softmax over each row, top k (ties to the lower id), optionally renormalized.  logits: [n, n_experts]
void route_softmax_topk(const float* logits, int64_t n, int64_t n_experts, int k, bool renormalize,
                        int32_t* ids, float* weights, cudaStream_t s);

// out[i] = x[rows[i]].                                                      x: [*, d]; out: [m, d]
void gather_rows(const float* x, int64_t d, const int32_t* rows, int64_t m, float* out, cudaStream_t s);
// A gated-linear-unit activation (backend/activations.h glu).
struct GluArgs {
    GluKind kind;       // silu or situ
    float beta;         // situ: the gate's tanh bound
    float linear_beta;  // situ: the up projection's tanh bound
};
// out = act(gate, up), elementwise; out may alias gate.
void glu(const float* gate, const float* up, int64_t count, const GluArgs& act, float* out, cudaStream_t s);
// out = a * sigmoid(b), elementwise.
void mul_sigmoid(const float* a, const float* b, int64_t count, float* out, cudaStream_t s);
// Attention residuals (backend.h res_mix) of m entries, each [n, d] on the device.      w: [d]; out: [n, d]
void res_mix(const float* const* entries, int m, const float* w, float eps, int64_t n, int64_t d, float* out,
             cudaStream_t s);

// KDA's causal depthwise convolution then SiLU (backend.h short_conv), the state advanced in place.
//                                                          x, out: [n, c]; w: [c, k]; state: [k - 1, c]
void short_conv(const float* x, const float* w, int k, int64_t n, int64_t c, float* state, float* out,
                cudaStream_t s);
// The Kimi delta rule (backend.h kda) over n tokens from state (updated in place); head_dim one of
// kCudaKdaHeadDims.     q, k, v, g, out: [n, H d]; beta: [n, H]; a_log: [H]; dt_bias: [H d]; state: [H d, d]
struct KdaArgs {
    int n_heads, head_dim;   // KdaShape
    float gate_lower_bound;  // 0: softplus gate
};
void kda(const float* q, const float* k, const float* v, const float* g, const float* beta,
         const float* a_log, const float* dt_bias, int64_t n, const KdaArgs& a, float* state, float* out,
         cudaStream_t s);
// The same by chunks of tokens (kda_chunk.cu), which kda runs for n > 1.
void kda_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                 const float* a_log, const float* dt_bias, int64_t n, const KdaArgs& a, float* state,
                 float* out, cudaStream_t s);
// y[rows[i]] += src[i] * gains[i].                                          src: [m, d]; y: [*, d]
void scatter_add(const float* src, int64_t d, const int32_t* rows, const float* gains, int64_t m, float* y,
                 cudaStream_t s);
// Which routed rows each token of a moe_combine adds, passed by value (kernel parameter space), so that a
// decode step copies no routing to the device.
struct CombineSlots {
    int32_t slots[kCudaCombineMaxSlots];  // routed row of (token t, j) at t * k + j; -1 adds nothing
    float gains[kCudaCombineMaxSlots];    // its router weight
};
// y[t] += sum over j < k of src[slots[t * k + j]] * gains[t * k + j], in j order, for n * k <=
// kCudaCombineMaxSlots. A token's expert outputs add up deterministically in one launch.
//                                                                                  src: [*, d]; y: [n, d]
void moe_combine(const float* src, int64_t d, const CombineSlots& slots, int64_t n, int k, float* y,
                 cudaStream_t s);

}  // namespace coli::cuda
