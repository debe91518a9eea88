#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace coli {

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
    const int chunks = static_cast<int>(std::min<int64_t>(size(), max_chunks));
    if (chunks == 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard lock(mu_);
        job_ = &fn;
        job_n_ = n;
        job_chunks_ = chunks;
        job_chunk_ = (n + chunks - 1) / chunks;
        pending_ = chunks - 1;
        ++generation_;
    }
    wake_.notify_all();
    fn(0, std::min(n, job_chunk_));  // chunk 0 runs on the caller
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index >= job_chunks_) continue;
        const auto* fn = job_;
        const int64_t begin = index * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
        lock.unlock();
        if (begin < end) (*fn)(begin, end);
        lock.lock();
        if (--pending_ == 0) done_.notify_all();
    }
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
    static std::unique_ptr<ThreadPool> pool;
    return pool;
}
}  // namespace

ThreadPool& default_pool() {
    auto& p = pool_slot();
    if (!p) p = std::make_unique<ThreadPool>(0);
    return *p;
}

void set_default_threads(int n_threads) {
    pool_slot() = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace coli
