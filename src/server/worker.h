// The one thread that runs the model, with continuous batching: up to `parallel` requests generate
// together, each in its own slot (caches and recurrent state, nn/batch.h). Every step runs the next tokens
// of all of them in one forward pass, so an expert that several of them route to is read and run once; a
// new request joins at the next step and a finished one leaves. Joining prompts are fed in chunks of at
// most `prefill_chunk` tokens, at most that many prompt tokens per step, so the others wait at most one
// chunk's time between tokens.
// With a model that drafts (--speculate), a decoding request's step feeds its last token and the draft
// head's guess after it, and keeps the guess by the exact rule (runtime/speculative.h).
// Each request's tokens are those it gets served alone (greedy: identical; docs/design.md rule 2). A slot
// keeps the cache of its last request and reuses it only for the exact token prefix a new one shares, so
// no request sees another's state.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "runtime/model_text.h"
#include "runtime/prefix_cache.h"
#include "server/job.h"
#include "server/metrics.h"

namespace coli::server {

struct WorkerOptions {
    size_t queue_limit = 16;      // most jobs waiting
    size_t parallel = 1;          // most jobs generating at once
    int64_t prefill_chunk = 256;  // most prompt tokens fed per step (a job's chunks are this long at most)
    PrefixCacheOptions prefix_cache;  // states of shared prompt prefixes kept across requests (off: budget 0)
};

// Requests that generate at once when --parallel is not given: as many as this, or fewer where the memory
// left beside the weights and the expert budget does not hold their caches at full context.
inline constexpr size_t kDefaultParallel = 4;

class Worker {
public:
    // Loads the tokenizer and chat template of the engine's model and starts the thread.
    Worker(Engine& engine, Metrics& metrics, const WorkerOptions& opts);
    ~Worker();  // stop()

    // Queues a job; false when queue_limit jobs are already waiting or the worker is stopping.
    bool submit(std::shared_ptr<Job> job);

    // Cancels the running jobs, fails the queued ones (503) and joins the thread. Idempotent.
    void stop();
    bool stopping() const;

    // The model's tokenizer and chat template (null when it has none), for the text endpoints: immutable,
    // so any HTTP thread may use them while this worker generates.
    const text::Tokenizer& tokenizer() const { return text_->tokenizer(); }
    const text::ChatTemplate* chat_template() const { return text_->chat_template(); }

private:
    struct Slot;
    struct Sequence;

    void loop();
    bool admit(std::shared_ptr<Job> job);   // starts a job in a free slot; false when it failed at once
    void step();                            // one forward pass over every running sequence
    void take(Sequence& s, int32_t token);  // a chosen token: to the reply; done after the last one
    // Speculating: queues s's draft pass (the rows of its last pass, each with the token after it: next)
    // for its guess at the token after next.back(), which the next step checks; none after s's last token
    // or where the check would not fit the context. drafts_run then runs every queued pass in one.
    struct PendingDraft;
    void draft_queue(std::vector<PendingDraft>& drafts, Sequence& s, std::vector<int32_t> next);
    void drafts_run(std::vector<PendingDraft>& drafts);
    void finish(Sequence& s);
    void fail_all(const std::string& why);  // the pass failed: every running job fails, its slot starts over
    void engine_snapshot();                 // copies the engine's counters into the metrics (on this thread)

    Engine& engine_;                                    // the model and its counters
    Metrics& metrics_;                                  // where progress is reported
    const WorkerOptions opts_;                          // limits
    bool chat_supported_ = false;                       // the model has a chat template
    std::unique_ptr<ModelText> text_;                   // tokenizer, template, end ids
    std::mt19937_64 seeds_;                             // seeds for requests that give none
    std::vector<std::unique_ptr<Slot>> slots_;          // `parallel` of them; states made on first use
    std::vector<std::unique_ptr<Sequence>> sequences_;  // running, oldest first (this thread only)
    std::unique_ptr<PrefixCache> prefix_cache_;         // null when off (this thread only)

    mutable std::mutex mu_;                      // guards the queue, running_ and stopping_
    std::condition_variable cv_;                 // wakes the thread for a job or stop()
    std::deque<std::shared_ptr<Job>> queue_;     // waiting jobs, oldest first; guarded by mu_
    std::vector<std::shared_ptr<Job>> running_;  // the jobs of sequences_, for stop(); guarded by mu_
    bool stopping_ = false;                      // guarded by mu_
    std::mutex stop_mu_;                         // one stop() at a time
    std::thread thread_;                         // runs loop()
};

}  // namespace coli::server
