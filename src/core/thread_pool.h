// A fixed pool of worker threads for data-parallel loops (matmul rows, attention heads).
//
// A decode step makes hundreds of short parallel loops (a few hundred microseconds each), so the handover
// must cost far less than a futex wake-up: between loops the workers, and the caller while it waits for
// them, spin on atomics for a bounded time (kSpinMicros) before they sleep on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace coli {

class ThreadPool {
public:
    // n_threads <= 0 means one per hardware thread.
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Splits [0, n) into contiguous chunks of at least `grain` items and runs fn(begin, end) on each,
    // the caller's thread included; returns when all chunks are done. Not reentrant.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
    void worker_loop(int index);

    std::vector<std::thread> workers_;
    // The current loop: written by the caller before it bumps generation_, read by the workers after they
    // see the bump; unchanged until every worker has answered (pending_ = 0).
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0, job_chunk_ = 0;
    int job_chunks_ = 0;
    std::atomic<uint64_t> generation_{0};  // bumped once per loop
    std::atomic<int> pending_{0};          // workers that have not answered the current loop
    std::atomic<bool> stop_{false};
    // Sleeping is announced, so that a bump or the last answer takes the mutex to wake only when needed.
    std::atomic<int> workers_asleep_{0};
    std::atomic<bool> caller_asleep_{false};
    std::mutex mu_;
    std::condition_variable wake_, done_;
};

// The process-wide pool used by the CPU backend; sized by set_default_threads (CLI --threads).
ThreadPool& default_pool();
void set_default_threads(int n_threads);

}  // namespace coli
