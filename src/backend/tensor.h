// Tensors and weights as model code sees them: shapes and owners, never pointers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/activations.h"
#include "core/error.h"
#include "formats/format.h"

namespace coli {

class Backend;

// A 2-D f32 activation tensor [rows, cols], row-major, held by one backend.
class Tensor {
public:
    Tensor() = default;
    Tensor(Backend* owner, int64_t rows, int64_t cols, std::shared_ptr<void> storage)
        : owner_(owner), rows_(rows), cols_(cols), storage_(std::move(storage)) {}

    int64_t rows() const { return rows_; }
    int64_t cols() const { return cols_; }
    int64_t numel() const { return rows_ * cols_; }
    bool empty() const { return storage_ == nullptr; }
    Backend* backend() const { return owner_; }

    // The same storage viewed as [rows, cols] (same numel): row-major, so only the row split changes.
    Tensor reshaped(int64_t rows, int64_t cols) const {
        check(rows * cols == numel(), "reshape [{}, {}] to [{}, {}]", rows_, cols_, rows, cols);
        return Tensor(owner_, rows, cols, storage_);
    }

    // The first `rows` rows on the same storage (row-major: a prefix of it), e.g. a cache's filled rows.
    Tensor leading_rows(int64_t rows) const {
        check(rows >= 0 && rows <= rows_, "leading rows {} of [{}, {}]", rows, rows_, cols_);
        return Tensor(owner_, rows, cols_, storage_);
    }

    // The owner's private handle to the storage (a float* on the CPU). For backends only.
    void* storage() const { return storage_.get(); }
    const std::shared_ptr<void>& storage_shared() const { return storage_; }

private:
    Backend* owner_ = nullptr;
    int64_t rows_ = 0, cols_ = 0;
    std::shared_ptr<void> storage_;
};

// A weight matrix [rows, cols] in some Format. `host` always stays valid (for fallbacks and for
// backends that read host memory); a backend may also hold its own copy (VRAM) in `device`.
struct Weight {
    WeightView host;               // encoded bytes in host memory (mmap, expert cache, or `owned`)
    std::shared_ptr<void> device;  // backend-private copy, or nullptr
    std::shared_ptr<void> owned;   // keeps host bytes alive when the weight owns them (quantized copy)

