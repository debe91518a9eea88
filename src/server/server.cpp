#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "io/model_path.h"
#include "server/api_error.h"
#include "server/api_format.h"
#include "server/http_threads.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/status_page_html.h"  // generated from status_page.html
#include "server/status_page_js.h"    // generated from status_page.js
#include "server/text_api.h"
#include "server/worker.h"

namespace coli::server {

namespace {

// How long an answer waits for text before it checks that its client is still there (the worker wakes
// it sooner when there is text): the longest a disconnected client's generation goes on.
constexpr std::chrono::milliseconds kStreamPoll{100};
// HTTP threads besides those that requests waiting for the model hold: the running request, requests
// being refused (429) while the queue is full, /health, /metrics, the status page, idle keep-alive
// connections (each holds its thread until the keep-alive timeout, 5 s) and slow clients (each for as
// long as it sends a byte within every read timeout, 5 s). Started only as connections need them
// (HttpThreads); a connection beyond all of them waits for one to free.
constexpr size_t kSpareThreads = 1024;

const char* kJson = "application/json";

// The metrics label of a path.
std::string endpoint_name(const std::string& path) {
    if (path == "/v1/chat/completions") return "chat";
    if (path == "/v1/completions") return "completions";
    if (path == "/v1/messages") return "messages";
    if (path == "/v1/models") return "models";
    if (path == "/health") return "health";
    if (path == "/metrics") return "metrics";
    if (path == "/tokenize") return "tokenize";
    if (path == "/detokenize") return "detokenize";
    if (path == "/apply-template") return "apply_template";
    if (path == "/" || path == "/status.js" || path == "/api/status") return "status";
    return "other";
}

bool is_anthropic(const std::string& path) {
    return path.rfind("/v1/messages", 0) == 0;
}

void error_send(httplib::Response& res, const ApiError& e, bool anthropic) {
    res.status = e.status();
    res.set_content(anthropic ? e.anthropic_body() : e.openai_body(), kJson);
}

// Compares in a time that does not depend on where the strings differ (the key is a secret).
bool key_equal(const std::string& given, const std::string& key) {
    if (given.size() != key.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
    return diff == 0;
}

GenerationRequest request_parse(ApiKind api, const std::string& body, const RequestLimits& limits) {
    switch (api) {
        case ApiKind::chat:
            return chat_request_parse(body, limits);
        case ApiKind::completion:
            return completion_request_parse(body, limits);
        case ApiKind::messages:
            return messages_request_parse(body, limits);
    }
    invalid_request("unknown endpoint");
}

// The methods a known path takes ("GET", "POST"), or "" for a path the server does not have.
std::string methods_of(const std::string& path) {
    static const std::set<std::string> kGet = {"/health",     "/v1/models", "/metrics",
                                               "/api/status", "/",          "/status.js"};
    static const std::set<std::string> kPost = {"/v1/chat/completions", "/v1/completions",
                                                "/v1/messages",         "/tokenize",
                                                "/detokenize",          "/apply-template"};
    if (kGet.count(path)) return "GET";
    if (kPost.count(path)) return "POST";
    return "";
}

}  // namespace

struct Server::Impl {
    Impl(Engine& engine, ServerOptions o)
        : opts(std::move(o)),
          metrics(info_make(engine, opts)),
          worker(engine, metrics, {opts.queue_limit, opts.parallel, opts.prefill_chunk, opts.prefix_cache}),
          limits{engine.model().summary().max_ctx},
          created(static_cast<int64_t>(std::time(nullptr))) {
        metrics.read_age_source([&store = engine.model().store()] { return store.read_in_flight_seconds(); });
        routes_add();
    }

    static ServerInfo info_make(Engine& engine, const ServerOptions& o) {
        const ModelSummary& m = engine.model().summary();
        const std::string backend(engine.ops().backend().name());
        return {.model_id = o.model_id,
                .family = m.family,
                .architecture = m.architecture,
                .weights = m.formats,
                .backend = backend,
                .backend_detail = engine.backend().description(),
                .fallback_target = backend == "cpu" ? "" : "cpu",
                .prefix_budget = o.prefix_cache.ram_bytes,
                .expert_bytes = m.expert_bytes,
                .max_ctx = m.max_ctx,
                .queue_limit = o.queue_limit};
    }

    void routes_add();
    void generate_handle(ApiKind api, const httplib::Request& req, httplib::Response& res);
    void text_routes_add();
    bool authorized(const httplib::Request& req) const;

