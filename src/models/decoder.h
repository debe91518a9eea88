// The decoder skeleton every family shares: token embedding, the family's layers, the final RMSNorm and
// lm_head, the expert store, and the Model accessors and summary. A family derives from Decoder and writes
// only what is its own: its config, its layers' weights, state and forward, and its summary line. (Here
// rather than in nn/: it implements Model; nn/ holds the blocks, below models.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"
#include "nn/batch.h"
#include "nn/mtp.h"
#include "nn/weights.h"

namespace coli {

// What the skeleton needs of a family's config.
struct DecoderSpec {
    std::string family;       // config model_type
    std::string prefix = "";  // tensor names' prefix: "" or "language_model." (Kimi K3)
    int n_layers;
    int64_t vocab;
    float rms_eps;        // the final norm's epsilon
    int64_t max_ctx;      // the model's maximum context (max_position_embeddings)
    int n_experts;        // routed experts per MoE layer
    int top_k;            // routed experts per token
    DType dense;          // the dense weights' stored dtype, for the summary
    std::string experts;  // the routed experts' format, for the summary ("F8_E4M3", "none")
    // The embedding, final norm and lm_head tensors' names after the prefix (transformers' by default;
    // DeepSeek-V4's original checkpoints say embed.weight, norm.weight, head.weight).
    std::string embed_name = "model.embed_tokens.weight";
    std::string norm_name = "model.norm.weight";
    std::string head_name = "lm_head.weight";
    int64_t d_model = 0;  // hidden_size, checked against the embedding, final norm and lm_head; 0 = unchecked
    // A routed expert's width and the config key that gives it, checked against every expert's gate and up
    // projections ([width, d_model]; gate_proj / up_proj, or w1 / w3) and down projection ([d_model, width];
    // down_proj or w2) stored unpacked; 0 = unchecked.
    int64_t expert_ff = 0;
    std::string expert_ff_key = "";
    // The width routed experts work in where it is not hidden_size (Kimi K3's latent experts), and its key.
    int64_t expert_d = 0;
    std::string expert_d_key = "";
    // Multi-token-prediction layers loaded after the decoder's (LoadOptions::draft): their routed experts are
    // in the store as layers n_layers ...
    int draft_layers = 0;
};

class Decoder : public Model {
public:
    const ModelSummary& summary() const override { return summary_; }
    ExpertStore& store() override { return *store_; }
    Ops& ops() override { return ops_; }

    // Embeds ids, runs the family's layers, keeps the last row unless all_logits, then the final norm and
    // lm_head.                                                        returns [n, vocab], or [1, vocab]
    Tensor forward(std::span<const int32_t> ids, ModelState& state, bool all_logits) final;
    // The same over the sequences' stacked rows, keeping each one's last logit_rows.  returns [rows, vocab]
    Tensor forward_batch(std::span<const SequenceStep> steps) final;
    bool drafts() const final { return mtp_.has_value(); }
    // The MTP layer (nn/mtp.h) over the pairs, through the family's draft_layer_forward.
    //                                                                        returns [steps, vocab]
    Tensor draft(std::span<const DraftStep> steps) final;
    using Model::draft;

protected:
    explicit Decoder(Ops& ops) : ops_(ops) {}

    // The family's decoder layers over a batch: segment s's rows are at positions s.pos0 ... of
    // states[s.seq] (whose n_past is advanced after them). ids are the tokens of h's rows (DeepSeek-V4's hash
    // routing reads them).                                             h: [n, d_model] -> [n, d_model]
    virtual Tensor layers_forward(Tensor h, std::span<const int32_t> ids, Batch batch,
                                  std::span<ModelState* const> states) = 0;

    // The family's MTP decoder layer (drafts() only) over the segments' rows at their positions, each with
    // its own caches in states[seq].                                   h: [n, d_model] -> [n, d_model]
    virtual Tensor draft_layer_forward(Tensor h, Batch batch, std::span<ModelState* const> states);

    // Segment seq's state as the family's type.
    template <class S>
    static S& state_of(std::span<ModelState* const> states, int seq) {
        return static_cast<S&>(*states[seq]);
    }

    // Loads the weights in checkpoint order (the embedding; then load_layers, which loads the family's
    // layers; then the final norm and lm_head), opens the expert store over the routed experts that
    // expert_tensors names (none for a layer without them) and fills the summary's common fields. The
    // family's constructor calls it first, then completes the summary (architecture, expert_count,
    // kv_bytes_per_token, state_bytes).
    void load_weights(const Checkpoint& ckpt, const LoadOptions& opts, const DecoderSpec& spec,
                      const std::function<void(WeightLoader&)>& load_layers,
                      std::function<std::vector<std::string>(int layer, int expert)> expert_tensors);

    int64_t max_ctx() const { return max_ctx_; }  // the sessions' context: --ctx, else the model's maximum

    Ops& ops_;
    std::unique_ptr<ExpertStore> store_;
    ModelSummary summary_;
    std::optional<MtpWeights> mtp_;  // the MTP layer's own weights, which load_layers loads where asked

private:
    int64_t max_ctx_ = 0;
    float rms_eps_ = 0;
    Weight embed_, final_norm_, lm_head_;
};

}  // namespace coli
