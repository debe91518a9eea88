// The request parsers: accepted shapes, defaults, and a 400 that names the field for each kind of bad input.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/request.h"

namespace coli::server {
namespace {

const RequestLimits kLimits{512};

// The error a parse throws, or a failure when it throws none.
template <typename F>
ApiError error_of(F&& f) {
    try {
        f();
    } catch (const ApiException& e) {
        return e.error;
    }
    ADD_FAILURE() << "expected an ApiException";
    return {};
}

TEST(RequestParse, ChatWithDefaults) {
    const GenerationRequest r =
        chat_request_parse(R"({"model": "m", "messages": [{"role": "developer", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                               {"role": "assistant", "content": null}]})",
                           kLimits);
    EXPECT_EQ(r.api, ApiKind::chat);
    EXPECT_EQ(r.model, "m");
    ASSERT_EQ(r.messages.size(), 3u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[1].content, "ab");
    EXPECT_EQ(r.messages[2].content, "");
    EXPECT_FALSE(r.max_tokens.has_value());
    EXPECT_EQ(r.sampler.temperature, 1.0f);
    EXPECT_FALSE(r.seed_given);
    EXPECT_FALSE(r.stream);
}

TEST(RequestParse, ChatOptions) {
    const GenerationRequest r = chat_request_parse(
        R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 7,
            "temperature": 0.5, "top_p": 0.9, "seed": -3, "stop": "\n", "stream": true,
            "stream_options": {"include_usage": true}, "n": 1, "ignore_eos": true, "user": "ignored"})",
        kLimits);
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_FLOAT_EQ(r.sampler.temperature, 0.5f);
    EXPECT_FLOAT_EQ(r.sampler.top_p, 0.9f);
    EXPECT_TRUE(r.seed_given);
    EXPECT_EQ(r.sampler.seed, static_cast<uint64_t>(-3));
    EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
    EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos);
}

TEST(RequestParse, CompletionDefaultsTo16Tokens) {
    const GenerationRequest r = completion_request_parse(R"({"model": "m", "prompt": ["once"]})", kLimits);
    EXPECT_EQ(r.prompt, "once");
    EXPECT_EQ(r.max_tokens, 16);
}

TEST(RequestParse, Messages) {
    const GenerationRequest r = messages_request_parse(
        R"({"model": "m", "max_tokens": 5, "system": [{"type": "text", "text": "sys"}], "top_k": 3,
            "stop_sequences": ["x", "y"], "messages": [{"role": "user", "content": "hi"}]})",
        kLimits);
    EXPECT_EQ(r.api, ApiKind::messages);
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[0].content, "sys");
    EXPECT_EQ(r.sampler.top_k, 3);
    EXPECT_EQ(r.stop.size(), 2u);
}