    ServerOptions opts;      // as given, model_id filled in
    Metrics metrics;         // counters behind /metrics and /api/status
    Worker worker;           // runs the model, up to opts.parallel requests at a time
    RequestLimits limits;    // what the request parsers check against
    int64_t created;         // Unix seconds at start: the model's "created" in /v1/models
    httplib::Server http;    // the listening socket and its threads
    int listen_socket = -1;  // the listening socket, from httplib's socket-options callback
};

bool Server::Impl::authorized(const httplib::Request& req) const {
    if (opts.api_key.empty() || req.path == "/health" || req.path == "/" || req.path == "/status.js")
        return true;
    const std::string bearer = "Bearer ";
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind(bearer, 0) == 0 && key_equal(auth.substr(bearer.size()), opts.api_key)) return true;
    return key_equal(req.get_header_value("x-api-key"), opts.api_key);
}

void Server::Impl::routes_add() {
    http.new_task_queue = [n = opts.queue_limit + opts.parallel + kSpareThreads] {
        return new HttpThreads(n);
    };
    http.set_payload_max_length(opts.max_body_bytes);
    // httplib's default also sets SO_REUSEPORT, which lets a second server bind a port already in use and
    // take half of its connections: only SO_REUSEADDR (a restart need not wait for TIME_WAIT).
    http.set_socket_options([this](socket_t sock) {
        const int on = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        listen_socket = sock;  // the last one called for is the one bound
    });
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
        error_send(res,
                   {ErrorKind::unauthorized,
                    "missing or wrong API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                    "", "invalid_api_key"},
                   is_anthropic(req.path));
        return httplib::Server::HandlerResponse::Handled;
    });
    // Answers httplib gives by itself (unknown path, body over the limit, unreadable request) get a body in
    // the API's error shape; answers that already have one are left alone.
    http.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            ApiError e{ErrorKind::invalid_request,
                       fmt::format("the request could not be read (HTTP {})", res.status), "", ""};
            if (res.status == 404 && !methods_of(req.path).empty()) {
                e = {ErrorKind::wrong_method,
                     fmt::format("{} takes {}, not {}", req.path, methods_of(req.path), req.method), "",
                     "method_not_allowed"};
                res.set_header("Allow", methods_of(req.path));
            } else if (res.status == 404) {
                e = {ErrorKind::not_found, fmt::format("no endpoint {} {}", req.method, req.path), "",
                     "unknown_url"};
            } else if (res.status == 413) {
                e = {ErrorKind::too_large,
                     fmt::format("the request body is larger than the limit of {} bytes (--max-body-mb)",
                                 opts.max_body_bytes),
                     "", "request_too_large"};
            }
            const int status = res.status == 404 || res.status == 413 ? e.status() : res.status;
            error_send(res, e, is_anthropic(req.path));
            res.status = status;
            return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            log_warn("{} {}: {}", req.method, req.path, what);
            error_send(res, {ErrorKind::internal, what, "", "internal_error"}, is_anthropic(req.path));
        });
    // Counted before the response is written (the logger runs after it): a client that reads /metrics
    // right after its answer sees its request counted.
    http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        metrics.request_count(endpoint_name(req.path), res.status);
    });
    // A refused request is logged with the reason its answer gives (error.message of either API's shape).
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
        std::string reason;
        if (res.status >= 400 && res.status < 500) {
            const nlohmann::json body = nlohmann::json::parse(res.body, nullptr, false);
            if (body.is_object() && body.contains("error") && body["error"].is_object() &&
                body["error"].contains("message") && body["error"]["message"].is_string())
                reason = ": " + body["error"]["message"].get<std::string>();
        }
        log_info("{} {} {} {}{}", req.remote_addr, req.method, req.path, res.status, reason);
    });

    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"status":"ok"})", kJson);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(models_body(opts.model_id, created), kJson);
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Get("/api/status", [this](const httplib::Request&, httplib::Response& res) {
        res.set_header("Cache-Control", "no-store");
        res.set_content(metrics.status_json(), kJson);
    });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(kStatusPageHTML, "text/html; charset=utf-8");
    });
    http.Get("/status.js", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(kStatusPageJS, "text/javascript; charset=utf-8");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        generate_handle(ApiKind::chat, req, res);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        generate_handle(ApiKind::completion, req, res);
    });
    http.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
        generate_handle(ApiKind::messages, req, res);
    });
    text_routes_add();
}

// The text endpoints answer on the HTTP thread from the immutable tokenizer and template; bad input is a
// 400 in OpenAI's error shape, as on the other endpoints.
void Server::Impl::text_routes_add() {
    const auto answer = [](httplib::Response& res, const std::function<std::string()>& body) {
        try {
            res.set_content(body(), kJson);
        } catch (const ApiException& e) {
            error_send(res, e.error, false);
        }
    };
    http.Post("/tokenize", [this, answer](const httplib::Request& req, httplib::Response& res) {
        answer(res, [&] { return tokenize_body(worker.tokenizer(), tokenize_request_parse(req.body)); });
    });
    http.Post("/detokenize", [this, answer](const httplib::Request& req, httplib::Response& res) {
        answer(res, [&] {
            const text::Tokenizer& tokenizer = worker.tokenizer();
            return detokenize_body(tokenizer, detokenize_request_parse(req.body, tokenizer.vocab_size()));
        });
    });
    http.Post("/apply-template", [this, answer](const httplib::Request& req, httplib::Response& res) {
        answer(res, [&] {
            const std::vector<text::ChatMessage> messages = apply_template_request_parse(req.body);
            const text::ChatTemplate* tmpl = worker.chat_template();
            if (!tmpl)
                invalid_request("this model has no chat template: there is nothing to apply", "messages",
                                "chat_unsupported");
            return apply_template_body(*tmpl, messages);
        });
    });
}

