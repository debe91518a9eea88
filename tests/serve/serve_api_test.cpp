// `coli serve` over HTTP: error answers and their shapes, the API key, the queue limit, cancellation by a
// disconnecting client, /metrics read by the Prometheus project's own parser, and shutdown on SIGTERM.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/process.h"
#include "serve_process.h"

namespace coli::test {
namespace {

using nlohmann::json;

constexpr const char* kJsonType = "application/json";

// The answer must be an OpenAI error object: {"error": {"message", "type", "param", "code"}}.
void openai_error_expect(const httplib::Result& r, int status, const std::string& code = {}) {
    ASSERT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, status) << r->body;
    const json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.is_object() && body.contains("error")) << r->body;
    const json& e = body["error"];
    ASSERT_TRUE(e.is_object()) << r->body;
    for (const char* key : {"message", "type", "param", "code"})
        EXPECT_TRUE(e.contains(key)) << key << ": " << r->body;
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
    EXPECT_EQ(e["message"].get<std::string>().find('\n'), std::string::npos) << "one line: " << r->body;
    EXPECT_TRUE(e["type"].is_string()) << r->body;
    if (!code.empty()) {
        EXPECT_EQ(e["code"], code) << r->body;
    }
}

// The answer must be an Anthropic error: {"type": "error", "error": {"type", "message"}}.
void anthropic_error_expect(const httplib::Result& r, int status, const std::string& type) {
    ASSERT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, status) << r->body;
    const json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r->body;
    EXPECT_EQ(body.value("type", ""), "error") << r->body;
    ASSERT_TRUE(body.contains("error") && body["error"].is_object()) << r->body;
    EXPECT_EQ(body["error"].value("type", ""), type) << r->body;
    EXPECT_TRUE(body["error"].contains("message")) << r->body;
}

std::string chat_body(const std::string& content, int max_tokens) {
    return json{{"model", kDemoId},
                {"messages", {{{"role", "user"}, {"content", content}}}},
                {"max_tokens", max_tokens},
                {"temperature", 0}}
        .dump();
}

