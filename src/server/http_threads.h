// The threads that serve HTTP connections: started as connections need them, up to a limit, so that idle
// keep-alive connections and slow clients, which each hold a thread, never make a new request wait for
// them (httplib's own pool has a fixed count of threads; a connection beyond them waited for one to free).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace coli::server {

class HttpThreads final : public httplib::TaskQueue {
public:
    explicit HttpThreads(size_t max_threads);
    ~HttpThreads() override;

    // Runs the connection's job on an idle thread, on a new one while fewer than max_threads run, or
    // else on the first thread to finish its connection.
    void enqueue(std::function<void()> job) override;
    // Finishes the queued jobs and joins every thread.
    void shutdown() override;

private:
    void run();  // a thread's loop

    const size_t max_threads_;                // threads never started beyond this many
    std::mutex mu_;                           // guards what follows
    std::condition_variable work_;            // a job was queued, or shutdown
    std::deque<std::function<void()>> jobs_;  // connections waiting for a thread
    std::vector<std::thread> threads_;        // started so far (never more than max_threads_)
    size_t idle_ = 0;                         // threads waiting for a job
    bool stopping_ = false;                   // shutdown() was called
};

}  // namespace coli::server
