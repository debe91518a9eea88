#include "server/worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "runtime/reply_text.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace coli::server {

namespace {

using Clock = std::chrono::steady_clock;

// How often the running generations copy the engine's counters for /metrics and the status page.
constexpr std::chrono::milliseconds kSnapshotInterval{250};

// Guards the tok/s of a generation too short to time.
constexpr double kMinSeconds = 1e-9;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

const char* api_name(ApiKind api) {
    switch (api) {
        case ApiKind::chat:
            return "chat";
        case ApiKind::completion:
            return "completion";
        case ApiKind::messages:
            return "messages";
    }
    return "?";
}

const char* finish_name(FinishReason f) {
    switch (f) {
        case FinishReason::stop:
            return "stop";
        case FinishReason::length:
            return "length";
        case FinishReason::cancelled:
            return "cancelled (client gone)";
    }
    return "?";
}

}  // namespace

// One place for a request's caches: a state, and the tokens it holds from the slot's last request.
struct Worker::Slot {
    std::unique_ptr<ModelState> state;  // null until first used, or after a failed pass
    std::vector<int32_t> cached;        // the tokens whose cache entries the state holds
    bool busy = false;                  // a sequence runs in it
};

// A request being generated in a slot.
struct Worker::Sequence {
    Sequence(std::shared_ptr<Job> j, Slot* s, std::vector<int32_t> prompt, size_t reuse, int64_t limit,
             Sampler smp, ReplyText text)
        : job(std::move(j)),
          slot(s),
          ids(std::move(prompt)),
          fed(reuse),
          cached(static_cast<int64_t>(reuse)),
          max_tokens(limit),
          sampler(std::move(smp)),
          reply(std::move(text)) {}

    std::shared_ptr<Job> job;
    Slot* slot = nullptr;
    std::vector<int32_t> ids;       // the prompt
    size_t fed = 0;                 // prompt tokens in the slot's state, the reused prefix included
    int64_t cached = 0;             // of those, reused from the slot's last request
    int64_t max_tokens = 0;         // most tokens to generate
    Sampler sampler;                // seeded per request
    ReplyText reply;                // tokens -> text, stops, finish reason
    std::vector<int32_t> out;       // generated tokens
    std::vector<int32_t> input;     // what this step feeds (empty: waits for its turn to feed a chunk)
    int64_t boundary = 0;           // the prefix cache's point of its own in the prompt (system message)
    size_t keep_at = 0;             // this step's chunk ends where the prefix cache keeps the state; 0: not
    bool done = false;              // finished after this step's token
    Clock::time_point first_token;  // when the first token was sampled (decode speed)
    // Speculating (the model drafts): the draft head's guess at the token after out.back(), which the next
    // step checks beside it, and the distribution it was drawn from; -1: none (the next step is plain).
    int32_t draft = -1;
    std::vector<double> draft_q;

    bool prefilling() const { return fed < ids.size(); }
};

// A sequence's draft pass: the tokens that followed its last forward's rows, and whether its guess is
// wanted (a prompt chunk before the last only feeds the draft head's cache).
struct Worker::PendingDraft {
    Sequence* s = nullptr;
    std::vector<int32_t> next;
    bool guess = true;
};

Worker::Worker(Engine& engine, Metrics& metrics, const WorkerOptions& opts)
    : engine_(engine), metrics_(metrics), opts_(opts), seeds_(std::random_device{}()) {
    check(opts.parallel >= 1 && opts.prefill_chunk >= 1, "the worker needs a slot and a chunk size");
    try {
        text_ = std::make_unique<ModelText>(engine.checkpoint(), true);
        chat_supported_ = true;
    } catch (const Error& e) {
        log_warn("no chat template ({}): /v1/chat/completions and /v1/messages will answer 400", e.what());
        text_ = std::make_unique<ModelText>(engine.checkpoint(), false);
    }
    for (size_t i = 0; i < opts.parallel; ++i) slots_.push_back(std::make_unique<Slot>());
    if (opts.prefix_cache.ram_bytes > 0) {
        slots_.front()->state = engine.model().state_new();  // the fingerprint reads a state's layout
        prefix_cache_ = std::make_unique<PrefixCache>(
            opts.prefix_cache, prefix_cache_fingerprint(engine, *slots_.front()->state));
    }
    engine_snapshot();
    thread_ = std::thread([this] { loop(); });
}

Worker::~Worker() {
    stop();
}

bool Worker::submit(std::shared_ptr<Job> job) {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= opts_.queue_limit) return false;
    queue_.push_back(std::move(job));
    metrics_.queue_set(queue_.size(), running_.size());
    cv_.notify_all();
    return true;
}