TEST(ServeApi, BadInputGetsOpenAIErrors) {
    ServeProcess server({"--max-body-mb", "1"});
    auto c = server.client();
    const char* chat = "/v1/chat/completions";
    openai_error_expect(c->Post(chat, "{\"model\": ", kJsonType), 400, "invalid_json");
    openai_error_expect(c->Post(chat, "[1, 2]", kJsonType), 400);
    openai_error_expect(c->Post(chat, R"({"model": "demo", "max_tokens": 1e400})", kJsonType), 400,
                        "invalid_json");
    openai_error_expect(c->Post(chat, R"({"model": "demo", "messages": "hello"})", kJsonType), 400);
    openai_error_expect(
        c->Post(chat, R"({"model": 7, "messages": [{"role": "user", "content": "hi"}]})", kJsonType), 400);
    openai_error_expect(
        c->Post(chat,
                R"({"model": "demo", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})",
                kJsonType),
        400);
    openai_error_expect(
        c->Post(chat,
                R"({"model": "demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2.5})",
                kJsonType),
        400);
    openai_error_expect(
        c->Post(chat, R"({"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]})", kJsonType),
        404, "model_not_found");
    // Absurd max_tokens: beyond the context (the documented code), zero, negative, beyond any integer type.
    openai_error_expect(
        c->Post("/v1/completions",
                R"({"model": "demo", "prompt": "In the beginning", "max_tokens": 1000000})", kJsonType),
        400, "context_length_exceeded");
    for (const char* n : {"0", "-5", "99999999999999999999999"})
        openai_error_expect(
            c->Post(
                "/v1/completions",
                std::string(R"({"model": "demo", "prompt": "In the beginning", "max_tokens": )") + n + "}",
                kJsonType),
            400);
    // A prompt longer than the context (512 tokens for the demo model).
    std::string long_prompt;
    for (int i = 0; i < 1000; ++i) long_prompt += "and the earth ";
    openai_error_expect(
        c->Post("/v1/completions", json{{"model", kDemoId}, {"prompt", long_prompt}}.dump(), kJsonType), 400,
        "context_length_exceeded");
    // A prompt that fits, but not with the tokens asked for.
    openai_error_expect(
        c->Post("/v1/chat/completions", chat_body(long_prompt.substr(0, 900), 500), kJsonType), 400,
        "context_length_exceeded");
    // A body over --max-body-mb 1.
    const std::string huge = json{{"model", kDemoId}, {"prompt", std::string(2 << 20, 'a')}}.dump();
    openai_error_expect(c->Post("/v1/completions", huge, kJsonType), 413, "request_too_large");
    anthropic_error_expect(c->Post("/v1/messages", huge, kJsonType), 413, "request_too_large");
    openai_error_expect(c->Get("/v1/no-such-endpoint"), 404);
    // A known path with the wrong method: 405, saying which method it takes.
    const auto get_chat = c->Get(chat);
    openai_error_expect(get_chat, 405, "method_not_allowed");
    ASSERT_TRUE(get_chat);
    EXPECT_EQ(get_chat->get_header_value("Allow"), "POST");
    openai_error_expect(c->Post("/v1/models", "{}", kJsonType), 405, "method_not_allowed");
    // Anthropic's endpoint answers in Anthropic's shape.
    anthropic_error_expect(c->Post("/v1/messages", "not json", kJsonType), 400, "invalid_request_error");
    anthropic_error_expect(
        c->Post("/v1/messages", R"({"model": "demo", "messages": [{"role": "user", "content": "hi"}]})",
                kJsonType),
        400, "invalid_request_error");  // max_tokens is required there
    anthropic_error_expect(
        c->Post("/v1/messages",
                R"({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})",
                kJsonType),
        404, "not_found_error");
    // After all that, the server still serves.
    const auto ok = c->Post(chat, chat_body("In the beginning", 4), kJsonType);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
    // Its log gives each refusal's reason.
    const std::string log = server.err();
    for (const char* reason : {"400: 'max_tokens' is 1000000, more than the model's context",
                               "405: /v1/chat/completions takes POST, not GET", "404: no endpoint GET"})
        EXPECT_NE(log.find(reason), std::string::npos) << reason << " not in the log:\n" << log;
}

TEST(ServeApi, ApiKeyIsRequiredWhenSet) {
    const std::string key = "sk-test-0123456789";
    ServeProcess server({"--api-key", key});
    auto c = server.client();
    const std::string body = chat_body("In the beginning", 3);
    openai_error_expect(c->Post("/v1/chat/completions", body, kJsonType), 401, "invalid_api_key");
    openai_error_expect(c->Post("/v1/chat/completions", {{"Authorization", "Bearer wrong"}}, body, kJsonType),
                        401);
    openai_error_expect(c->Get("/v1/models"), 401);
    openai_error_expect(c->Get("/metrics"), 401);
    openai_error_expect(c->Get("/api/status"), 401);
    anthropic_error_expect(c->Post("/v1/messages", body, kJsonType), 401, "authentication_error");
    const auto bearer =
        c->Post("/v1/chat/completions", {{"Authorization", "Bearer " + key}}, body, kJsonType);
    ASSERT_TRUE(bearer);
    EXPECT_EQ(bearer->status, 200) << bearer->body;
    const auto header = c->Get("/v1/models", {{"x-api-key", key}});
    ASSERT_TRUE(header);
    EXPECT_EQ(header->status, 200) << header->body;
    // Liveness and the page itself (which holds no data) stay open.
    const auto health = c->Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    const auto page = c->Get("/");
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200);
}

