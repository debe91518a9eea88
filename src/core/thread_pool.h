// A fixed pool of worker threads for data-parallel loops (matmul rows, attention heads).
#pragma once

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
    std::mutex mu_;
    std::condition_variable wake_, done_;
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0, job_chunk_ = 0;
    int job_chunks_ = 0;
    int pending_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
};

// The process-wide pool used by the CPU backend; sized by set_default_threads (CLI --threads).
ThreadPool& default_pool();
void set_default_threads(int n_threads);

}  // namespace coli