bool Worker::stopping() const {
    std::lock_guard lock(mu_);
    return stopping_;
}

void Worker::stop() {
    std::lock_guard stop_lock(stop_mu_);
    std::deque<std::shared_ptr<Job>> dropped;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        for (auto& job : running_) job->cancel();
        dropped.swap(queue_);
        cv_.notify_all();
    }
    for (auto& job : dropped) job->fail(kShuttingDown);
    if (thread_.joinable()) thread_.join();
}

void Worker::loop() {
    auto last_snapshot = Clock::now();
    for (;;) {
        std::vector<std::shared_ptr<Job>> joining;
        bool stop = false;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !sequences_.empty(); });
            stop = stopping_;
            while (!stop && !queue_.empty() && sequences_.size() + joining.size() < opts_.parallel) {
                joining.push_back(std::move(queue_.front()));
                queue_.pop_front();
            }
            metrics_.queue_set(queue_.size(), sequences_.size() + joining.size());
        }
        if (stop) {
            // stop() cancelled every running job: each ends as a cancelled generation.
            for (auto& s : sequences_) finish(*s);
            sequences_.clear();
            return;
        }
        for (auto& job : joining) admit(std::move(job));
        if (sequences_.empty()) continue;
        try {
            step();
        } catch (const std::exception& e) {
            fail_all(e.what());
        }
        {
            std::lock_guard lock(mu_);
            metrics_.queue_set(queue_.size(), sequences_.size());
        }
        if (Clock::now() - last_snapshot >= kSnapshotInterval) {
            engine_snapshot();
            last_snapshot = Clock::now();
        }
    }
}

bool Worker::admit(std::shared_ptr<Job> job) {
    const GenerationRequest& r = job->request();
    const bool chat = r.api != ApiKind::completion;
    const int64_t max_ctx = engine_.model().summary().max_ctx;
    const char* param = chat ? "messages" : "prompt";
    std::vector<int32_t> ids;
    try {
        if (chat && !chat_supported_) {
            job->fail({ErrorKind::invalid_request, "this model has no chat template: use /v1/completions",
                       "messages", "chat_unsupported"});
            return false;
        }
        ids = chat ? text_->chat_ids(r.messages) : text_->prompt_ids(r.prompt);
    } catch (const Error& e) {
        job->fail({ErrorKind::invalid_request, e.what(), param, ""});
        return false;
    }
    const int64_t prompt = static_cast<int64_t>(ids.size());
    if (prompt == 0) {
        job->fail({ErrorKind::invalid_request, "the prompt is empty", param, ""});
        return false;
    }
    if (prompt >= max_ctx) {
        job->fail({ErrorKind::invalid_request,
                   fmt::format("the prompt is {} tokens, the model's context is {}", prompt, max_ctx), param,
                   "context_length_exceeded"});
        return false;
    }
    const int64_t max_tokens = r.max_tokens ? *r.max_tokens : max_ctx - prompt;
    if (prompt + max_tokens > max_ctx) {
        job->fail({ErrorKind::invalid_request,
                   fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceed the model's context of "
                               "{} tokens",
                               prompt, max_tokens, max_ctx),
                   "max_tokens", "context_length_exceeded"});
        return false;
    }

    // The free slot whose cache holds the longest prefix of this prompt it can keep (reusable_prefix).
    Slot* slot = nullptr;
    size_t reuse = 0;
    for (auto& candidate : slots_) {
        if (candidate->busy) continue;
        const size_t held = candidate->state ? reusable_prefix(candidate->cached, ids) : 0;
        if (!slot || held > reuse) {
            slot = candidate.get();
            reuse = held;
        }
    }
    check(slot != nullptr, "no free slot for an admitted job");
    // A prefix-cache entry longer than what the slot holds is written into the slot's tensors as they are
    // (a forward reads no row past it before writing it); a slot that then holds nothing starts over.
    bool fresh = false;
    if (prefix_cache_ && !slot->state) {
        slot->state = engine_.model().state_new();
        fresh = true;
    }
    if (prefix_cache_)
        reuse = static_cast<size_t>(
            prefix_cache_->restore(engine_.ops(), *slot->state, ids, static_cast<int64_t>(reuse)));
    if (reuse == 0) {
        if (!fresh) slot->state = engine_.model().state_new();
        slot->cached.clear();
    }
    slot->busy = true;
    const int64_t boundary = prefix_cache_ && chat ? text_->chat_system_tokens(r.messages, ids) : 0;

    SamplerOptions sampling = r.sampler;
    if (!r.seed_given) sampling.seed = seeds_();
    Job* j = job.get();
    auto on_text = [j](const std::string& piece) {
        if (!piece.empty()) j->text_push(piece);
        return !j->cancelled();
    };
    sequences_.push_back(std::make_unique<Sequence>(
        job, slot, std::move(ids), reuse, max_tokens, Sampler(sampling),
        ReplyText(text_->tokenizer(), text_->end_ids(chat, r.ignore_eos), r.stop, on_text)));
    sequences_.back()->boundary = boundary;
    {
        std::lock_guard lock(mu_);
        running_.push_back(job);
    }
    job->start(prompt);
    metrics_.generation_start(prompt, seconds_since(job->queued_at()));
    return true;
}

