// Load on loopback: 8 concurrent clients x 20 requests each over every endpoint, streaming and not, batched
// by the worker (continuous batching: requests join and leave the batch mid-generation). Every answer must
// be complete, well-formed and equal to the greedy answer the same request got alone (a request that saw
// another's cache or state would differ); the server's memory must stay steady.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "byte_tokenizer.h"
#include "common/process.h"
#include "serve_process.h"

namespace coli::test {
namespace {

using nlohmann::json;

constexpr int kClients = 8;
constexpr int kRequestsPerClient = 20;
constexpr int kMaxTokens = 8;
// A bound on one round of load that only a hang or a pathological slowdown reaches (measured: ~2 s).
constexpr double kRoundBoundSeconds = 120;
// Growth of the resident set allowed between two identical rounds (allocator noise, not a leak).
constexpr uint64_t kRssSlackBytes = 8 << 20;

enum class Api { chat, completion, messages };

struct Call {
    Api api;               // which endpoint
    bool stream;           // server-sent events or one body
    int prompt;            // index into kPrompts
    std::string followup;  // chat: the assistant's first answer, then a second user turn (cache reuse)
};

constexpr const char* kSecondTurn = "And what happened next?";

const std::vector<std::string> kPrompts = {"In the beginning God created", "And the LORD spake unto Moses",
                                           "Blessed are the meek", "The LORD is my shepherd"};

std::string path_of(Api api) {
    return api == Api::chat         ? "/v1/chat/completions"
           : api == Api::completion ? "/v1/completions"
                                    : "/v1/messages";
}

std::string body_of(const Call& c) {
    json j = {{"model", kDemoId}, {"max_tokens", kMaxTokens}, {"temperature", 0}, {"stream", c.stream}};
    if (c.api == Api::completion)
        j["prompt"] = kPrompts[c.prompt];
    else
        j["messages"] = {{{"role", "user"}, {"content", kPrompts[c.prompt]}}};
    if (!c.followup.empty()) {
        j["messages"].push_back({{"role", "assistant"}, {"content", c.followup}});
        j["messages"].push_back({{"role", "user"}, {"content", kSecondTurn}});
    }
    return j.dump();
}

// The text of an answer after checking its whole shape; records a test failure and returns "" if it is
// not well-formed or not complete.
std::string answer_text(const Call& c, const std::string& body) {
    std::string text;
    if (!c.stream) {
        const json j = json::parse(body, nullptr, false);
        if (j.is_discarded()) return ADD_FAILURE() << "not JSON: " << body, "";
        if (c.api == Api::messages) {
            EXPECT_EQ(j.value("type", ""), "message") << body;
            EXPECT_TRUE(j["usage"]["output_tokens"].get<int>() <= kMaxTokens) << body;
            return j["content"][0]["text"].get<std::string>();
        }
        EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
                  j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>())
            << body;
        const json& choice = j["choices"][0];
        EXPECT_TRUE(choice["finish_reason"] == "stop" || choice["finish_reason"] == "length") << body;
        return c.api == Api::chat ? choice["message"]["content"].get<std::string>()
                                  : choice["text"].get<std::string>();
    }
    // Server-sent events: "event: NAME\n" (Anthropic) and "data: JSON\n", separated by blank lines.
    bool done = false;
    size_t at = 0;
    while (at < body.size()) {
        size_t end = body.find("\n\n", at);
        if (end == std::string::npos) return ADD_FAILURE() << "an unterminated event in: " << body, "";
        const std::string event = body.substr(at, end - at);
        at = end + 2;
        const size_t data_at = event.find("data: ");
        if (data_at == std::string::npos) return ADD_FAILURE() << "an event without data: " << event, "";
        const std::string data = event.substr(data_at + 6);
        if (done) return ADD_FAILURE() << "events after the end: " << body, "";
        if (data == "[DONE]") {
            done = c.api != Api::messages;
            continue;
        }
        const json j = json::parse(data, nullptr, false);
        if (j.is_discarded()) return ADD_FAILURE() << "an event that is not JSON: " << data, "";
        if (j.contains("error")) return ADD_FAILURE() << "an error event: " << data, "";
        if (c.api == Api::messages) {
            const std::string type = j.value("type", "");
            if (type == "content_block_delta") text += j["delta"]["text"].get<std::string>();
            if (type == "message_stop") done = true;
        } else if (!j["choices"].empty()) {
            const json& choice = j["choices"][0];
            if (c.api == Api::chat && choice["delta"].contains("content"))
                text += choice["delta"]["content"].get<std::string>();
            if (c.api == Api::completion) text += choice["text"].get<std::string>();
        }
    }
    EXPECT_TRUE(done) << "the stream did not end properly: " << body;
    return text;
}

void load_check(const std::vector<std::string>& flags) {
    ServeProcess server(flags);
    // Every combination, and its greedy text when it is the only request.
    std::vector<Call> calls;
    for (Api api : {Api::chat, Api::completion, Api::messages})
        for (bool stream : {false, true})
            for (int p = 0; p < static_cast<int>(kPrompts.size()); ++p) calls.push_back({api, stream, p, ""});
    std::vector<std::string> expected;
    auto alone = server.client();
    for (size_t i = 0; i < calls.size(); ++i) {
        const Call& c = calls[i];
        const auto r = alone->Post(path_of(c.api), body_of(c), "application/json");
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        ASSERT_EQ(r->status, 200) << r->body;
        expected.push_back(answer_text(c, r->body));
        ASSERT_FALSE(expected.back().empty()) << r->body;
        // A second turn of each first chat: served after it, it continues the cached conversation.
        if (c.api == Api::chat && !c.stream && c.followup.empty())
            calls.insert(calls.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                         {Api::chat, false, c.prompt, expected.back()});
    }
    const uint64_t rss_before = server.rss_bytes();

    const auto round = [&] {
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::future<int>> clients;
        for (int k = 0; k < kClients; ++k)
            clients.push_back(std::async(std::launch::async, [&, k] {
                auto client = server.client();
                int good = 0;
                for (int i = 0; i < kRequestsPerClient; ++i) {
                    const size_t which = static_cast<size_t>(k * kRequestsPerClient + i) % calls.size();
                    const Call& c = calls[which];
                    const auto r = client->Post(path_of(c.api), body_of(c), "application/json");
                    if (!r) {
                        ADD_FAILURE() << "no answer: " << httplib::to_string(r.error());
                        continue;
                    }
                    EXPECT_EQ(r->status, 200) << r->body;
                    const std::string text = answer_text(c, r->body);
                    EXPECT_EQ(text, expected[which])
                        << path_of(c.api) << " stream=" << c.stream << " prompt " << c.prompt;
                    good += r->status == 200 && text == expected[which];
                }
                return good;
            }));
        int good = 0;
        for (auto& f : clients) good += f.get();
        EXPECT_EQ(good, kClients * kRequestsPerClient);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };

    const double first = round();
    const uint64_t rss_first = server.rss_bytes();
    const double second = round();
    const uint64_t rss_second = server.rss_bytes();
    std::printf(
        "load: %d clients x %d requests: %.2f s then %.2f s; server RSS %.1f MB before, %.1f MB then %.1f "
        "MB\n",
        kClients, kRequestsPerClient, first, second, rss_before / 1e6, rss_first / 1e6, rss_second / 1e6);
    EXPECT_LT(first, kRoundBoundSeconds);
    EXPECT_LT(second, kRoundBoundSeconds);
    EXPECT_GT(rss_first, 0u);
    EXPECT_LT(rss_second, rss_first + kRssSlackBytes) << "the server's memory grew between identical rounds";

    const auto metrics = server.client()->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("coli_queue_depth 0"), std::string::npos);
    // The second turns reused the first turns' cache at least when they were served right after them.
    const size_t cached_at = metrics->body.find("\ncoli_prompt_tokens_cached_total ");
    ASSERT_NE(cached_at, std::string::npos);
    EXPECT_GT(std::stod(metrics->body.substr(cached_at + 33)), 0) << "no prompt ever reused the KV cache";
    // Requests ran together: some pass held more than one.
    EXPECT_GT(metric_value(metrics->body, "coli_batch_sequences_total"),
              metric_value(metrics->body, "coli_batch_steps_total"))
        << "no forward pass ever held two requests";
    EXPECT_EQ(server.stop(), 0) << server.err();
}