TEST(RequestParse, BadInputNamesTheField) {
    const auto chat = [](const char* body) { return error_of([&] { chat_request_parse(body, kLimits); }); };
    EXPECT_EQ(chat("{").code, "invalid_json");
    EXPECT_EQ(chat("").code, "invalid_json");
    EXPECT_EQ(chat("[]").kind, ErrorKind::invalid_request);
    // A number beyond a double is nlohmann's out_of_range, not a parse_error: still a 400 (found by fuzzing).
    EXPECT_EQ(chat(R"({"model": "m", "max_tokens": 1e400})").code, "invalid_json");
    EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}]})").param, "model");
    EXPECT_EQ(chat(R"({"model": "m"})").param, "messages");
    EXPECT_EQ(chat(R"({"model": "m", "messages": []})").param, "messages");
    EXPECT_EQ(chat(R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})").param,
              "messages[0].role");
    EXPECT_EQ(
        chat(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})").param,
        "messages[0].content[0]");
    const std::string ok = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
    EXPECT_EQ(chat((ok + R"("max_tokens": 513})").c_str()).param, "max_tokens");
    EXPECT_EQ(chat((ok + R"("max_tokens": 513})").c_str()).code, "context_length_exceeded");
    EXPECT_EQ(chat((ok + R"("max_tokens": 0})").c_str()).param, "max_tokens");
    EXPECT_EQ(chat((ok + R"("max_tokens": 1e3})").c_str()).param, "max_tokens");
    EXPECT_EQ(chat((ok + R"("max_tokens": 18446744073709551615})").c_str()).param, "max_tokens");
    EXPECT_EQ(chat((ok + R"("temperature": 2.5})").c_str()).param, "temperature");
    EXPECT_EQ(chat((ok + R"("temperature": "1"})").c_str()).param, "temperature");
    EXPECT_EQ(chat((ok + R"("top_p": 0})").c_str()).param, "top_p");
    EXPECT_EQ(chat((ok + R"("seed": 1.5})").c_str()).param, "seed");
    EXPECT_EQ(chat((ok + R"("stop": ["a", "b", "c", "d", "e"]})").c_str()).param, "stop");
    EXPECT_EQ(chat((ok + R"("stop": [""]})").c_str()).param, "stop");
    EXPECT_EQ(chat((ok + R"("stream": "yes"})").c_str()).param, "stream");
    EXPECT_EQ(chat((ok + R"("n": 2})").c_str()).param, "n");
    // Options that would change the answer are refused, not ignored; their "off" values pass.
    EXPECT_EQ(chat((ok + R"("presence_penalty": 0.5})").c_str()).code, "unsupported_parameter");
    EXPECT_EQ(chat((ok + R"("logprobs": true})").c_str()).param, "logprobs");
    EXPECT_EQ(chat((ok + R"("tools": [{"type": "function"}]})").c_str()).param, "tools");
    EXPECT_EQ(chat((ok + R"("response_format": {"type": "json_object"}})").c_str()).param, "response_format");
    EXPECT_NO_THROW(chat_request_parse(ok + R"("presence_penalty": 0, "logprobs": false, "tools": [],
                                                "response_format": {"type": "text"}})",
                                       kLimits));
    EXPECT_EQ(error_of([] {
                  completion_request_parse(R"({"model": "m", "prompt": "a", "echo": true})", kLimits);
              }).param,
              "echo");
    EXPECT_EQ(error_of([] {
                  completion_request_parse(R"({"model": "m", "prompt": "a", "best_of": 3})", kLimits);
              }).param,
              "best_of");
    EXPECT_EQ(
        error_of([] { completion_request_parse(R"({"model": "m", "prompt": ["a", "b"]})", kLimits); }).param,
        "prompt");
    EXPECT_EQ(error_of([] { completion_request_parse(R"({"model": "m", "prompt": ""})", kLimits); }).param,
              "prompt");
    EXPECT_EQ(error_of([] {
                  messages_request_parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})",
                                         kLimits);
              }).param,
              "max_tokens");
    EXPECT_EQ(
        error_of([] {
            messages_request_parse(
                R"({"model": "m", "max_tokens": 3, "temperature": 1.5, "messages": [{"role": "user", "content": "x"}]})",
                kLimits);
        }).param,
        "temperature");
    EXPECT_EQ(error_of([] {
                  messages_request_parse(
                      R"({"model": "m", "max_tokens": 3, "messages": [{"role": "system", "content": "x"}]})",
                      kLimits);
              }).param,
              "messages.0.role");
}

TEST(RequestParse, ErrorBodiesHaveTheApiShapes) {
    const ApiError e{ErrorKind::queue_full, "busy", "", "queue_full"};
    EXPECT_EQ(e.status(), 429);
    EXPECT_EQ(e.openai_body(),
              R"({"error":{"code":"queue_full","message":"busy","param":null,"type":"rate_limit_error"}})");
    EXPECT_EQ(e.anthropic_body(), R"({"error":{"message":"busy","type":"rate_limit_error"},"type":"error"})");
}

}  // namespace
}  // namespace coli::server
