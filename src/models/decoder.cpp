#include "models/decoder.h"

#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "core/error.h"

namespace coli {
namespace {

// The config's extra layers after the decoder's (DeepSeek's multi-token prediction layers), whose tensors
// a checkpoint holds but the decoder does not run.
int extra_layers(const nlohmann::json& config) {
    for (const nlohmann::json* c :
         {&config, config.contains("text_config") ? &config["text_config"] : nullptr})
        if (c && c->contains("num_nextn_predict_layers") &&
            (*c)["num_nextn_predict_layers"].is_number_integer())
            return (*c)["num_nextn_predict_layers"].get<int>();
    return 0;
}

// The number in `name` between `key` and the next dot ("model.layers.3.mlp", "model.layers." -> 3) at
// the first place where digits and a dot follow `key` (only at the start when at_start); -1 when none.
// (A scan, not std::regex: the check runs over every tensor name, half a million for the largest models.)
int64_t index_after(std::string_view name, std::string_view key, bool at_start) {
    constexpr size_t kMaxDigits = 9;  // fits an int
    for (size_t pos = name.find(key); pos != std::string_view::npos; pos = name.find(key, pos + 1)) {
        if (at_start && pos != 0) break;
        size_t i = pos + key.size(), digits = 0;
        int64_t value = 0;
        for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < kMaxDigits; ++i, ++digits)
            value = value * 10 + (name[i] - '0');
        if (digits > 0 && i < name.size() && name[i] == '.') return value;
        if (at_start) break;
    }
    return -1;
}

// A routed expert's projection against the config's widths: gate and up [expert_ff, d], down [d, expert_ff]
// (d: expert_d, else hidden_size); compressed-tensors' packed codes are `<proj>.weight_packed`.
void expert_shape_check(const TensorInfo& t, const DecoderSpec& spec) {
    if (spec.expert_ff <= 0 || spec.d_model <= 0) return;
    const int64_t d = spec.expert_d > 0 ? spec.expert_d : spec.d_model;
    const std::string keys =
        spec.expert_ff_key + " and " + (spec.expert_d > 0 ? spec.expert_d_key : "hidden_size");
    std::string name = t.name;
    if (name.ends_with(kPackedSuffix)) name = name.substr(0, name.size() - kPackedSuffix.size()) + ".weight";
    const auto named = [&name](std::initializer_list<std::string_view> suffixes) {
        for (std::string_view s : suffixes)
            if (name.ends_with(s)) return true;
        return false;
    };
    if (named({".gate_proj.weight", ".up_proj.weight", ".w1.weight", ".w3.weight"}))
        config_shape_check(t, {{spec.expert_ff, d}, keys});
    else if (named({".down_proj.weight", ".w2.weight"}))
        config_shape_check(t, {{d, spec.expert_ff}, keys});
}

// config.json against the checkpoint's tensors, before anything is read: no tensor of a layer beyond
// num_hidden_layers (a smaller count would run a truncated model), no routed expert beyond the expert
// count, each routed expert's projections of the config's widths, and the embedding, final norm and lm_head
// of [vocab_size, hidden_size]. The error names the key and the tensor.
void config_check(const Checkpoint& ckpt, const DecoderSpec& spec) {
    // The model's widths first: a wrong hidden_size is named on the embedding, not on some expert.
    const auto shape_check = [&](const std::string& name, std::vector<int64_t> expect, const char* keys) {
        const TensorInfo* t = ckpt.find(spec.prefix + name);
        if (t) config_shape_check(*t, {std::move(expect), keys});  // missing: the loader names it
    };
    if (spec.d_model > 0) {
        shape_check(spec.embed_name, {spec.vocab, spec.d_model}, "vocab_size and hidden_size");
        shape_check(spec.head_name, {spec.vocab, spec.d_model}, "vocab_size and hidden_size");
        shape_check(spec.norm_name, {spec.d_model}, "hidden_size");
    }
    const int layers = spec.n_layers + extra_layers(ckpt.config());
    const std::string mtp = layers > spec.n_layers ? fmt::format(" (+{} MTP)", layers - spec.n_layers) : "";
    for (const TensorInfo& t : ckpt.tensors()) {
        if (t.name.compare(0, spec.prefix.size(), spec.prefix) != 0) continue;
        const std::string_view name = std::string_view(t.name).substr(spec.prefix.size());
        const int64_t layer = index_after(name, "model.layers.", true);
        if (layer < 0) continue;
        check(layer < int64_t{layers},
              "config.json: num_hidden_layers is {}{}, but the checkpoint has tensor {} of layer {}",
              spec.n_layers, mtp, t.name, layer);
        const int64_t expert = index_after(name, ".experts.", false);
        if (expert >= 0 && layer < spec.n_layers) {
            check(expert < spec.n_experts,
                  "config.json: the routed expert count is {}, but the checkpoint has tensor {} of expert {}",
                  spec.n_experts, t.name, expert);
            expert_shape_check(t, spec);
        }
    }
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
    config_check(ckpt, spec);
    rms_eps_ = spec.rms_eps;
    WeightLoader load(ckpt, ops_, opts.dense_bits);
    embed_ = load.table(spec.prefix + spec.embed_name);
    load_layers(load);
    final_norm_ = load.vector(spec.prefix + spec.norm_name);
    lm_head_ = load.matrix(spec.prefix + spec.head_name);
    load.finish();

    check(spec.draft_layers == 0 || mtp_, "{}: the MTP layer's weights were not loaded", spec.family);
    const ExpertLayout layout{spec.n_layers + spec.draft_layers, spec.n_experts, spec.top_k,
                              std::move(expert_tensors)};
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
    check(n > 0, "no input tokens");
    check(state.n_past + n <= max_ctx_, "context full: {} + {} tokens exceed the context of {}", state.n_past,
          n, max_ctx_);
    const Segment one{0, n, state.n_past, 0};
    ModelState* const states[] = {&state};
    Tensor h = ops_.embedding(embed_, ids);              // [n, d_model]
    h = layers_forward(h, ids, Batch(&one, 1), states);  // [n, d_model]
    if (mtp_) {
        state.hidden = h;
        state.hidden_pos0 = state.n_past;
    }
    if (!all_logits) h = ops_.slice_rows(h, n - 1, 1);  // [1, d_model]
    Tensor x = ops_.rms_norm(h, final_norm_, rms_eps_);
    state.n_past += n;
    return ops_.matmul(lm_head_, x);  // [n or 1, vocab]
}

Tensor Decoder::forward_batch(std::span<const SequenceStep> steps) {
    check(!steps.empty(), "an empty batch");
    std::vector<Segment> segments;
    std::vector<ModelState*> states;
    std::vector<int32_t> ids;         // every sequence's tokens, stacked
    std::vector<int64_t> logit_rows;  // of each sequence's last rows
    for (const SequenceStep& s : steps) {
        const auto n = static_cast<int64_t>(s.ids.size());
        check(n > 0 && s.state, "a batch entry without tokens or state");
        check(s.state->n_past + n <= max_ctx_, "context full: {} + {} tokens exceed the context of {}",
              s.state->n_past, n, max_ctx_);
        for (ModelState* other : states) check(other != s.state, "one state twice in a batch");
        check(s.logit_rows >= 1 && s.logit_rows <= n,
              "a batch entry asks for the logits of {} of its {} rows", s.logit_rows, n);
        segments.push_back(
            {static_cast<int64_t>(ids.size()), n, s.state->n_past, static_cast<int>(states.size())});
        logit_rows.push_back(s.logit_rows);
        states.push_back(s.state);
        ids.insert(ids.end(), s.ids.begin(), s.ids.end());
    }
    Tensor h = ops_.embedding(embed_, ids);        // [rows, d_model]
    h = layers_forward(h, ids, segments, states);  // [rows, d_model]
    if (mtp_)
        for (const Segment& g : segments) {
            states[g.seq]->hidden = ops_.slice_rows(h, g.row0, g.rows);
            states[g.seq]->hidden_pos0 = g.pos0;
        }
    h = segment_last_rows(ops_, segments, h, logit_rows);  // [sum of logit_rows, d_model]
    Tensor x = ops_.rms_norm(h, final_norm_, rms_eps_);
    for (const SequenceStep& s : steps) s.state->n_past += static_cast<int64_t>(s.ids.size());
    return ops_.matmul(lm_head_, x);  // [sum of logit_rows, vocab]
}

Tensor Decoder::draft(std::span<const DraftStep> steps) {
    check(mtp_.has_value(), "{}: no multi-token-prediction layer is loaded", summary_.family);
    check(!steps.empty(), "an empty draft batch");
    std::vector<Segment> segments;
    std::vector<ModelState*> states;
    std::vector<Tensor> hidden;  // each sequence's rows of the main model it pairs
    std::vector<int32_t> next;   // the tokens that followed them, stacked
    for (const DraftStep& s : steps) {
        const auto n = static_cast<int64_t>(s.next.size());
        check(s.state && n > 0 && n <= s.state->hidden.rows(),
              "draft: {} tokens for the {} rows of the last "
              "forward",
              n, s.state ? s.state->hidden.rows() : 0);
        for (ModelState* other : states) check(other != s.state, "one state twice in a draft batch");
        segments.push_back(
            {static_cast<int64_t>(next.size()), n, s.state->hidden_pos0, static_cast<int>(states.size())});
        states.push_back(s.state);
        hidden.push_back(ops_.slice_rows(s.state->hidden, 0, n));
        next.insert(next.end(), s.next.begin(), s.next.end());
    }
    Tensor h = ops_.concat_rows(hidden);                                           // [rows, d_model]
    Tensor x = mtp_input(ops_, *mtp_, ops_.embedding(embed_, next), h, rms_eps_);  // [rows, d_model]
    x = draft_layer_forward(x, segments, states);                                  // [rows, d_model]
    const std::vector<int64_t> last(steps.size(), 1);
    x = ops_.rms_norm(segment_last_rows(ops_, segments, x, last), mtp_->head_norm, rms_eps_);  // [steps, d]
    return ops_.matmul(lm_head_, x);  // [steps, vocab]
}

Tensor Decoder::draft_layer_forward(Tensor, Batch, std::span<ModelState* const>) {
    throw Error(summary_.family + ": no multi-token-prediction layer");
}

}  // namespace coli
