// `coli serve`: the model behind an OpenAI- and Anthropic-compatible HTTP API, with /metrics and a status
// page. Stops cleanly on SIGINT / SIGTERM.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "server/server.h"
#include "server/worker.h"

namespace coli {
namespace {

struct ServeArgs {
    EngineOptions engine;          // the model and where it runs
    server::ServerOptions server;  // address, key, limits
    double max_body_mb = 8;        // --max-body-mb, converted into server.max_body_bytes
    size_t parallel = 0;           // --parallel; 0: from the memory plan (server::parallel_default)
    PrefixCacheArgs prefix_cache;  // --prefix-cache-gb, --cache-dir, converted into server.prefix_cache
};

constexpr double kBytesPerMB = 1 << 20;

// The signal handler only writes to this pipe; a thread reads it and stops the server (stopping is not
// async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

void on_signal(int) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

bool is_loopback(const std::string& host) {
    return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

void serve(ServeArgs& a) {
    check(a.max_body_mb > 0, "--max-body-mb must be > 0, got {}", a.max_body_mb);
    check(a.server.queue_limit > 0, "--queue must be > 0");
    check(a.server.port >= 0 && a.server.port <= 65535, "--port must be in [0, 65535], got {}",
          a.server.port);
    a.server.max_body_bytes = static_cast<size_t>(a.max_body_mb * kBytesPerMB);
    check(a.server.prefill_chunk >= 1, "--prefill-chunk must be >= 1, got {}", a.server.prefill_chunk);
    a.server.prefix_cache = prefix_cache_options(a.prefix_cache);
    Engine engine(a.engine);
    const ModelSummary& m = engine.model().summary();
    // Without --parallel: as many requests as RAM holds caches for beside the rest of the plan, up to
    // kDefaultParallel.
    MemoryPlan plan = memory_plan(m, static_cast<uint64_t>(a.engine.ram_gb * kBytesPerGB),
                                  server::kDefaultParallel, a.server.prefix_cache.ram_bytes);
    a.server.parallel =
        a.parallel > 0 ? a.parallel : sequences_that_fit(plan, ram_physical(), server::kDefaultParallel);
    plan.sequences = a.server.parallel;
    server::Server server(engine, a.server);
    const int port = server.bind();

    fmt::print(stderr, "model: {} ({}), context {} tokens\nbackend: {}\n", m.family, m.architecture,
               m.max_ctx, engine.backend().description());
    placement_print(engine);
    fmt::print(
        stderr,
        "batching: up to {} requests at once{} (each holds up to {} of cache at full context), prompts "
        "fed in chunks of {} tokens\nmemory plan: {}\n",
        a.server.parallel, a.parallel > 0 ? "" : " (--parallel, from the memory plan)",
        bytes_human(plan.per_sequence), a.server.prefill_chunk, plan.describe());
    if (!is_loopback(a.server.host) && a.server.api_key.empty())
        log_warn("listening on {} without --api-key: anyone who can reach this port can use the model",
                 a.server.host);
    fmt::print(stderr,
               "listening on http://{}:{} (/v1/chat/completions, /v1/completions, /v1/messages, /v1/models, "
               "/tokenize, /detokenize, /apply-template, /metrics, /health; status page at /){}\n",
               a.server.host, port, a.server.api_key.empty() ? "" : "; API key required");

    check(::pipe(g_signal_pipe) == 0, "cannot create a pipe for signal handling");
    std::signal(SIGPIPE, SIG_IGN);  // a client that disconnects is a failed write, not the end of the server
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::thread watcher([&] {
        char byte = 0;
        if (::read(g_signal_pipe[0], &byte, 1) == 1 && byte != 0)
            fmt::print(stderr, "coli serve: stopping (signal received)\n");
        server.stop();
    });
    server.run();
    // The server stopped without a signal (it cannot listen any more): release the watcher.
    const char byte = 0;
    [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
    watcher.join();
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    stats_print(engine);
}

}  // namespace

void cmd_serve_add(CLI::App& app) {
    auto args = std::make_shared<ServeArgs>();
    CLI::App* cmd = app.add_subcommand(
        "serve",
        "Serve a model over HTTP: OpenAI and Anthropic APIs, streaming, /metrics, a status page at /");
    model_flags_add(*cmd, args->engine, false);
    cmd->add_option("--host", args->server.host, "Address to listen on (not loopback: use --api-key)")
        ->capture_default_str();
    cmd->add_option("--port,-p", args->server.port, "Port to listen on (0 = any free port)")
        ->capture_default_str();
    cmd->add_option(
        "--api-key", args->server.api_key,
        "Require this key ('Authorization: Bearer KEY' or 'x-api-key: KEY') on every endpoint but "
        "/health and the status page itself");
    cmd->add_option("--queue", args->server.queue_limit,
                    "Requests that may wait for the model; more are answered 429")
        ->capture_default_str();
    cmd->add_option("--parallel", args->parallel,
                    "Requests generating at once, batched in one forward pass (default: up to " +
                        std::to_string(server::kDefaultParallel) +
                        ", as many as RAM holds caches for at full context)");
    cmd->add_option("--prefill-chunk", args->server.prefill_chunk,
                    "Prompt tokens fed per step at most, in chunks of this size (bounds the others' wait)")
        ->capture_default_str();
    cmd->add_option("--max-body-mb", args->max_body_mb,
                    "Largest request body, MiB; larger ones are answered 413")
        ->capture_default_str();
    cmd->add_option("--model-name", args->server.model_id,
                    "The model's name in the API (default: the model directory's name)");
    prefix_cache_flags_add(*cmd, args->prefix_cache);
    cmd->callback([args] { serve(*args); });
}

}  // namespace coli