void Worker::step() {
    // Every decoding sequence feeds its last token; prefilling ones, oldest first, feed their next chunk
    // while the step's prompt tokens stay within prefill_chunk (the oldest always does). A sequence's chunks
    // are cut at the same places whatever runs beside it.
    std::vector<SequenceStep> batch;
    std::vector<Sequence*> members;
    int64_t prompt_rows = 0, rows = 0;
    for (auto& s : sequences_) {
        s->input.clear();
        if (s->job->cancelled()) {
            s->done = true;
            continue;
        }
        if (!s->prefilling()) {
            s->input = {s->out.back()};
            if (s->draft >= 0) s->input.push_back(s->draft);
        } else {
            auto n = static_cast<int64_t>(
                std::min<size_t>(s->ids.size() - s->fed, static_cast<size_t>(opts_.prefill_chunk)));
            // A chunk ends where the prefix cache keeps the state (the system message's end, say).
            s->keep_at = prefix_cache_ ? static_cast<size_t>(prefix_cache_->next_keep(
                                             s->ids, static_cast<int64_t>(s->fed), s->boundary))
                                       : 0;
            if (s->keep_at > 0) n = std::min(n, static_cast<int64_t>(s->keep_at - s->fed));
            if (prompt_rows > 0 && prompt_rows + n > opts_.prefill_chunk) continue;
            s->input.assign(s->ids.begin() + s->fed, s->ids.begin() + s->fed + n);
            prompt_rows += n;
        }
        const int64_t logit_rows = s->prefilling() ? 1 : static_cast<int64_t>(s->input.size());
        batch.push_back({s->input, s->slot->state.get(), logit_rows});
        members.push_back(s.get());
        rows += static_cast<int64_t>(s->input.size());
    }
    if (!batch.empty()) {
        const auto start = Clock::now();
        const std::vector<float> logits = engine_.ops().read(engine_.model().forward_batch(batch));
        const auto vocab = static_cast<size_t>(engine_.model().summary().vocab);
        const bool drafting = engine_.model().drafts();
        std::vector<PendingDraft> drafts;  // run together after the tokens are taken
        int64_t sampled = 0;
        size_t row = 0;  // the member's first row of logits
        for (size_t i = 0; i < members.size(); ++i) {
            Sequence& s = *members[i];
            const auto logits_at = [&, first = row](size_t k) {
                return std::span<const float>(logits).subspan((first + k) * vocab, vocab);
            };
            row += static_cast<size_t>(batch[i].logit_rows);
            if (s.prefilling()) {
                const size_t chunk = s.fed;  // the chunk's first prompt position
                s.fed += s.input.size();
                // The state at a kept point or at the prompt's end, before the first token.
                if (prefix_cache_ && (s.fed == s.keep_at || !s.prefilling()))
                    prefix_cache_->insert(engine_.ops(), *s.slot->state, std::span(s.ids).first(s.fed));
                if (s.prefilling()) {  // more chunks to come: these logits are not the last row's
                    // The draft head's cache follows the prompt: each row with the prompt token after it.
                    if (drafting)
                        drafts.push_back({&s,
                                          {s.ids.begin() + static_cast<std::ptrdiff_t>(chunk) + 1,
                                           s.ids.begin() + static_cast<std::ptrdiff_t>(s.fed) + 1},
                                          false});
                    continue;
                }
                take(s, s.sampler.sample(logits_at(0)));
                ++sampled;
                std::vector<int32_t> next(s.ids.begin() + static_cast<std::ptrdiff_t>(chunk) + 1,
                                          s.ids.end());
                next.push_back(s.out.back());
                if (drafting) draft_queue(drafts, s, std::move(next));
            } else if (s.input.size() == 2) {  // a draft checked beside the last token
                const DraftCheck c = draft_check(logits_at(0), logits_at(1), s.draft_q, s.draft, s.sampler);
                metrics_.draft_count(c.accepted);
                const bool go_on = draft_check_take(c, *s.slot->state, [&](int32_t t) {
                    take(s, t);
                    ++sampled;
                    return !s.done;
                });
                if (go_on) draft_queue(drafts, s, c.tokens);
            } else {
                take(s, s.sampler.sample(logits_at(0)));
                ++sampled;
                if (drafting) draft_queue(drafts, s, {s.out.back()});
            }
        }
        if (!drafts.empty()) drafts_run(drafts);
        metrics_.step_count(members.size(), rows, sampled, seconds_since(start));
    }
    for (auto& s : sequences_)
        if (s->done) finish(*s);
    std::erase_if(sequences_, [](const std::unique_ptr<Sequence>& s) { return s->done; });
}

