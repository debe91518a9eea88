#include "server/http_threads.h"

namespace coli::server {

HttpThreads::HttpThreads(size_t max_threads) : max_threads_(max_threads) {}

HttpThreads::~HttpThreads() {
    shutdown();
}

void HttpThreads::enqueue(std::function<void()> job) {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
    // Every queued job beyond the idle threads gets a thread of its own, up to the limit.
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { run(); });
    work_.notify_one();
}

void HttpThreads::shutdown() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        threads.swap(threads_);
    }
    work_.notify_all();
    for (std::thread& t : threads) t.join();
}

void HttpThreads::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        ++idle_;
        work_.wait(lock, [this] { return !jobs_.empty() || stopping_; });
        --idle_;
        if (jobs_.empty()) return;  // stopping, and nothing left to serve
        std::function<void()> job = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        job();
        lock.lock();
    }
}

}  // namespace coli::server
