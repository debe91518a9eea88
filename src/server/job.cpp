#include "server/job.h"

namespace coli::server {

void Job::start(int64_t prompt_tokens) {
    std::lock_guard lock(mu_);
    prompt_tokens_ = prompt_tokens;
    state_ = JobState::running;
    cv_.notify_all();
}

void Job::text_push(const std::string& piece) {
    std::lock_guard lock(mu_);
    pending_ += piece;
    cv_.notify_all();
}

void Job::finish(GenerateResult result) {
    std::lock_guard lock(mu_);
    result_ = std::move(result);
    state_ = JobState::finished;
    cv_.notify_all();
}

void Job::fail(ApiError error) {
    std::lock_guard lock(mu_);
    error_ = std::move(error);
    state_ = JobState::failed;
    cv_.notify_all();
}

JobState Job::wait_started() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return state_ != JobState::queued; });
    return state_;
}

JobUpdate Job::take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] {
        return !pending_.empty() || state_ == JobState::finished || state_ == JobState::failed;
    });
    JobUpdate u{state_, std::move(pending_), prompt_tokens_};
    pending_.clear();
    return u;
}

}  // namespace coli::server
