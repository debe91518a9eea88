// The one thread that runs the model. Requests wait in a bounded queue and are served one at a time,
// each from a clean slate: the conversation keeps only the KV cache of the previous request, and reuses it
// only for the exact token prefix they share, so no request sees another's state.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/conversation.h"
#include "runtime/engine.h"
#include "server/job.h"
#include "server/metrics.h"

namespace coli::server {

class Worker {
public:
    // Loads the tokenizer and chat template of the engine's model, opens the prefix cache when its budget
    // is not 0, and starts the thread.
    Worker(Engine& engine, Metrics& metrics, size_t queue_limit, const PrefixCacheOptions& prefix_cache = {});
    ~Worker();  // stop()

    // Queues a job; false when queue_limit jobs are already waiting or the worker is stopping.
    bool submit(std::shared_ptr<Job> job);

    // Cancels the running job, fails the queued ones (503) and joins the thread. Idempotent.
    void stop();
    bool stopping() const;

    // The model's tokenizer and chat template (null when it has none), for the text endpoints: immutable,
    // so any HTTP thread may use them while this worker generates.
    const text::Tokenizer& tokenizer() const { return conversation_->tokenizer(); }
    const text::ChatTemplate* chat_template() const { return conversation_->chat_template(); }

private:
    void loop();
    void job_run(Job& job);
    void engine_snapshot();  // copies the engine's counters into the metrics (on this thread)

    Engine& engine_;                              // the model and its counters
    Metrics& metrics_;                            // where progress is reported
    const size_t queue_limit_;                    // most jobs waiting
    bool chat_supported_ = false;                 // the model has a chat template
    std::unique_ptr<Conversation> conversation_;  // tokenizer, template, session and its cached prefix
    std::mt19937_64 seeds_;                       // seeds for requests that give none

    mutable std::mutex mu_;                   // guards the queue and the flags below
    std::condition_variable cv_;              // wakes the thread for a job or stop()
    std::deque<std::shared_ptr<Job>> queue_;  // waiting jobs, oldest first; guarded by mu_
    std::shared_ptr<Job> running_;            // the job being generated, guarded by mu_
    bool stopping_ = false;                   // guarded by mu_
    std::mutex stop_mu_;                      // one stop() at a time
    std::thread thread_;                      // runs loop()
};

}  // namespace coli::server
