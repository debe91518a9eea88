// A conversation with a model: its state (caches) and the generation loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "models/model.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "runtime/state_snapshot.h"

namespace coli {

// Timings of one generate() call.
struct GenerationStats {
    int64_t prompt_tokens = 0;
    double prompt_seconds = 0;
    uint64_t prompt_expert_bytes = 0;  // routed-expert bytes the store read (or mapped in) for the prompt
    int64_t decode_tokens = 0;         // generated tokens after the first
    double decode_seconds = 0;
    DraftStats drafts;  // speculative decoding's drafts (none when it is off)
};

class Session {
public:
    explicit Session(Model& model);

    // Runs ids through the model and returns the logits on the host: [n, vocab] when all_logits,
    // else [vocab] for the last position.
    std::vector<float> forward(std::span<const int32_t> ids, bool all_logits);

    // Feeds the prompt, then samples up to max_tokens tokens, stopping after a stop id; speculatively where
    // speculate() is on (the same tokens under greedy decoding, the same distribution when sampling, and
    // the state left as plain decoding leaves it). on_prefilled is
    // called once the prompt is in the state, before the first token is chosen (the prefix cache copies
    // the state there); on_token sees each token as it is chosen and may return false to stop. Returns the
    // generated ids.
    std::vector<int32_t> generate(std::span<const int32_t> prompt, int max_tokens, Sampler& sampler,
                                  std::span<const int32_t> stop_ids,
                                  const std::function<bool(int32_t)>& on_token = {},
                                  const std::function<void()>& on_prefilled = {});

    // Speculative decoding with the model's draft head: on by default where the model drafts
    // (LoadOptions::draft); `coli bench` turns it off to compare.
    void speculate(bool on);
    bool speculates() const { return speculate_; }

    void reset();                          // forget the conversation (a new state when next used)
    StateSnapshot snapshot();              // the state as it is now, on the host
    void restore(const StateSnapshot& s);  // a fresh state holding s (throws when s does not fit)
    int64_t n_past() const { return stale_ ? 0 : state_->n_past; }
    ModelState& state();  // the state, a new one after reset()
    const GenerationStats& last_stats() const { return stats_; }
    Model& model() { return model_; }

private:
    // generate()'s loop with drafts: each step checks the draft head's guess d beside the last token x in
    // one pass over [x, d] and keeps d by the exact rule (runtime/speculative.h); a rejected d's position
    // is dropped from the state. Emits through emit(), which says whether to go on.
    void generate_drafted(std::span<const int32_t> prompt, std::span<const float> logits, Sampler& sampler,
                          const std::function<bool(int32_t)>& emit);

    Model& model_;
    bool speculate_ = false;
    std::unique_ptr<ModelState> state_;
    bool stale_ = false;  // reset() was asked: state_ is replaced when next used, unless restore() fills it
    GenerationStats stats_;
};

// How many tokens of a state that holds `cached` a prompt `ids` can keep: all of them where they are a
// prefix of ids short of its last token (whose logits must be computed), else none: a state with
// recurrent layers cannot be rewound to a shorter prefix.
size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> ids);

// Checks that every id is inside the model's vocabulary; throws coli::Error naming the first that is not.
void ids_check(std::span<const int32_t> ids, int64_t vocab);

// End-of-sequence ids from generation_config.json, else config.json (int or list; absent -> none).
std::vector<int32_t> eos_ids(const Checkpoint& ckpt);

}  // namespace coli
