#include "runtime/session.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"

namespace coli {

Session::Session(Model& model) : model_(model), speculate_(model.drafts()), state_(model.state_new()) {}

void Session::speculate(bool on) {
    check(!on || model_.drafts(), "speculative decoding: the model was loaded without its draft layer");
    speculate_ = on;
}

void Session::reset() {
    stale_ = true;
}

ModelState& Session::state() {
    if (stale_) state_ = model_.state_new();
    stale_ = false;
    return *state_;
}

StateSnapshot Session::snapshot() {
    return state_snapshot(model_.ops(), state());
}

void Session::restore(const StateSnapshot& s) {
    // Into the tensors there are, stale or not: every row the snapshot holds is written, and a forward reads
    // no other row before writing it, so a new state's allocation and zero fill (page faults, mostly) are
    // saved.
    try {
        state_restore(model_.ops(), s, *state_);
        stale_ = false;
    } catch (...) {
        reset();  // never a state holding part of a snapshot
        throw;
    }
}

std::vector<float> Session::forward(std::span<const int32_t> ids, bool all_logits) {
    check(!ids.empty(), "no input tokens");
    ids_check(ids, model_.summary().vocab);
    Tensor logits = model_.forward(ids, state(), all_logits);
    return model_.ops().read(logits);
}

std::vector<int32_t> Session::generate(std::span<const int32_t> prompt, int max_tokens, Sampler& sampler,
                                       std::span<const int32_t> stop_ids,
                                       const std::function<bool(int32_t)>& on_token,
                                       const std::function<void()>& on_prefilled) {
    stats_ = {};
    std::vector<int32_t> out;
    if (max_tokens <= 0) return out;
    Timer timer;
    const uint64_t bytes_before = model_.store().stats().bytes_read;
    std::vector<float> logits = forward(prompt, false);
    stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
    stats_.prompt_seconds = timer.seconds();
    stats_.prompt_expert_bytes = model_.store().stats().bytes_read - bytes_before;
    if (on_prefilled) on_prefilled();
    timer.reset();
    // Takes a chosen token; false when generation ends with it.
    const auto emit = [&](int32_t token) {
        out.push_back(token);
        const bool stop = std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
        return !((on_token && !on_token(token)) || stop || static_cast<int>(out.size()) >= max_tokens);
    };
    if (speculate_) {
        generate_drafted(prompt, logits, sampler, emit);
    } else {
        for (int32_t token = sampler.sample(logits); emit(token); token = sampler.sample(logits))
            logits = forward(std::span<const int32_t>(&token, 1), false);
    }
    stats_.decode_tokens = static_cast<int64_t>(out.size()) - 1;
    stats_.decode_seconds = timer.seconds();
    return out;
}

void Session::generate_drafted(std::span<const int32_t> prompt, std::span<const float> logits,
                               Sampler& sampler, const std::function<bool(int32_t)>& emit) {
    ModelState& state = *state_;
    const int64_t max_ctx = model_.summary().max_ctx;
    int32_t x = sampler.sample(logits);  // the last chosen token, not yet in the state
    if (!emit(x)) return;
    // The tokens that followed the last forward's rows: the prompt's own, then x.
    std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
    next.push_back(x);
    for (;;) {
        if (state.n_past + 2 > max_ctx) {  // no room to check a draft: a plain step
            x = sampler.sample(forward(std::span<const int32_t>(&x, 1), false));
            if (!emit(x)) return;
            continue;
        }
        const std::vector<double> q = sampler.probabilities(model_.ops().read(model_.draft(next, state)));
        const int32_t d = sampler.draw(q);
        const int32_t pair[] = {x, d};
        const std::vector<float> rows = forward(pair, true);  // [2, vocab]: after x, after d
        const auto vocab = rows.size() / 2;
        const DraftCheck c =
            draft_check(std::span(rows).first(vocab), std::span(rows).subspan(vocab), q, d, sampler);
        ++stats_.drafts.drafted;
        stats_.drafts.accepted += c.accepted;
        if (!draft_check_take(c, state, emit)) return;
        x = c.tokens.back();
        next = c.tokens;
    }
}

size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> ids) {
    const bool prefix = cached.size() < ids.size() && std::equal(cached.begin(), cached.end(), ids.begin());
    return prefix ? cached.size() : 0;
}

void ids_check(std::span<const int32_t> ids, int64_t vocab) {
    for (int32_t id : ids)
        check(id >= 0 && id < vocab, "token id {} is outside the vocabulary [0, {})", id, vocab);
}

std::vector<int32_t> eos_ids(const Checkpoint& ckpt) {
    for (const nlohmann::json* cfg : {&ckpt.generation_config(), &ckpt.config()}) {
        auto it = cfg->find("eos_token_id");
        if (it == cfg->end() || it->is_null()) continue;
        if (it->is_number_integer()) return {it->get<int32_t>()};
        if (it->is_array()) {
            std::vector<int32_t> ids;
            for (const auto& v : *it)
                if (v.is_number_integer()) ids.push_back(v.get<int32_t>());
            return ids;
        }
    }
    return {};
}

}  // namespace coli
