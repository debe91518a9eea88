// The store's reader threads: jobs run in the order submitted (the store submits them in disk-offset
// order), several at a time so that the disk sees a queue deep enough to reach its bandwidth.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace coli {

class IoQueue {
public:
    using Job = std::function<void()>;  // must not throw

    explicit IoQueue(int n_threads);
    // Lets the jobs that are running finish, drops those still queued, joins the threads.
    ~IoQueue();
    IoQueue(const IoQueue&) = delete;
    IoQueue& operator=(const IoQueue&) = delete;

    void submit(std::vector<Job> jobs);

    // Wall time during which at least one job was running (for reads: time with a read in flight).
    double busy_seconds() const;
    // How long the longest-running job now has been running (for reads: the oldest read in flight, which a
    // stalling disk holds up); 0 when none runs.
    double oldest_running_seconds() const;

private:
    using clock = std::chrono::steady_clock;
    void worker_loop();

    mutable std::mutex mu_;
    std::condition_variable wake_;
    std::deque<Job> queue_;
    bool stop_ = false;
    int running_ = 0;
    clock::time_point busy_since_;                    // when running_ last went from 0 to 1
    clock::duration busy_total_{};                    // closed busy intervals
    std::multiset<clock::time_point> running_since_;  // when each running job started
    std::vector<std::thread> threads_;
};

}  // namespace coli
