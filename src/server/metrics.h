// What the server counts, and the two ways it is read: /metrics (Prometheus text format) and /api/status
// (JSON for the status page). HTTP threads count requests; the worker counts tokens and copies the
// engine's counters (ops, fallbacks, expert store) on its own thread, which is the only one that runs the
// model, so no engine state is read while it changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "backend/ops.h"
#include "runtime/prefix_cache.h"
#include "store/expert_store.h"

namespace coli::server {

// Facts about the served model and the server that do not change while it runs.
struct ServerInfo {
    std::string model_id;         // the name clients use ("model": ...)
    std::string family;           // config.json model_type
    std::string architecture;     // one line: layers, width, heads, experts
    std::string weights;          // stored formats of the weights
    std::string backend;          // where ops run: "cpu", "cuda", ...
    std::string backend_detail;   // the backend's one-line description
    std::string fallback_target;  // where declined ops run ("cpu"), or "" when the backend is the CPU
    uint64_t prefix_budget = 0;   // the prefix cache's RAM budget in bytes; 0 = off
    uint64_t expert_bytes = 0;    // all routed experts on disk
    int64_t max_ctx = 0;          // context length
    size_t queue_limit = 0;       // most requests waiting
};

// The engine's counters as copied by the worker.
struct EngineSnapshot {
    OpCounters ops;                 // per-op native / fallback counts
    StoreStats store;               // expert hits, misses, bytes read, cache
    std::string backend_stats;      // the backend's placement line (device tier), or ""
    PrefixCacheStats prefix_cache;  // states of shared prompt prefixes (all 0 when it is off)
};

class Metrics {
public:
    explicit Metrics(ServerInfo info);

    const ServerInfo& info() const { return info_; }

    // HTTP threads.
    void request_count(const std::string& endpoint, int status);

    // The worker.
    void queue_set(size_t queued, size_t running);
    // A request starts generating after waiting queue_wait seconds in the queue.
    void generation_start(int64_t prompt_tokens, double queue_wait);
    void token_count();  // one more token generated
    // One forward pass: `sequences` requests in the batch, `rows` tokens fed, `sampled` tokens generated.
    void step_count(size_t sequences, int64_t rows, int64_t sampled, double seconds);
    void draft_count(bool accepted);  // speculative decoding: one draft checked, and whether it was kept
    // A request ended; cached_tokens: its prompt tokens whose cache entries were reused (its generated tokens
    // were counted one by one).
    void generation_end(int64_t cached_tokens, bool cancelled);
    void engine_set(EngineSnapshot snapshot);
    // Where /metrics reads, when it is asked, how long the oldest expert read in flight has waited (live,
    // unlike the snapshot, which the worker takes between passes: a read that stalls holds up the pass).
    void read_age_source(std::function<double()> source);

    std::string prometheus_text() const;
    std::string status_json() const;

private:
    using Clock = std::chrono::steady_clock;
    double decode_rate_locked() const;  // tok/s over the last rate window of steps
    std::function<double()> read_age_;  // see read_age_source; set once, before the server listens

    const ServerInfo info_;
    const Clock::time_point started_ = Clock::now();
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) -> count
    size_t queued_ = 0;                                         // requests waiting now
    size_t running_ = 0;                                        // requests generating now
    uint64_t prompt_tokens_ = 0;                                // prompt tokens of all requests
    uint64_t cached_prompt_tokens_ = 0;  // of those, served from the KV cache (prefix reuse)
    uint64_t generated_tokens_ = 0;      // tokens generated, all requests
    uint64_t generations_ = 0;           // requests that generated
    uint64_t cancelled_ = 0;             // of those, stopped because the client went away
    double pass_seconds_ = 0;            // time spent in forward passes
    double queue_wait_seconds_ = 0;      // time requests waited in the queue, all requests
    double last_queue_wait_ = 0;         // the last started request's wait
    uint64_t drafts_ = 0;                // speculative drafts checked
    uint64_t drafts_accepted_ = 0;       // of those, kept
    uint64_t steps_ = 0;                 // forward passes
    uint64_t step_sequences_ = 0;        // requests in them, summed (/ steps_: the mean batch)
    size_t last_batch_ = 0;              // requests in the last pass
    int64_t last_rows_ = 0;              // tokens fed in the last pass
    int64_t window_tokens_ = 0;          // tokens sampled in the current rate window
    double window_seconds_ = 0;          // pass time in the current rate window
    double last_rate_ = 0;               // tok/s of the last full rate window
    EngineSnapshot engine_;              // copied by the worker
};

}  // namespace coli::server
