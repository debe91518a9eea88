#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace coli {

namespace {

// How long a thread waits by spinning before it sleeps: longer than the host work between two loops of a
// decode step, short enough that an idle pool costs nothing measurable.
constexpr int64_t kSpinMicros = 200;
// Spins between two reads of the clock.
constexpr int kSpinsPerClockRead = 64;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spins until done() or kSpinMicros pass; returns done()'s last value.
template <class Done>
bool spin_until(Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    for (;;) {
        for (int i = 0; i < kSpinsPerClockRead; ++i) {
            if (done()) return true;
            cpu_relax();
        }
        if (std::chrono::steady_clock::now() >= deadline) return done();
    }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mu_);
        stop_.store(true);
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
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    job_chunk_ = (n + chunks - 1) / chunks;
    // Every worker answers, those without a chunk too: the next loop's fields are written only after all
    // of them have read this one's.
    pending_.store(static_cast<int>(workers_.size()));
    generation_.fetch_add(1);  // seq_cst, paired with the sleeper count (worker_loop)
    if (workers_asleep_.load() > 0) {
        std::lock_guard lock(mu_);
        wake_.notify_all();
    }
    fn(0, std::min(n, job_chunk_));  // chunk 0 runs on the caller
    if (!spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock lock(mu_);
        caller_asleep_.store(true);
        done_.wait(lock, [this] { return pending_.load() == 0; });
        caller_asleep_.store(false);
    }
    job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t now = seen;
        const auto moved = [&] {
            now = generation_.load();
            return now != seen || stop_.load(std::memory_order_relaxed);
        };
        if (!spin_until(moved)) {
            std::unique_lock lock(mu_);
            // Announced before the last look at generation_ (both seq_cst): a caller that bumps it after
            // that look sees the announcement and wakes us.
            workers_asleep_.fetch_add(1);
            wake_.wait(lock, moved);
            workers_asleep_.fetch_sub(1);
        }
        if (stop_.load()) return;
        seen = now;
        if (index < job_chunks_) {
            const int64_t begin = index * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
            if (begin < end) (*job_)(begin, end);
        }
        // The last answer wakes a caller that went to sleep; announced and checked as above.
        if (pending_.fetch_sub(1) == 1 && caller_asleep_.load()) {
            std::lock_guard lock(mu_);
            done_.notify_all();
        }
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
