#include "server/metrics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace coli::server {

namespace {

// The generation speed shown is over passes adding up to at least this many seconds.
constexpr double kRateWindowSeconds = 2;

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label_escape(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"')
            out += '\\', out += c;
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

// Writes the # HELP and # TYPE lines of one metric family.
void family_add(std::string& out, const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void sample_add(std::string& out, const char* name, T value, const std::string& labels = {}) {
    out += labels.empty() ? fmt::format("{} {}\n", name, value)
                          : fmt::format("{}{{{}}} {}\n", name, labels, value);
}

template <typename T>
void metric_add(std::string& out, const char* name, const char* type, const char* help, T value) {
    family_add(out, name, type, help);
    sample_add(out, name, value);
}

}  // namespace

Metrics::Metrics(ServerInfo info) : info_(std::move(info)) {}

void Metrics::request_count(const std::string& endpoint, int status) {
    std::lock_guard lock(mu_);
    ++requests_[{endpoint, status}];
}

void Metrics::queue_set(size_t queued, size_t running) {
    std::lock_guard lock(mu_);
    queued_ = queued;
    running_ = running;
}

void Metrics::generation_start(int64_t prompt_tokens, double queue_wait) {
    std::lock_guard lock(mu_);
    prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
    queue_wait_seconds_ += queue_wait;
    last_queue_wait_ = queue_wait;
}

void Metrics::token_count() {
    std::lock_guard lock(mu_);
    ++generated_tokens_;
}

void Metrics::step_count(size_t sequences, int64_t rows, int64_t sampled, double seconds) {
    std::lock_guard lock(mu_);
    ++steps_;
    step_sequences_ += sequences;
    last_batch_ = sequences;
    last_rows_ = rows;
    pass_seconds_ += seconds;
    window_tokens_ += sampled;
    window_seconds_ += seconds;
    if (window_seconds_ >= kRateWindowSeconds) {
        last_rate_ = static_cast<double>(window_tokens_) / window_seconds_;
        window_tokens_ = 0;
        window_seconds_ = 0;
    }
}

void Metrics::draft_count(bool accepted) {
    std::lock_guard lock(mu_);
    ++drafts_;
    drafts_accepted_ += accepted;
}

void Metrics::generation_end(int64_t cached_tokens, bool cancelled) {
    std::lock_guard lock(mu_);
    cached_prompt_tokens_ += static_cast<uint64_t>(cached_tokens);
    ++generations_;
    if (cancelled) ++cancelled_;
}

void Metrics::engine_set(EngineSnapshot snapshot) {
    std::lock_guard lock(mu_);
    engine_ = std::move(snapshot);
}

double Metrics::decode_rate_locked() const {
    // Before the first full window: what the current one has seen.
    if (last_rate_ == 0 && window_seconds_ > 0) return static_cast<double>(window_tokens_) / window_seconds_;
    return last_rate_;
}

void Metrics::read_age_source(std::function<double()> source) {
    read_age_ = std::move(source);
}

std::string Metrics::prometheus_text() const {
    std::lock_guard lock(mu_);
    std::string out;
    family_add(out, "coli_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : requests_)
        sample_add(out, "coli_requests_total", n,
                   fmt::format("endpoint=\"{}\",code=\"{}\"", label_escape(key.first), key.second));
    metric_add(out, "coli_queue_depth", "gauge", "Requests waiting for the model.", queued_);
    metric_add(out, "coli_queue_limit", "gauge", "Most requests that may wait; more are answered 429.",
               info_.queue_limit);
    metric_add(out, "coli_requests_running", "gauge", "Requests generating now (the batch).", running_);
    metric_add(out, "coli_queue_wait_seconds_total", "counter", "Time requests waited in the queue.",
               queue_wait_seconds_);
    metric_add(out, "coli_queue_wait_last_seconds", "gauge", "The last started request's time in the queue.",
               last_queue_wait_);
    metric_add(out, "coli_batch_steps_total", "counter", "Forward passes (each runs every running request).",
               steps_);
    metric_add(out, "coli_batch_sequences_total", "counter",
               "Requests in the forward passes, summed (over coli_batch_steps_total: the mean batch).",
               step_sequences_);
    metric_add(out, "coli_batch_size", "gauge", "Requests in the last forward pass.", last_batch_);
    metric_add(out, "coli_batch_rows", "gauge", "Tokens fed in the last forward pass.", last_rows_);
    metric_add(out, "coli_speculative_drafts_total", "counter",
               "Draft tokens checked (--speculate: the model's multi-token-prediction layer drafts).",
               drafts_);
    metric_add(out, "coli_speculative_accepted_total", "counter",
               "Of the drafts checked, those kept (over coli_speculative_drafts_total: the acceptance rate).",
               drafts_accepted_);
    metric_add(out, "coli_generations_total", "counter", "Requests that generated text.", generations_);
    metric_add(out, "coli_generations_cancelled_total", "counter",
               "Generations stopped because the client disconnected.", cancelled_);
    metric_add(out, "coli_prompt_tokens_total", "counter", "Prompt tokens of all requests.", prompt_tokens_);
    metric_add(
        out, "coli_prompt_tokens_cached_total", "counter",
        "Prompt tokens whose cache entries were reused (the previous request's, or the prefix cache's).",
        cached_prompt_tokens_);
    metric_add(out, "coli_generated_tokens_total", "counter", "Tokens generated.", generated_tokens_);
    metric_add(out, "coli_generation_seconds_total", "counter",
               "Time spent in forward passes (prompts and decoding).", pass_seconds_);
    metric_add(out, "coli_tokens_per_second", "gauge",
               "Tokens generated per second of forward passes, all requests together, over the last few "
               "seconds of passes.",
               decode_rate_locked());

    const StoreStats& s = engine_.store;
    metric_add(out, "coli_expert_hits_total", "counter", "Expert fetches served from the RAM cache.", s.hits);
    metric_add(out, "coli_expert_misses_total", "counter", "Expert fetches that read from disk.", s.misses);
    metric_add(out, "coli_expert_hit_rate", "gauge", "Expert cache hits / fetches since start.",
               s.hit_rate());
    metric_add(out, "coli_expert_bytes_read_total", "counter", "Bytes of experts read from disk.",
               s.bytes_read);
    metric_add(out, "coli_expert_evictions_total", "counter",
               "Experts dropped to stay within the RAM budget.", s.evictions);
    metric_add(out, "coli_expert_cached_bytes", "gauge", "Bytes of experts held in RAM now.", s.cached_bytes);
    metric_add(out, "coli_expert_ram_budget_bytes", "gauge",
               "RAM budget for experts now (0 = unlimited); lowered when an allocation fails.",
               s.budget_bytes);
    metric_add(out, "coli_expert_ram_budget_lowered_total", "counter",
               "Times an allocation for an expert read failed and the RAM budget for experts was lowered.",
               s.budget_lowerings);
    metric_add(out, "coli_expert_pinned", "gauge", "Experts pinned in RAM by the hot set.", s.pinned_experts);
    metric_add(out, "coli_expert_io_stall_seconds_total", "counter",
               "Time the model waited for expert reads.", s.stall_seconds);
    const std::string slow_help =
        fmt::format("Expert reads that took longer than {} s: a stalling disk.", kSlowReadSeconds);
    metric_add(out, "coli_expert_slow_reads_total", "counter", slow_help.c_str(), s.slow_reads);
    metric_add(out, "coli_expert_read_in_flight_seconds", "gauge",
               "How long the oldest expert read still in flight has waited (0: none): a stalling disk shows "
               "here while the read is stuck, before it is counted as slow.",
               read_age_ ? read_age_() : 0.0);

    const PrefixCacheStats& p = engine_.prefix_cache;
    metric_add(out, "coli_prefix_cache_hits_total", "counter",
               "Prompts that restored the state of a cached prefix.", p.hits);
    metric_add(out, "coli_prefix_cache_misses_total", "counter",
               "Prompts that found no cached prefix to restore (prefix cache on).", p.misses);
    metric_add(out, "coli_prefix_cache_reused_tokens_total", "counter",
               "Prompt tokens restored from the prefix cache instead of computed.", p.tokens_reused);
    metric_add(out, "coli_prefix_cache_restored_bytes_total", "counter",
               "Bytes of cached states written back for prompts.", p.bytes_restored);
    metric_add(out, "coli_prefix_cache_entries", "gauge", "Prefix states held now.", p.entries);
    metric_add(out, "coli_prefix_cache_bytes", "gauge", "Bytes of the prefix states held now.", p.bytes_held);
    metric_add(out, "coli_prefix_budget_bytes", "gauge", "RAM budget of the prefix cache (0 = off).",
               info_.prefix_budget);
    metric_add(out, "coli_prefix_cache_evictions_total", "counter",
               "Prefix states dropped to stay within the budget.", p.evictions);
    metric_add(out, "coli_prefix_cache_files_loaded_total", "counter",
               "Prefix states read back from --cache-dir at start.", p.files_loaded);
    metric_add(out, "coli_prefix_cache_files_refused_total", "counter",
               "Files in --cache-dir refused at start (another model or format, damaged).", p.files_refused);

    const OpCounters& c = engine_.ops;
    family_add(out, "coli_ops_total", "counter",
               "Ops run, by op and where: native on the chosen backend, a host step (on the backend with a "
               "read-back and work on the host), or fallback to the CPU.");
    for (size_t i = 0; i < c.native.size(); ++i) {
        const std::string op(op_name(static_cast<OpKind>(i)));
        sample_add(
            out, "coli_ops_total", c.native[i],
            fmt::format("backend=\"{}\",op=\"{}\",placement=\"native\"", label_escape(info_.backend), op));
        sample_add(
            out, "coli_ops_total", c.host_steps[i],
            fmt::format("backend=\"{}\",op=\"{}\",placement=\"host_step\"", label_escape(info_.backend), op));
        sample_add(
            out, "coli_ops_total", c.fallback[i],
            fmt::format("backend=\"{}\",op=\"{}\",placement=\"fallback\"", label_escape(info_.backend), op));
    }
    metric_add(out, "coli_host_steps_total", "counter",
               "Ops the chosen backend ran with a read-back and work on the host (routing).",
               c.total_host_steps());
    metric_add(out, "coli_fallbacks_total", "counter",
               "Ops that ran on the CPU instead of the chosen backend.", c.total_fallbacks());
    metric_add(out, "coli_fallback_faults_total", "counter", "Of the fallbacks, those after a device fault.",
               c.total_faults());
    family_add(out, "coli_fallbacks_by_format_total", "counter", "Fallbacks by op and weight format.");
    for (const auto& [what, n] : c.fallback_by_format)
        sample_add(out, "coli_fallbacks_by_format_total", n, fmt::format("what=\"{}\"", label_escape(what)));
    metric_add(out, "coli_transfer_bytes_total", "counter", "Bytes moved between backends.",
               c.transfer_bytes);
    metric_add(out, "coli_uptime_seconds", "gauge", "Seconds since the server started.",
               std::chrono::duration<double>(Clock::now() - started_).count());
    return out;
}

std::string Metrics::status_json() const {
    std::lock_guard lock(mu_);
    nlohmann::json ops = nlohmann::json::array();
    for (size_t i = 0; i < engine_.ops.native.size(); ++i)
        ops.push_back({{"op", std::string(op_name(static_cast<OpKind>(i)))},
                       {"native", engine_.ops.native[i]},
                       {"host_steps", engine_.ops.host_steps[i]},
                       {"fallback", engine_.ops.fallback[i]},
                       {"faults", engine_.ops.faults[i]}});
    uint64_t requests = 0;
    for (const auto& [key, n] : requests_) requests += n;
    const StoreStats& s = engine_.store;
    const nlohmann::json status = {
        {"model",
         {{"id", info_.model_id},
          {"family", info_.family},
          {"architecture", info_.architecture},
          {"weights", info_.weights},
          {"max_ctx", info_.max_ctx}}},
        {"placement",
         {{"backend", info_.backend},
          {"detail", info_.backend_detail},
          {"fallback_target", info_.fallback_target},
          {"backend_stats", engine_.backend_stats}}},
        {"uptime_seconds", std::chrono::duration<double>(Clock::now() - started_).count()},
        {"requests",
         {{"answered", requests},
          {"queued", queued_},
          {"queue_limit", info_.queue_limit},
          {"running", running_},
          {"queue_wait_last_seconds", last_queue_wait_},
          {"batch_size", last_batch_},
          {"batch_mean", steps_ ? static_cast<double>(step_sequences_) / static_cast<double>(steps_) : 0.0},
          {"generations", generations_},
          {"cancelled", cancelled_}}},
        {"tokens",
         {{"prompt", prompt_tokens_},
          {"prompt_cached", cached_prompt_tokens_},
          {"generated", generated_tokens_},
          {"tokens_per_second", decode_rate_locked()}}},
        {"experts",
         {{"hits", s.hits},
          {"misses", s.misses},
          {"hit_rate", s.hit_rate()},
          {"bytes_read", s.bytes_read},
          {"evictions", s.evictions},
          {"slow_reads", s.slow_reads},
          {"ram_cached_bytes", s.cached_bytes},
          {"ram_budget_bytes", s.budget_bytes},
          {"pinned", s.pinned_experts},
          {"total_bytes", info_.expert_bytes}}},
        {"prefix_cache",
         {{"hits", engine_.prefix_cache.hits},
          {"misses", engine_.prefix_cache.misses},
          {"reused_tokens", engine_.prefix_cache.tokens_reused},
          {"restored_bytes", engine_.prefix_cache.bytes_restored},
          {"entries", engine_.prefix_cache.entries},
          {"bytes", engine_.prefix_cache.bytes_held},
          {"budget_bytes", info_.prefix_budget}}},
        {"ops", ops},
        {"host_steps", engine_.ops.total_host_steps()},
        {"fallbacks",
         {{"total", engine_.ops.total_fallbacks()},
          {"faults", engine_.ops.total_faults()},
          {"by_format", engine_.ops.fallback_by_format},
          {"transfer_bytes", engine_.ops.transfer_bytes}}},
    };
    return status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace coli::server