    int64_t rows() const { return host.rows; }
    int64_t cols() const { return host.cols; }
    Format format() const { return host.format; }
};

// Where the routed experts of a batch of tokens go: token t uses experts[t*k + j] with weights[t*k + j].
struct Routing {
    int64_t n_tokens = 0;
    int k = 0;
    std::vector<int32_t> experts;  // [n_tokens, k]
    std::vector<float> weights;    // [n_tokens, k]
};

// The activation of a gated-linear-unit expert: act(gate x, up x) (kinds in activations.h).
struct GluActivation {
    GluKind kind = GluKind::silu;
    float beta =
        0;  // SiTU's gate bound b (activation_situ_beta), or the clamped SwiGLU's limit (swiglu_limit)
    float linear_beta = 0;  // SiTU: lb, the up projection's tanh bound (activation_situ_linear_beta)
};

// One routed expert's gated MLP weights: down(act(gate x, up x)).
struct ExpertWeights {
    int32_t id = 0;      // expert index within its layer
    Weight gate;         // [d_ff, d_model]
    Weight up;           // [d_ff, d_model]
    Weight down;         // [d_model, d_ff]
    int32_t layer = -1;  // decoder layer; (layer, id) names the expert for device caches (-1: unknown)
    GluActivation act;   // the gate activation
};

// The key/value cache of one attention layer: rows are positions. MLA layers keep the compressed form:
// k holds the latent [max_ctx, kv_lora], v the rotated rope keys [max_ctx, rope_dim].
struct KvCache {
    Tensor k;  // [max_ctx, n_kv_heads * head_dim]
    Tensor v;  // [max_ctx, n_kv_heads * head_dim]
};

// Head layout of one attention call.
struct AttentionShape {
    int n_heads = 0;     // query heads
    int n_kv_heads = 0;  // key/value heads (GQA: n_heads is a multiple)
    int head_dim = 0;
    float scale = 0;  // softmax scale, usually head_dim^-0.5
};

enum class RopeStyle : uint8_t { neox, interleaved };

// YaRN context extension (docs/models.md 2.3): the inverse frequencies blend interpolation and extrapolation.
struct RopeYarn {
    float factor = 0;        // context scale; 0: plain RoPE
    float original_ctx = 0;  // original_max_position_embeddings
    float beta_fast = 32;    // ramp ends (rotations per original context)
    float beta_slow = 1;
};

// Rotary embedding parameters for rotating rotary_dim dims of each head, from rotary_offset.
struct RopeParams {
    RopeStyle style = RopeStyle::neox;
    int head_dim = 0;             // stride between heads in the row
    int rotary_dim = 0;           // dims rotated per head (rotary_offset + rotary_dim <= head_dim)
    float theta = 10000.f;        // base of the inverse frequencies
    float attention_scaling = 1;  // multiplies cos and sin (yarn)
    int rotary_offset = 0;        // first rotated dim of each head (MLA: after the no-rope dims)
    RopeYarn yarn;                // YaRN, when yarn.factor > 0
    bool inverse = false;  // rotate by -angle (the sin term negated): undoes a rotation at the same position
    int position_stride = 1;  // row i is at position (pos0 + i) * position_stride (compressed entries)
};

// Multi-head latent attention (DeepSeek MLA) sizes.
struct MlaShape {
    int n_heads = 0;
    int nope_dim = 0;     // dn: per-head query/key dims without rope
    int rope_dim = 0;     // dr: per-head query dims with rope; one rope key shared by all heads
    int v_dim = 0;        // dv: per-head value dims
    int64_t kv_lora = 0;  // compressed latent width
    float scale = 0;      // softmax scale
};

// DSA lightning indexer sizes (docs/models.md 3).
struct DsaShape {
    int n_heads = 0;         // indexer heads
    int head_dim = 0;        // indexer query/key width
    int top_k = 0;           // keys kept per query
    float scale = 0;         // on q . k before the ReLU (head_dim^-0.5)
    float weight_scale = 0;  // on the per-head weights (n_heads^-0.5)
    int ratio = 1;           // index_topk: positions per key (the compression ratio of the key entries)
};

// How a compressor pools raw key/value rows into one entry per window of `ratio` positions (compress_kv).
struct CompressShape {
    int ratio = 0;     // positions per window
    int head_dim = 0;  // width of one entry
    int series = 1;    // 1: non-overlapping windows (HCA); 2: each window also pools the one before (CSA)
};

// Sliding-window attention over raw keys plus compressed entries, one shared key = value head
// (compressed_attention).
struct CompressedAttentionShape {
    int n_heads = 0;   // query heads
    int head_dim = 0;  // query, key and value width
    int window = 0;    // raw positions each query sees: t - window < s <= t
    int ratio = 0;     // positions per compressed entry; 0: sliding window only
    float scale = 0;   // softmax scale
};

// Hyper-connections: the residual stream kept as `streams` parallel copies (hc_weights, hc_collapse,
// hc_expand).
struct HcShape {
    int streams = 0;         // S (hc_mult)
    int sinkhorn_iters = 0;  // normalization rounds of the mixing matrix (hc_sinkhorn_iters)
    float eps = 0;           // added to the weights and to the Sinkhorn sums (hc_eps)
};

// Kimi delta attention sizes and its forget-gate form (docs/models.md 5.1).
struct KdaShape {
    int n_heads = 0;
    int head_dim = 0;            // dk = dv
    float gate_lower_bound = 0;  // 0: g = -exp(A) softplus(z); < 0 (K3): g = bound sigmoid(exp(A) z)
};

// How a sigmoid router turns a logit into an expert's score.
enum class RouterScore : uint8_t {
    sigmoid,        // sigmoid(logit)
    sqrt_softplus,  // sqrt(softplus(logit)) (DeepSeek-V4)
};

// Sigmoid routing with a selection bias and group-limited choice (DeepSeek-V3 noaux_tc, docs/models.md 2.4).
struct SigmoidRouting {
    int k = 0;                // experts per token
    int n_group = 1;          // contiguous expert groups
    int topk_group = 1;       // groups kept per token (by the sum of their two best biased scores)
    bool renormalize = true;  // weights divided by their sum (+1e-20)
    float scaling = 1;        // routed_scaling_factor, applied last
    RouterScore score = RouterScore::sigmoid;  // logit -> score
};

}  // namespace coli
