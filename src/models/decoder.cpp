#include "models/decoder.h"

#include <vector>

#include "core/error.h"

namespace coli {
namespace {

// The last row of h, for the last position's logits.                   h: [n, d]; returns [1, d]
Tensor row_last(Ops& ops, const Tensor& h) {
    // Through the host: one row of d_model floats per forward.
    std::vector<float> all = ops.read(h);
    const int64_t d = h.cols();
    return ops.tensor_from(1, d, std::span<const float>(all).subspan((h.rows() - 1) * d, d));
}

}  // namespace

void Decoder::load_weights(const Checkpoint& ckpt, const LoadOptions& opts, const DecoderSpec& spec,
                           const std::function<void(WeightLoader&)>& load_layers,
                           std::function<std::vector<std::string>(int layer, int expert)> expert_tensors) {
    // Positions beyond the model's maximum were never trained (and rope tables such as YaRN's are sized for
    // it): a larger --ctx is refused rather than silently run.
    check(opts.max_ctx <= spec.max_ctx, "--ctx {} is above the model's maximum context of {} tokens",
          opts.max_ctx, spec.max_ctx);
    max_ctx_ = opts.max_ctx > 0 ? opts.max_ctx : spec.max_ctx;
    rms_eps_ = spec.rms_eps;
    WeightLoader load(ckpt, ops_, opts.dense_bits);
    embed_ = load.table(spec.prefix + spec.embed_name);
    load_layers(load);
    final_norm_ = load.vector(spec.prefix + spec.norm_name);
    lm_head_ = load.matrix(spec.prefix + spec.head_name);
    load.finish();

    const ExpertLayout layout{spec.n_layers, spec.n_experts, spec.top_k, std::move(expert_tensors)};
    store_ = std::make_unique<ExpertStore>(ckpt, layout, opts.store);

    summary_.family = spec.family;
    summary_.dense_bytes = load.bytes_stored();
    summary_.dense_held_bytes = load.bytes_held();
    summary_.expert_bytes = store_->total_expert_bytes();
    summary_.formats = weight_formats_summary(load, spec.dense, spec.experts);
    summary_.vocab = spec.vocab;
    summary_.max_ctx = max_ctx_;
}

Tensor Decoder::forward(std::span<const int32_t> ids, ModelState& state, bool all_logits) {
    const auto n = static_cast<int64_t>(ids.size());
    check(state.n_past + n <= max_ctx_, "context full: {} + {} tokens exceed the context of {}", state.n_past,
          n, max_ctx_);
    Tensor h = ops_.embedding(embed_, ids);  // [n, d_model]
    h = layers_forward(h, ids, state);       // [n, d_model]
    if (!all_logits) h = row_last(ops_, h);  // [1, d_model]
    Tensor x = ops_.rms_norm(h, final_norm_, rms_eps_);
    state.n_past += n;
    return ops_.matmul(lm_head_, x);  // [n or 1, vocab]
}

}  // namespace coli