void Server::Impl::generate_handle(ApiKind api, const httplib::Request& req, httplib::Response& res) {
    const bool anthropic = api == ApiKind::messages;
    GenerationRequest r;
    try {
        r = request_parse(api, req.body, limits);
    } catch (const ApiException& e) {
        return error_send(res, e.error, anthropic);
    }
    if (r.model != opts.model_id)
        return error_send(
            res,
            {ErrorKind::not_found,
             fmt::format("the model '{}' does not exist: this server serves '{}'", r.model, opts.model_id),
             "model", "model_not_found"},
            anthropic);
    std::shared_ptr<const ApiFormat> format = api_format_new(r, opts.model_id);
    const bool stream = r.stream;
    auto job = std::make_shared<Job>(std::move(r));
    if (!worker.submit(job)) {
        if (worker.stopping()) return error_send(res, kShuttingDown, anthropic);
        return error_send(res,
                          {ErrorKind::queue_full,
                           fmt::format("the server is busy: {} requests are already waiting; retry later",
                                       opts.queue_limit),
                           "", "queue_full"},
                          anthropic);
    }
    if (job->wait_started() == JobState::failed) return error_send(res, job->error(), anthropic);
    // From here the status is 200. Both kinds of answer are written by a provider that watches the
    // connection while the worker generates, so that a client that goes away cancels its generation; a
    // non-streaming answer is one JSON body, sent chunked when it is complete.
    if (stream) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        stream ? "text/event-stream" : kJson,
        [job, format, stream](size_t, httplib::DataSink& sink) {
            // A failed write, or a peer that closed its end, means the client is gone: cancel, and the
            // worker stops at its next token.
            const auto send = [&](const std::string& s) {
                if (s.empty() || sink.write(s.data(), s.size())) return true;
                job->cancel();
                return false;
            };
            const auto gone = [&] {
                if (sink.is_writable()) return false;
                job->cancel();
                return true;
            };
            JobUpdate u = job->take(std::chrono::milliseconds(0));
            if (stream && !send(format->stream_begin(u.prompt_tokens))) return false;
            for (;; u = job->take(kStreamPoll)) {
                if (stream && !u.text.empty() && !send(format->stream_text(u.text))) return false;
                if (u.state == JobState::finished || u.state == JobState::failed) break;
                if (gone()) return false;
            }
            // A generation cancelled while its client is still here was cancelled by shutdown.
            const bool finished =
                u.state == JobState::finished && job->result().finish != FinishReason::cancelled;
            const ApiError error = u.state == JobState::failed ? job->error() : kShuttingDown;
            const std::string last =
                finished ? (stream ? format->stream_end(job->result()) : format->body(job->result()))
                         : (stream ? format->stream_error(error) : format->error_body(error));
            if (!send(last)) return false;
            sink.done();
            return true;
        },
        [job](bool success) {
            if (!success) job->cancel();
        });
}

Server::Server(Engine& engine, ServerOptions opts) {
    if (opts.model_id.empty()) opts.model_id = model_display_name(engine.checkpoint().dir());
    impl_ = std::make_unique<Impl>(engine, std::move(opts));
}

Server::~Server() {
    stop();
}

int Server::bind() {
    Impl& s = *impl_;
    const int port = s.opts.port == 0 ? s.http.bind_to_any_port(s.opts.host)
                                      : (s.http.bind_to_port(s.opts.host, s.opts.port) ? s.opts.port : -1);
    check(port > 0, "cannot listen on {}:{}: the port is in use or the address is not one of this machine's",
          s.opts.host, s.opts.port);
    // httplib listens with a backlog of 5 connections not yet accepted: beyond them, a burst of clients
    // (100 connecting at once) waits for the kernel's SYN retries, after 1 s, 3 s, 7 s and so on. Listening
    // again sets the backlog.
    check(::listen(s.listen_socket, SOMAXCONN) == 0, "cannot listen on {}:{}: {}", s.opts.host, port,
          std::strerror(errno));
    return port;
}

void Server::run() {
    impl_->http.listen_after_bind();
}

void Server::stop() {
    impl_->worker.stop();
    impl_->http.stop();
}

}  // namespace coli::server
