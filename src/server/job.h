// One generation request on its way through the server: queued by the HTTP thread that received it, run
// by the worker, answered by that HTTP thread. The worker pushes text as it is generated; the HTTP thread
// takes it (streaming) or waits for the end. Either side may be first; all state is behind one mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/conversation.h"
#include "server/api_error.h"
#include "server/request.h"

namespace coli::server {

enum class JobState {
    queued,    // waiting for the worker
    running,   // the prompt was accepted; text is being generated
    finished,  // result() is complete
    failed,    // error() says why; no text was sent
};

// What the HTTP thread takes from a job in one call.
struct JobUpdate {
    JobState state = JobState::queued;  // the state after the text below
    std::string text;                   // text generated since the last take
    int64_t prompt_tokens = 0;          // known once running
};

class Job {
public:
    explicit Job(GenerationRequest request)
        : request_(std::move(request)), queued_at_(std::chrono::steady_clock::now()) {}

    const GenerationRequest& request() const { return request_; }
    std::chrono::steady_clock::time_point queued_at() const { return queued_at_; }  // when it was made

    // Worker side.
    void start(int64_t prompt_tokens);  // the prompt fits: generation begins
    void text_push(const std::string& piece);
    void finish(GenerateResult result);
    void fail(ApiError error);
    bool cancelled() const { return cancelled_.load(); }

    // HTTP side.
    void cancel() { cancelled_.store(true); }  // the client went away: stop generating
    // Waits until the job left the queue (running, finished or failed).
    JobState wait_started();
    // Waits at most `timeout` for new text or a change of state, and takes the text.
    JobUpdate take(std::chrono::milliseconds timeout);
    const GenerateResult& result() const { return result_; }  // after finished
    const ApiError& error() const { return error_; }          // after failed

private:
    GenerationRequest request_;                        // what was asked
    std::chrono::steady_clock::time_point queued_at_;  // made (and queued) at
    std::mutex mu_;                                    // guards everything below but cancelled_
    std::condition_variable cv_;                       // signals text and state changes to the HTTP thread
    JobState state_ = JobState::queued;                // guarded by mu_
    std::string pending_;                              // text not yet taken, guarded by mu_
    int64_t prompt_tokens_ = 0;                        // set by start()
    GenerateResult result_;                            // set by finish()
    ApiError error_;                                   // set by fail()
    std::atomic<bool> cancelled_{false};               // the client went away or the server stops
};

}  // namespace coli::server