TEST(ServeApi, FullQueueAnswers429AndTheRestComplete) {
    ServeProcess server({"--queue", "1", "--parallel", "1"});
    constexpr int kClients = 6;
    constexpr int kLongTokens = 400;  // long enough that the others arrive while it runs
    const std::string body = json{
        {"model", kDemoId},
        {"prompt", "In the beginning"},
        {"max_tokens", kLongTokens},
        {"ignore_eos", true}}.dump();
    std::vector<std::future<httplib::Result>> answers;
    for (int i = 0; i < kClients; ++i)
        answers.push_back(std::async(
            std::launch::async, [&] { return server.client()->Post("/v1/completions", body, kJsonType); }));
    int ok = 0, busy = 0;
    for (auto& f : answers) {
        const httplib::Result r = f.get();
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        if (r->status == 429) {
            openai_error_expect(r, 429, "queue_full");
            ++busy;
        } else {
            ASSERT_EQ(r->status, 200) << r->body;
            const json j = json::parse(r->body);
            EXPECT_EQ(j["usage"]["completion_tokens"], kLongTokens);
            ++ok;
        }
    }
    // One runs and one waits at a time: at least one is served, and some must have been refused.
    EXPECT_GE(ok, 1);
    EXPECT_GE(busy, 1);
    EXPECT_EQ(ok + busy, kClients);
    const auto metrics = server.client()->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metric_value(metrics->body, R"(coli_requests_total{endpoint="completions",code="429"})"), busy);
}

// A budget, so that experts go through the store's reads (where the fault hooks act).
const std::vector<std::string> kReadsFlags = {"--ram-gb", "1"};

// The text a server without fault hooks answers to body, into `text`; `check` then runs on that server.
void fault_free_text(const std::string& body, std::string& text,
                     const std::function<void(ServeProcess&)>& check = {}) {
    ServeProcess clean(kReadsFlags);
    const auto r = clean.client()->Post("/v1/completions", body, kJsonType);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    text = json::parse(r->body)["choices"][0]["text"];
    if (check) check(clean);
}

// A server started with `variable`=`value` (a fault hook of io/ or store/, docs/reliability.md).
std::unique_ptr<ServeProcess> server_with_hook(const char* variable, const char* value) {
    ::setenv(variable, value, 1);
    auto server = std::make_unique<ServeProcess>(kReadsFlags);
    ::unsetenv(variable);
    return server;
}

// The server answers body with status 200 and `text`.
void answer_expect(ServeProcess& server, const std::string& body, const std::string& text) {
    const auto r = server.client()->Post("/v1/completions", body, kJsonType);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], text);
}

// A server with a fault hook beside one without it: the faulty server's first request ends with an
// engine_error whose message holds each of `expect`, and its next gets the fault-free server's text.
void fault_fails_one_request(const char* variable, const char* value,
                             std::initializer_list<const char*> expect) {
    const std::string body = greedy_completion_body(8);
    std::string clean_text;
    ASSERT_NO_FATAL_FAILURE(fault_free_text(body, clean_text));
    const std::unique_ptr<ServeProcess> server = server_with_hook(variable, value);
    const auto failed = server->client()->Post("/v1/completions", body, kJsonType);
    ASSERT_TRUE(failed);
    const json error = json::parse(failed->body, nullptr, false);
    ASSERT_TRUE(error.contains("error")) << failed->body;
    EXPECT_EQ(error["error"]["code"], "engine_error") << failed->body;
    const std::string message = error["error"]["message"];
    for (const char* e : expect) EXPECT_NE(message.find(e), std::string::npos) << message;
    answer_expect(*server, body, clean_text);
}

