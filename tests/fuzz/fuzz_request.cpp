// libFuzzer target: arbitrary bytes as the JSON body of /v1/chat/completions, /v1/completions and
// /v1/messages (and of the text endpoints /tokenize, /detokenize, /apply-template), through the parsers
// `coli serve` uses. An ApiException with a 400 and a one-line message is the expected answer to bad input;
// any other exception, a crash, or an accepted request that breaks the promises of GenerationRequest is a
// bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request.h"

namespace {

using namespace coli::server;

// A small context, so that the max_tokens bounds are reached.
constexpr RequestLimits kLimits{64};

void expect(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "fuzz_request: %s\n", what);
    std::abort();
}

void accepted_check(const GenerationRequest& r) {
    if (r.api != ApiKind::completion) expect(!r.messages.empty(), "a chat has messages");
    if (r.api == ApiKind::completion) expect(!r.prompt.empty(), "a completion has a prompt");
    if (r.max_tokens)
        expect(*r.max_tokens >= 1 && *r.max_tokens <= kLimits.max_ctx, "max_tokens in [1, ctx]");
    expect(r.sampler.temperature >= 0 && r.sampler.temperature <= 2, "temperature in [0, 2]");
    expect(r.sampler.top_p > 0 && r.sampler.top_p <= 1, "top_p in (0, 1]");
    expect(r.sampler.top_k >= 0, "top_k >= 0");
    expect(r.stop.size() <= kMaxStopStrings, "at most 4 stop strings");
    for (const auto& s : r.stop) expect(!s.empty(), "no empty stop string");
    for (const auto& m : r.messages)
        expect(m.role == "system" || m.role == "user" || m.role == "assistant", "a known role");
}

void rejected_check(const ApiError& e) {
    expect(e.status() == 400, "bad input is a 400");
    expect(!e.message.empty() && e.message.find('\n') == std::string::npos, "a one-line message");
    // The answers must be JSON whatever bytes the message quotes.
    expect(nlohmann::json::accept(e.openai_body()), "the OpenAI error body is JSON");
    expect(nlohmann::json::accept(e.anthropic_body()), "the Anthropic error body is JSON");
}

template <typename Parse>
void drive(Parse parse, std::string_view body) {
    try {
        accepted_check(parse(body, kLimits));
    } catch (const ApiException& e) {
        rejected_check(e.error);
    }
}

// The text endpoints' parsers: a rejection is checked as above; what they accept keeps their promises.
constexpr int32_t kVocab = 100;

void text_drive(std::string_view body) {
    try {
        tokenize_request_parse(body);
    } catch (const ApiException& e) {
        rejected_check(e.error);
    }
    try {
        for (int32_t id : detokenize_request_parse(body, kVocab))
            expect(id >= 0 && id < kVocab, "ids in the vocabulary");
    } catch (const ApiException& e) {
        rejected_check(e.error);
    }
    try {
        for (const auto& m : apply_template_request_parse(body))
            expect(m.role == "system" || m.role == "user" || m.role == "assistant", "a known role");
    } catch (const ApiException& e) {
        rejected_check(e.error);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    drive(chat_request_parse, body);
    drive(completion_request_parse, body);
    drive(messages_request_parse, body);
    text_drive(body);
    return 0;
}
