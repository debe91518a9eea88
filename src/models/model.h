// A model family: config -> weights -> forward, written once on ops (docs/design.md rule 1).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "io/checkpoint.h"
#include "store/expert_store.h"

namespace coli {

// How a model is loaded: choices that change speed, plus the one explicit lossy choice.
struct LoadOptions {
    int dense_bits = 0;   // 0: dense weights as stored; 8 | 4: quantized at load (reported)
    int64_t max_ctx = 0;  // context length of the session caches; 0 = the model's maximum
    StoreOptions store;   // expert cache budget, slots, I/O
    // Load the model's multi-token-prediction layer (DeepSeek's MTP, docs/models.md 2.5) for speculative
    // decoding (Model::draft); a model without one is an error naming what it lacks.
    bool draft = false;
};

// Sizes by part, for `coli info` and the memory plan.
struct ModelSummary {
    std::string family;               // config.json model_type
    std::string architecture;         // one line: layers, width, heads, experts
    uint64_t dense_bytes = 0;         // resident weights, as stored
    uint64_t dense_held_bytes = 0;    // resident weights as held (after --dense-bits)
    uint64_t expert_bytes = 0;        // routed experts, streamed from disk
    uint64_t expert_count = 0;        // routed experts over all layers
    std::string formats;              // stored dtypes of dense and expert weights
    uint64_t kv_bytes_per_token = 0;  // cache bytes each token of context costs
    uint64_t state_bytes = 0;         // fixed per-session state whatever the context (recurrent layers)
    std::string kv_detail;            // how the cache grows, where it is not one row per token (DeepSeek-V4)
    int64_t vocab = 0;
    int64_t max_ctx = 0;
};

// One tensor of a model's state and how its rows follow the positions, so that one piece of code
// (runtime/state_snapshot.h) copies any family's state at n_past tokens and writes it back.
struct StateTensor {
    Tensor* tensor = nullptr;  // the state's tensor, written in place when a snapshot is restored
    // Positions per row: 1 for a KV cache (row p holds position p, so rows [0, n_past) are filled), r for
    // entries closed once per r positions (rows [0, n_past / r)); 0 when any row may hold something
    // whatever n_past (recurrent states, convolution histories, rings indexed by position modulo rows).
    int64_t positions_per_row = 0;
};

// The per-conversation state of a model: caches and the number of tokens already seen.
class ModelState {
public:
    virtual ~ModelState() = default;
    // Every tensor the state holds, in a fixed order (a layer without one may list an empty tensor).
    virtual std::vector<StateTensor> tensors() = 0;
    int64_t n_past = 0;  // tokens already processed (the position of the next token)
    // Where the model drafts (Model::drafts): the last forward's rows before the final norm, which the
    // draft head reads, and the position of the first.                            hidden: [n, d_model]
    Tensor hidden;
    int64_t hidden_pos0 = 0;
};

// One sequence's part of a batched forward.
struct SequenceStep {
    std::span<const int32_t> ids;  // its next tokens (at least one)
    ModelState* state = nullptr;   // its caches, at ids' first position; advanced by the pass
    int64_t logit_rows = 1;        // how many of its last rows' logits the pass returns (a draft's check: 2)
};

// One sequence's part of a batched draft (Model::draft).
struct DraftStep {
    std::span<const int32_t> next;  // the tokens that followed the rows of its last forward (see draft())
    ModelState* state = nullptr;    // its state, whose hidden rows the draft head reads
};

class Model {
public:
    virtual ~Model() = default;

    virtual const ModelSummary& summary() const = 0;
    virtual std::unique_ptr<ModelState> state_new() = 0;

    // Runs ids at positions state.n_past .. + n and advances the state. Returns logits [n, vocab] for
    // every position when all_logits, else [1, vocab] for the last one.
    virtual Tensor forward(std::span<const int32_t> ids, ModelState& state, bool all_logits) = 0;

    // Runs several sequences' next tokens in one pass (nn/batch.h) and advances each state. Every sequence's
    // logits are those it gets from forward() alone.    returns [sum of logit_rows, vocab]: each one's last
    virtual Tensor forward_batch(std::span<const SequenceStep> steps) = 0;

    // Whether draft() runs: the model's multi-token-prediction layer is loaded (LoadOptions::draft).
    virtual bool drafts() const = 0;
    // The draft head's guess at the token after next.back() (speculative decoding, runtime/speculative.h):
    // pairs the rows of the last forward on state (state.hidden) with the tokens that followed them (next[i]
    // follows row i; fewer than the rows when the later ones were rejected), runs the pairs through the head
    // at those rows' positions (its own cache, in state, advances with them) and returns the draft logits
    // of the last pair. Several sequences' drafts run in one pass (nn/batch.h), each one's logits those it
    // gets alone.                                                               returns [steps, vocab]
    virtual Tensor draft(std::span<const DraftStep> steps) = 0;
    Tensor draft(std::span<const int32_t> next, ModelState& state) {  // one sequence: [1, vocab]
        const DraftStep one{next, &state};
        return draft(std::span(&one, 1));
    }

    virtual ExpertStore& store() = 0;
    virtual Ops& ops() = 0;
};

// Loads the model in ckpt by its config.json model_type; throws coli::Error naming an unsupported one.
std::unique_ptr<Model> model_load(const Checkpoint& ckpt, Ops& ops, const LoadOptions& opts);

// The model_type values this build supports.
std::vector<std::string> model_families();

}  // namespace coli