// A flood far beyond the queue (docs/reliability.md): every request is answered, 200 or 429, and a later
// flood leaves the server's memory where an earlier one did (no state kept per refused or finished request).
TEST(ServeApi, AFloodBeyondTheQueueIsAnsweredAndMemoryStaysFlat) {
    ServeProcess server({"--queue", "2", "--parallel", "2"});
    constexpr int kFlood = 64;
    constexpr uint64_t kRssSlackBytes = 8 << 20;  // allocator noise, not a leak
    const std::string body =
        json{{"model", kDemoId}, {"prompt", "In the beginning"}, {"max_tokens", 8}}.dump();
    const auto flood = [&] {
        std::vector<std::future<httplib::Result>> answers;
        for (int i = 0; i < kFlood; ++i)
            answers.push_back(std::async(std::launch::async, [&] {
                return server.client()->Post("/v1/completions", body, kJsonType);
            }));
        int ok = 0, busy = 0;
        for (auto& f : answers) {
            const httplib::Result r = f.get();
            if (!r) {
                ADD_FAILURE() << httplib::to_string(r.error());
                continue;
            }
            ok += r->status == 200;
            busy += r->status == 429;
        }
        EXPECT_EQ(ok + busy, kFlood) << "every request is answered, served or refused";
        EXPECT_GE(ok, 1);
        std::printf("flood of %d: %d served, %d refused (429)\n", kFlood, ok, busy);
    };
    flood();  // the first starts the HTTP threads a flood needs
    flood();
    const uint64_t rss_first = server.rss_bytes();
    flood();
    const uint64_t rss_second = server.rss_bytes();
    std::printf("server RSS %.1f MB after the second flood, %.1f MB after the third\n", rss_first / 1e6,
                rss_second / 1e6);
    EXPECT_GT(rss_first, 0u);
    EXPECT_LT(rss_second, rss_first + kRssSlackBytes) << "the server's memory grew between two floods";
    EXPECT_EQ(server.stop(), 0) << server.err();
}

// A failing disk (docs/reliability.md; COLI_FAIL_READS fails the first expert reads): the first read fails
// on every attempt, so the first request fails with an error naming the file and the offset; the server
// stays up and answers the next request as a server that never saw the fault does. --ram-gb makes the experts
// go through reads.
TEST(ServeApi, AFailedExpertReadFailsItsRequestAndTheNextIsServed) {
    constexpr const char* kReadAttempts = "3";  // io/file.cpp: one read's attempts before it fails
    // The read fails after the prompt was accepted, when the answer's status (200) is already committed:
    // the body is the error object.
    fault_fails_one_request("COLI_FAIL_READS", kReadAttempts, {"model.safetensors", "at offset"});
}

// The checkpoint file changed under a running server (docs/reliability.md): written to (its modification
// time moves) or replaced by another file of the same name. The next expert read (or bringing in of mapped
// experts) refuses with an error naming the file, not tokens from bytes the model was not loaded with.
TEST(ServeApi, ACheckpointChangedWhileServingIsAnErrorNamingTheFile) {
    const std::string body = greedy_completion_body(4);
    using Change = std::function<void(const std::filesystem::path&)>;
    const Change written_to = [](const std::filesystem::path& file) {
        std::filesystem::last_write_time(file,
                                         std::filesystem::last_write_time(file) + std::chrono::hours(1));
    };
    const Change replaced = [](const std::filesystem::path& file) {
        const std::filesystem::path next = file.string() + ".new";
        std::filesystem::copy_file(file, next);
        std::filesystem::rename(next, file);
    };
    // Experts read into a budget, and used in place from the file mappings.
    const std::vector<std::vector<std::string>> modes = {{"--ram-gb", "1"}, {}};
    for (const auto& [change, mode] : {std::pair(written_to, modes[0]), std::pair(replaced, modes[0]),
                                       std::pair(written_to, modes[1]), std::pair(replaced, modes[1])}) {
        TempDir model("changed-model");
        for (const auto& entry : std::filesystem::directory_iterator(kDemoModel))
            std::filesystem::copy_file(entry.path(), model / entry.path().filename().string());
        std::vector<std::string> flags = {"--model-name", kDemoId};
        flags.insert(flags.end(), mode.begin(), mode.end());
        ServeProcess server(flags, model.path());
        change(model / "model.safetensors");
        const auto r = server.client()->Post("/v1/completions", body, kJsonType);
        ASSERT_TRUE(r);
        const json error = json::parse(r->body, nullptr, false);
        ASSERT_TRUE(error.contains("error")) << r->body;
        EXPECT_EQ(error["error"]["code"], "engine_error") << r->body;
        const std::string message = error["error"]["message"];
        EXPECT_NE(message.find("model.safetensors: changed since it was opened"), std::string::npos)
            << message;
    }
}

