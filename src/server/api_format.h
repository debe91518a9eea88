// How one API writes its answers to a generation request: a whole JSON body, or a stream of
// server-sent events (begin, text pieces, end), and its errors. One implementation per API shape.
#pragma once

#include <memory>
#include <string>

#include "runtime/conversation.h"
#include "server/api_error.h"
#include "server/request.h"

namespace coli::server {

class ApiFormat {
public:
    virtual ~ApiFormat() = default;

    virtual std::string body(const GenerateResult& r) const = 0;          // the non-streaming answer
    virtual std::string stream_begin(int64_t prompt_tokens) const = 0;    // events before the first text
    virtual std::string stream_text(const std::string& piece) const = 0;  // one text piece
    virtual std::string stream_end(const GenerateResult& r) const = 0;    // finish reason, usage, end marker
    virtual std::string stream_error(const ApiError& e) const = 0;        // a failure after the stream began
    virtual std::string error_body(const ApiError& e) const = 0;          // a failure, as a whole body
};

// `model_id` is echoed in every answer. Each is defined beside its API (openai_api.cpp,
// anthropic_api.cpp); api_format_new (api_format.cpp) picks by r.api.
std::unique_ptr<ApiFormat> openai_format_new(const GenerationRequest& r, const std::string& model_id);
std::unique_ptr<ApiFormat> anthropic_format_new(const GenerationRequest& r, const std::string& model_id);
std::unique_ptr<ApiFormat> api_format_new(const GenerationRequest& r, const std::string& model_id);

// A random id with the API's prefix ("chatcmpl-", "msg_"): 24 hex digits.
std::string response_id(const char* prefix);

// The body of GET /v1/models: the one model this server serves.
std::string models_body(const std::string& model_id, int64_t created);

}  // namespace coli::server
