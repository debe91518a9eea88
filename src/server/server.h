// `coli serve`: the HTTP server. OpenAI's /v1/models, /v1/chat/completions and /v1/completions,
// Anthropic's /v1/messages, llama.cpp's /tokenize, /detokenize and /apply-template, /health, /metrics
// (Prometheus), and a status page at / that reads /api/status. Generation requests go through one Worker,
// which batches them; every other endpoint answers at once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/engine.h"
#include "runtime/prefix_cache.h"

namespace coli::server {

struct ServerOptions {
    std::string host = "127.0.0.1";   // loopback unless asked otherwise
    int port = 8080;                  // 0: any free port (the startup line says which)
    std::string api_key;              // when set, every endpoint but /health and the page needs it
    size_t queue_limit = 16;          // requests that may wait for the model; more get 429
    size_t parallel = 1;              // requests generating at once (continuous batching)
    int64_t prefill_chunk = 256;      // most prompt tokens a joining request feeds per step
    size_t max_body_bytes = 8 << 20;  // larger request bodies get 413
    std::string model_id;             // the name clients use; "" = the model directory's name
    PrefixCacheOptions prefix_cache;  // states of shared prompt prefixes kept (off by default)
};

class Server {
public:
    Server(Engine& engine, ServerOptions opts);
    ~Server();

    // Binds the socket; returns the port (useful with port 0). Throws coli::Error when it cannot.
    int bind();
    // Serves until stop(); returns after every in-flight request was answered or cancelled.
    void run();
    // Cancels generation, refuses what waits (503) and stops listening. Safe from any thread.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace coli::server