// How often the stalling-read test polls /metrics, and a wait it must see of the 1.2 s stall (most of it
// passes while the read is in flight; the rest of the request takes milliseconds).
constexpr auto kMetricsPoll = std::chrono::milliseconds(50);
constexpr double kStalledReadSeen = 0.3;

// A stalling disk (COLI_SLOW_READS delays the first expert read by more than the store's slow-read
// threshold, 1 s): /metrics shows the read waiting while it waits, the request is answered with a clean
// run's text, and /metrics counts the slow read.

TEST(ServeApi, AStallingExpertReadIsCountedInMetrics) {
    const std::string body = greedy_completion_body(4);
    std::string clean_text;
    ASSERT_NO_FATAL_FAILURE(fault_free_text(body, clean_text, [](ServeProcess& clean) {
        const auto metrics = clean.client()->Get("/metrics");
        ASSERT_TRUE(metrics);
        EXPECT_EQ(metric_value(metrics->body, "coli_expert_slow_reads_total"), 0);
    }));
    const std::unique_ptr<ServeProcess> server = server_with_hook("COLI_SLOW_READS", "1:1200");
    // While the request waits for the stalled read, /metrics shows how long it has been waiting.
    auto answer = std::async(std::launch::async,
                             [&] { return server->client()->Post("/v1/completions", body, kJsonType); });
    double longest_wait = 0;
    while (answer.wait_for(kMetricsPoll) != std::future_status::ready) {
        const auto live = server->client()->Get("/metrics");
        if (live)
            longest_wait =
                std::max(longest_wait, metric_value(live->body, "coli_expert_read_in_flight_seconds"));
    }
    EXPECT_GT(longest_wait, kStalledReadSeen) << "the stalled read never showed in /metrics while it waited";
    const auto r = answer.get();
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], clean_text);
    const auto metrics = server->client()->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metric_value(metrics->body, "coli_expert_slow_reads_total"), 1);
    EXPECT_EQ(metric_value(metrics->body, "coli_expert_read_in_flight_seconds"), 0);
    EXPECT_NE(server->err().find("the disk is stalling"), std::string::npos) << server->err();
}

// Memory that runs out as the store reads experts (docs/reliability.md): one allocation failing
// (COLI_FAIL_ALLOCS=1) or a limit on the store's buffers as other processes' memory would set it
// (COLI_STORE_MEMORY_LIMIT). The store lowers its budget, the request gets the fault-free text, and
// /metrics shows the lowering and the budget now.
void short_of_memory_answers(const char* variable, const char* value) {
    constexpr double kLimit = 1'500'000;  // 6 of the demo model's 32 experts (248 KB read buffers)
    const std::string body = greedy_completion_body(8);
    std::string clean_text;
    ASSERT_NO_FATAL_FAILURE(fault_free_text(body, clean_text));
    const std::unique_ptr<ServeProcess> server = server_with_hook(variable, value);
    ASSERT_NO_FATAL_FAILURE(answer_expect(*server, body, clean_text));
    const auto metrics = server->client()->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metric_value(metrics->body, "coli_expert_ram_budget_lowered_total"), 1);
    const double budget = metric_value(metrics->body, "coli_expert_ram_budget_bytes");
    EXPECT_GT(budget, 0);
    EXPECT_LE(budget, kLimit);
}

TEST(ServeApi, AFailedExpertAllocationLowersTheBudgetAndTheRequestIsAnswered) {
    short_of_memory_answers("COLI_FAIL_ALLOCS", "1");
}

TEST(ServeApi, AStoreShortOfMemoryAnswersWithALowerBudgetShownInMetrics) {
    short_of_memory_answers("COLI_STORE_MEMORY_LIMIT", "1500000");
}

