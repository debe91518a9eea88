#include "server/worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"

namespace coli::server {

namespace {

// How often the running generation copies the engine's counters for /metrics and the status page.
constexpr std::chrono::milliseconds kSnapshotInterval{250};

// Guards the tok/s of a generation too short to time.
constexpr double kMinSeconds = 1e-9;

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

Worker::Worker(Engine& engine, Metrics& metrics, size_t queue_limit, const PrefixCacheOptions& prefix_cache)
    : engine_(engine), metrics_(metrics), queue_limit_(queue_limit), seeds_(std::random_device{}()) {
    try {
        conversation_ = std::make_unique<Conversation>(engine.model(), engine.checkpoint(), true);
        chat_supported_ = true;
    } catch (const Error& e) {
        log_warn("no chat template ({}): /v1/chat/completions and /v1/messages will answer 400", e.what());
        conversation_ = std::make_unique<Conversation>(engine.model(), engine.checkpoint(), false);
    }
    if (prefix_cache.ram_bytes > 0) conversation_->prefix_cache_open(prefix_cache, engine);
    engine_snapshot();
    thread_ = std::thread([this] { loop(); });
}

Worker::~Worker() {
    stop();
}

bool Worker::submit(std::shared_ptr<Job> job) {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= queue_limit_) return false;
    queue_.push_back(std::move(job));
    metrics_.queue_set(queue_.size(), running_ != nullptr);
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
        if (running_) running_->cancel();
        dropped.swap(queue_);
        cv_.notify_all();
    }
    for (auto& job : dropped) job->fail(kShuttingDown);
    if (thread_.joinable()) thread_.join();
}

void Worker::loop() {
    for (;;) {
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            running_ = std::move(queue_.front());
            queue_.pop_front();
            metrics_.queue_set(queue_.size(), true);
        }
        job_run(*running_);
        engine_snapshot();
        std::lock_guard lock(mu_);
        running_.reset();
        metrics_.queue_set(queue_.size(), false);
    }
}

void Worker::job_run(Job& job) {
    const GenerationRequest& r = job.request();
    const bool chat = r.api != ApiKind::completion;
    const int64_t max_ctx = engine_.model().summary().max_ctx;
    std::vector<int32_t> ids;
    try {
        if (chat && !chat_supported_)
            return job.fail({ErrorKind::invalid_request,
                             "this model has no chat template: use /v1/completions", "messages",
                             "chat_unsupported"});
        ids = chat ? conversation_->chat_ids(r.messages) : conversation_->prompt_ids(r.prompt);
    } catch (const Error& e) {
        return job.fail({ErrorKind::invalid_request, e.what(), chat ? "messages" : "prompt", ""});
    }
    const int64_t prompt = static_cast<int64_t>(ids.size());
    if (prompt == 0)
        return job.fail(
            {ErrorKind::invalid_request, "the prompt is empty", chat ? "messages" : "prompt", ""});
    if (prompt >= max_ctx)
        return job.fail({ErrorKind::invalid_request,
                         fmt::format("the prompt is {} tokens, the model's context is {}", prompt, max_ctx),
                         chat ? "messages" : "prompt", "context_length_exceeded"});
    const int64_t max_tokens = r.max_tokens ? *r.max_tokens : max_ctx - prompt;
    if (prompt + max_tokens > max_ctx)
        return job.fail(
            {ErrorKind::invalid_request,
             fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceed the model's context of "
                         "{} tokens",
                         prompt, max_tokens, max_ctx),
             "max_tokens", "context_length_exceeded"});

    SamplerOptions sampling = r.sampler;
    if (!r.seed_given) sampling.seed = seeds_();
    const GenerateOptions opts{
        static_cast<int>(max_tokens), r.stop, r.ignore_eos,
        chat && conversation_->prefix_cache() ? conversation_->chat_system_tokens(r.messages, ids) : 0};
    job.start(prompt);
    metrics_.generation_start(prompt);
    auto last_snapshot = std::chrono::steady_clock::now();
    try {
        Sampler sampler(sampling);
        const GenerateResult result =
            conversation_->generate(ids, chat, opts, sampler, [&](const std::string& piece) {
                metrics_.token_count();
                if (!piece.empty()) job.text_push(piece);
                if (const auto now = std::chrono::steady_clock::now();
                    now - last_snapshot >= kSnapshotInterval) {
                    engine_snapshot();
                    last_snapshot = now;
                }
                return !job.cancelled();
            });
        const bool cancelled = result.finish == FinishReason::cancelled;
        metrics_.generation_end(result.completion_tokens, result.cached_tokens, cancelled);
        const GenerationStats& g = conversation_->session().last_stats();
        log_info("{}: {} tokens after a prompt of {} ({} reused from the cache), decode {:.1f} tok/s, {}",
                 api_name(r.api), result.completion_tokens, result.prompt_tokens, result.cached_tokens,
                 g.decode_tokens / std::max(g.decode_seconds, kMinSeconds), finish_name(result.finish));
        engine_snapshot();  // /metrics counts this request by the time its client has the answer
        job.finish(result);
    } catch (const std::exception& e) {
        // The conversation dropped its cache; the next request starts clean.
        metrics_.generation_end(0, 0, false);
        log_warn("generation failed: {}", e.what());
        job.fail({ErrorKind::internal, fmt::format("generation failed: {}", e.what()), "", "engine_error"});
    }
}

void Worker::engine_snapshot() {
    const PrefixCache* prefix = conversation_->prefix_cache();
    metrics_.engine_set({engine_.ops().counters(), engine_.model().store().stats(),
                         engine_.ops().backend().stats(), prefix ? prefix->stats() : PrefixCacheStats{}});
}

}  // namespace coli::server