// The server's defaults (--parallel from the memory plan: 4 for the demo model).
TEST(ServeLoad, EightClientsTimesTwentyRequests) {
    load_check({});
}

// Prompts fed 3 tokens per step: every prompt joins over several steps while others decode, and a
// request's chunks are the same whether it runs alone or beside others.
TEST(ServeLoad, ChunkedPromptsJoiningMidGeneration) {
    load_check({"--parallel", "4", "--prefill-chunk", "3"});
}

// A DeepSeek-V3 of random weights with its multi-token-prediction layer (`coli synth`, small), beside a
// byte-level tokenizer (byte_tokenizer.h) so that a server takes text.
std::filesystem::path drafting_model(const TempDir& dir) {
    const std::filesystem::path model = dir / "v3";
    const ProcessResult synth =
        coli_run("synth --arch deepseek_v3 --scale 16 --layers 4 --experts 16 -o " + model.string());
    EXPECT_EQ(synth.exit_code, 0) << synth.err;
    byte_tokenizer_write(model);
    return model;
}

// Speculative decoding in the batched server: a model whose MTP layer drafts each request's next token, 4
// clients at once with prompts joining in chunks; every answer must be the one a server without drafts
// gives the request alone, and /metrics counts the drafts.
TEST(ServeLoad, SpeculativeDraftsChangeNoAnswer) {
    TempDir dir("serve-drafts");
    const std::filesystem::path model = drafting_model(dir);
    std::vector<Call> calls;
    for (bool stream : {false, true})
        for (int p = 0; p < static_cast<int>(kPrompts.size()); ++p)
            calls.push_back({Api::completion, stream, p, ""});
    std::vector<std::string> expected;
    {
        ServeProcess plain({"--parallel", "1", "--model-name", kDemoId}, model);
        auto client = plain.client();
        for (const Call& c : calls) {
            const auto r = client->Post(path_of(c.api), body_of(c), "application/json");
            ASSERT_TRUE(r) << httplib::to_string(r.error());
            ASSERT_EQ(r->status, 200) << r->body;
            expected.push_back(answer_text(c, r->body));
        }
        EXPECT_EQ(plain.stop(), 0) << plain.err();
    }
    ServeProcess drafting({"--speculate", "--parallel", "4", "--prefill-chunk", "3", "--model-name", kDemoId},
                          model);
    constexpr int kDraftClients = 4, kDraftRequests = 8;
    std::vector<std::future<void>> clients;
    for (int k = 0; k < kDraftClients; ++k)
        clients.push_back(std::async(std::launch::async, [&, k] {
            auto client = drafting.client();
            for (int i = 0; i < kDraftRequests; ++i) {
                const size_t which = static_cast<size_t>(k + i) % calls.size();
                const auto r =
                    client->Post(path_of(calls[which].api), body_of(calls[which]), "application/json");
                if (!r) {
                    ADD_FAILURE() << "no answer: " << httplib::to_string(r.error());
                    continue;
                }
                EXPECT_EQ(r->status, 200) << r->body;
                EXPECT_EQ(answer_text(calls[which], r->body), expected[which]) << "request " << which;
            }
        }));
    for (auto& c : clients) c.get();
    const auto metrics = drafting.client()->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_GT(metric_value(metrics->body, "coli_speculative_drafts_total"), 0);
    EXPECT_GT(metric_value(metrics->body, "coli_batch_sequences_total"),
              metric_value(metrics->body, "coli_batch_steps_total"));
    EXPECT_EQ(drafting.stop(), 0) << drafting.err();
}

}  // namespace
}  // namespace coli::test
