#include "store/io_queue.h"

#include <algorithm>

namespace coli {

IoQueue::IoQueue(int n_threads) {
    n_threads = std::max(1, n_threads);
    threads_.reserve(n_threads);
    for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { worker_loop(); });
}

IoQueue::~IoQueue() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        queue_.clear();
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
}

void IoQueue::submit(std::vector<Job> jobs) {
    if (jobs.empty()) return;
    {
        std::lock_guard lock(mu_);
        for (Job& j : jobs) queue_.push_back(std::move(j));
    }
    wake_.notify_all();
}

double IoQueue::busy_seconds() const {
    std::lock_guard lock(mu_);
    clock::duration total = busy_total_;
    if (running_ > 0) total += clock::now() - busy_since_;
    return std::chrono::duration<double>(total).count();
}

double IoQueue::oldest_running_seconds() const {
    std::lock_guard lock(mu_);
    if (running_since_.empty()) return 0;
    return std::chrono::duration<double>(clock::now() - *running_since_.begin()).count();
}

void IoQueue::worker_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        Job job = std::move(queue_.front());
        queue_.pop_front();
        const auto started = running_since_.insert(clock::now());
        if (running_++ == 0) busy_since_ = *started;
        lock.unlock();
        job();
        job = nullptr;  // release what the job captured before taking the lock again
        lock.lock();
        running_since_.erase(started);
        if (--running_ == 0) busy_total_ += clock::now() - busy_since_;
    }
}

}  // namespace coli