void Worker::take(Sequence& s, int32_t token) {
    if (s.out.empty()) s.first_token = Clock::now();
    s.out.push_back(token);
    metrics_.token_count();
    const bool go_on = s.reply.push(token);
    if (!go_on || static_cast<int64_t>(s.out.size()) >= s.max_tokens) s.done = true;
}

void Worker::draft_queue(std::vector<PendingDraft>& drafts, Sequence& s, std::vector<int32_t> next) {
    s.draft = -1;
    // The check feeds two tokens: none where they would not fit the context, nor after the last token.
    if (s.done || s.slot->state->n_past + 2 > engine_.model().summary().max_ctx) return;
    drafts.push_back({&s, std::move(next), true});
}

void Worker::drafts_run(std::vector<PendingDraft>& drafts) {
    std::vector<DraftStep> steps;
    for (const PendingDraft& d : drafts) steps.push_back({d.next, d.s->slot->state.get()});
    const std::vector<float> logits = engine_.ops().read(engine_.model().draft(steps));  // [drafts, vocab]
    const auto vocab = logits.size() / drafts.size();
    for (size_t i = 0; i < drafts.size(); ++i) {
        if (!drafts[i].guess) continue;
        Sequence& s = *drafts[i].s;
        s.draft_q = s.sampler.probabilities(std::span(logits).subspan(i * vocab, vocab));
        s.draft = s.sampler.draw(s.draft_q);
    }
}

void Worker::finish(Sequence& s) {
    s.done = true;
    GenerateResult result;
    result.prompt_tokens = static_cast<int64_t>(s.ids.size());
    result.cached_tokens = s.cached;
    s.reply.finish(result);
    // A job cancelled before its first token generated nothing: it ends as cancelled all the same.
    if (s.job->cancelled() && result.finish == FinishReason::length) result.finish = FinishReason::cancelled;
    // What the slot's state now holds: the prompt tokens fed, then every generated token but the last
    // (sampled, never fed).
    Slot& slot = *s.slot;
    slot.cached.assign(s.ids.begin(), s.ids.begin() + static_cast<std::ptrdiff_t>(s.fed));
    if (!s.prefilling() && !s.out.empty())
        slot.cached.insert(slot.cached.end(), s.out.begin(), s.out.end() - 1);
    slot.busy = false;
    const bool cancelled = result.finish == FinishReason::cancelled;
    metrics_.generation_end(result.cached_tokens, cancelled);
    const double decode_seconds = s.out.size() > 1 ? seconds_since(s.first_token) : 0;
    log_info(
        "{}: {} tokens after a prompt of {} ({} reused from the cache), decode {:.1f} tok/s, {}",
        api_name(s.job->request().api), result.completion_tokens, result.prompt_tokens, result.cached_tokens,
        static_cast<double>(s.out.size() > 1 ? s.out.size() - 1 : 0) / std::max(decode_seconds, kMinSeconds),
        finish_name(result.finish));
    engine_snapshot();  // /metrics counts this request by the time its client has the answer
    s.job->finish(std::move(result));
    std::lock_guard lock(mu_);
    std::erase(running_, s.job);
}

void Worker::fail_all(const std::string& why) {
    log_warn("generation failed: {}", why);
    for (auto& s : sequences_) {
        // The pass may have written part of this step into the state: it no longer matches its tokens.
        s->slot->state.reset();
        s->slot->cached.clear();
        s->slot->busy = false;
        metrics_.generation_end(0, false);
        s->job->fail({ErrorKind::internal, fmt::format("generation failed: {}", why), "", "engine_error"});
        std::lock_guard lock(mu_);
        std::erase(running_, s->job);
    }
    sequences_.clear();
}

void Worker::engine_snapshot() {
    metrics_.engine_set({engine_.ops().counters(), engine_.model().store().stats(),
                         engine_.ops().backend().stats(),
                         prefix_cache_ ? prefix_cache_->stats() : PrefixCacheStats{}});
}

}  // namespace coli::server
