// A generation request as the three generation endpoints send it, checked and normalized: JSON bodies of
// /v1/chat/completions, /v1/completions (OpenAI) and /v1/messages (Anthropic) all become one
// GenerationRequest. Anything malformed, of the wrong type or out of range is an ApiException (400) that
// names the field; the parsers never throw anything else (tests/fuzz drives them with libFuzzer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "text/chat_template.h"

namespace coli::server {

// Which API a request came through; it decides the shape of the answer.
enum class ApiKind {
    chat,        // OpenAI /v1/chat/completions
    completion,  // OpenAI /v1/completions
    messages,    // Anthropic /v1/messages
};

// What the parsers need to know about the server.
struct RequestLimits {
    int64_t max_ctx = 0;  // the model's context: no request may ask for more tokens than this
};

struct GenerationRequest {
    ApiKind api = ApiKind::chat;              // the endpoint it came through
    std::string model;                        // the model the client named
    std::vector<text::ChatMessage> messages;  // chat and messages: the conversation so far
    std::string prompt;                       // completion: the text to continue
    std::optional<int> max_tokens;            // most tokens to generate; unset: up to the context end
    SamplerOptions sampler;                   // temperature, top_k, top_p, seed
    bool seed_given = false;                  // false: the server picks a seed per request
    std::vector<std::string> stop;            // stop strings
    bool stream = false;                      // answer with server-sent events
    bool include_usage = false;               // OpenAI stream_options.include_usage
    bool ignore_eos = false;                  // extension: generate max_tokens even past end tokens
};

// Most stop strings one request may give (OpenAI's limit).
inline constexpr size_t kMaxStopStrings = 4;

// Each parses a JSON body; throws ApiException with a 400 on bad input.
GenerationRequest chat_request_parse(std::string_view body, const RequestLimits& limits);
GenerationRequest completion_request_parse(std::string_view body, const RequestLimits& limits);
GenerationRequest messages_request_parse(std::string_view body, const RequestLimits& limits);

// The text endpoints, in the shapes llama.cpp's server uses. Their parsers throw ApiException (400) too.

// POST /tokenize: {"content": string, "add_special": bool = false, "with_pieces": bool = false}.
struct TokenizeRequest {
    std::string content;       // the text to tokenize
    bool add_special = false;  // add what the tokenizer's post-processor adds (BOS and the like)
    bool with_pieces = false;  // answer {"id", "piece"} objects instead of bare ids
};
TokenizeRequest tokenize_request_parse(std::string_view body);

// POST /detokenize: {"tokens": [id, ...]}, every id below vocab_size.
std::vector<int32_t> detokenize_request_parse(std::string_view body, int32_t vocab_size);

// POST /apply-template: {"messages": [...]} as /v1/chat/completions takes them (other fields ignored, as
// llama.cpp ignores them).
std::vector<text::ChatMessage> apply_template_request_parse(std::string_view body);

}  // namespace coli::server