// Headers far beyond what the HTTP layer reads (8 KB): a 400 error object, and the server goes on.
TEST(ServeApi, OversizedHeadersAre400AndTheServerGoesOn) {
    ServeProcess server;
    constexpr size_t kHugeHeader = 100'000;
    const std::string body =
        json{{"model", kDemoId}, {"prompt", "In the beginning"}, {"max_tokens", 2}}.dump();
    const httplib::Headers huge = {{"X-Padding", std::string(kHugeHeader, 'a')}};
    openai_error_expect(server.client()->Post("/v1/completions", huge, body, kJsonType), 400);
    const auto next = server.client()->Post("/v1/completions", body, kJsonType);
    ASSERT_TRUE(next);
    EXPECT_EQ(next->status, 200) << next->body;
}

TEST(ServeApi, DisconnectingStreamCancelsItsGeneration) {
    ServeProcess server;
    constexpr int kTokens = 500;
    const std::string body = json{
        {"model", kDemoId},
        {"prompt", "In the beginning"},
        {"max_tokens", kTokens},
        {"ignore_eos", true},
        {"stream", true}}.dump();
    // Reads the first event, then closes the connection (the receiver returning false aborts it).
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body;
    req.set_header("Content-Type", kJsonType);
    std::string first;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        first.append(data, n);
        return false;
    };
    auto c = server.client();
    c->send(req);
    EXPECT_NE(first.find("data: "), std::string::npos) << first;
    c->stop();
    // The worker notices at its next tokens and stops well before kTokens.
    auto m = server.client();
    double cancelled = 0, generated = 0;
    for (int i = 0; i < 100 && cancelled == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto r = m->Get("/metrics");
        ASSERT_TRUE(r);
        cancelled = metric_value(r->body, "coli_generations_cancelled_total");
        generated = metric_value(r->body, "coli_generated_tokens_total");
    }
    EXPECT_EQ(cancelled, 1) << server.err();
    EXPECT_LT(generated, kTokens);
    EXPECT_NE(server.err().find("cancelled"), std::string::npos) << server.err();
    // The next request is served normally, from a clean state.
    const auto after = m->Post("/v1/chat/completions", chat_body("In the beginning", 4), kJsonType);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->status, 200) << after->body;
}

TEST(ServeApi, DisconnectingNonStreamingClientCancelsToo) {
    ServeProcess server;
    constexpr int kTokens = 500;
    const std::string body = json{
        {"model", kDemoId},
        {"prompt", "In the beginning"},
        {"max_tokens", kTokens},
        {"ignore_eos", true}}.dump();
    // A client that gives up long before the answer is ready, and closes the connection.
    auto impatient = server.client();
    impatient->set_read_timeout(0, 50'000);
    const auto r = impatient->Post("/v1/completions", body, kJsonType);
    EXPECT_FALSE(r) << "answered within 50 ms: " << r->body;
    impatient->stop();
    auto m = server.client();
    double cancelled = 0, generated = 0, running = 1;
    for (int i = 0; i < 100 && running != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto r = m->Get("/metrics");
        ASSERT_TRUE(r);
        cancelled = metric_value(r->body, "coli_generations_cancelled_total");
        generated = metric_value(r->body, "coli_generated_tokens_total");
        running = metric_value(r->body, "coli_requests_running");
    }
    EXPECT_EQ(cancelled, 1) << server.err();
    EXPECT_LT(generated, kTokens);
}

TEST(ServeApi, MetricsParseWithPrometheusOwnParser) {
    ServeProcess server;
    auto c = server.client();
    const auto gen = c->Post(
        "/v1/completions", json{{"model", kDemoId}, {"prompt", "In the beginning"}, {"max_tokens", 8}}.dump(),
        kJsonType);
    ASSERT_TRUE(gen);
    ASSERT_EQ(gen->status, 200);
    const json usage = json::parse(gen->body)["usage"];
    const auto r = c->Get("/metrics");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
    // prometheus_client (Debian's python3-prometheus-client) parses the text and prints "name value" for
    // every sample; any format error is an exception and a non-zero exit.
    TempDir dir("metrics");
    write_bytes(dir / "metrics.txt", r->body);
    const std::string script =
        "import sys\n"
        "from prometheus_client.parser import text_string_to_metric_families\n"
        "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
        "    for s in f.samples:\n"
        "        print(s.name, s.value, ','.join(k + '=' + v for k, v in sorted(s.labels.items())))\n";
    write_bytes(dir / "parse.py", script);
    const CommandResult p = command_run("/usr/bin/python3 " + (dir / "parse.py").string() + " " +
                                        (dir / "metrics.txt").string() + " 2>&1");
    if (p.output.find("No module named 'prometheus_client'") != std::string::npos)
        FAIL() << "python3-prometheus-client is missing (apt-get install python3-prometheus-client; "
                  "scripts/test.sh "
                  "does)";
    ASSERT_EQ(p.exit_code, 0) << p.output;
    const auto has = [&](const std::string& line) {
        EXPECT_NE(p.output.find(line), std::string::npos) << "missing '" << line << "' in:\n" << p.output;
    };
    has(fmt::format("coli_generated_tokens_total {}", usage["completion_tokens"].get<double>()));
    has(fmt::format("coli_prompt_tokens_total {}", usage["prompt_tokens"].get<double>()));
    has("coli_queue_depth 0.0");
    has("coli_requests_total 1.0 code=200,endpoint=completions");
    has("coli_ops_total ");
    has("backend=cpu,op=matmul,placement=native");
    has("backend=cpu,op=matmul,placement=host_step");
    has("coli_host_steps_total 0.0");
    has("coli_fallbacks_total 0.0");
    has("coli_expert_hit_rate ");
    has("coli_expert_bytes_read_total ");
    has("coli_tokens_per_second ");
}

TEST(ServeApi, APortInUseIsAOneLineError) {
    ServeProcess server;
    const ProcessResult r = coli_run("serve --hot-set none --model " + kDemoModel.string() + " --port " +
                                     std::to_string(server.port()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("coli: error: cannot listen on 127.0.0.1:" + std::to_string(server.port())),
              std::string::npos)
        << r.err;
}

TEST(ServeApi, StopsCleanlyOnSigterm) {
    ServeProcess server;
    auto c = server.client();
    const auto r = c->Post("/v1/chat/completions", chat_body("In the beginning", 4), kJsonType);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(server.stop(), 0);
    const std::string err = server.err();
    EXPECT_NE(err.find("stopping (signal received)"), std::string::npos) << err;
    EXPECT_NE(err.find("ops on cpu:"), std::string::npos) << "the final statistics: " << err;
}

TEST(ServeApi, SigtermEndsARunningStreamWithAnErrorEvent) {
    ServeProcess server;
    const std::string body = json{
        {"model", kDemoId},
        {"messages", {{{"role", "user"}, {"content", "In the beginning"}}}},
        {"max_tokens", 500},
        {"ignore_eos", true},
        {"stream", true}}.dump();
    std::atomic<bool> streaming{false};
    std::string received;
    std::thread client([&] {
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/chat/completions";
        req.body = body;
        req.set_header("Content-Type", kJsonType);
        req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
            received.append(data, n);
            streaming = true;
            return true;
        };
        server.client()->send(req);
    });
    while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(server.stop(), 0) << server.err();
    client.join();
    // The client learns why its answer ended, in the API's error shape, and the stream is closed properly.
    EXPECT_NE(received.find(R"("code":"shutting_down")"), std::string::npos) << received;
    const std::string done = "data: [DONE]\n\n";
    ASSERT_GE(received.size(), done.size()) << received;
    EXPECT_EQ(received.substr(received.size() - done.size()), done);
}

}  // namespace
}  // namespace coli::test
