// An error answered to an API client: an HTTP status and a one-line message, written in the error shape
// of the API that was called (OpenAI's or Anthropic's).
#pragma once

#include <string>

namespace coli::server {

// The error kinds this server answers with; each has one HTTP status and one name per API.
enum class ErrorKind {
    invalid_request,  // 400: malformed JSON, wrong types, values out of range
    unauthorized,     // 401: missing or wrong API key
    not_found,        // 404: unknown model or path
    wrong_method,     // 405: a known path asked with another method (GET /v1/messages)
    too_large,        // 413: a body over the limit
    queue_full,       // 429: the request queue is at its limit
    internal,         // 500: a failure of the engine while serving
    unavailable,      // 503: the server is shutting down
};

struct ApiError {
    ErrorKind kind = ErrorKind::invalid_request;  // the HTTP status and the error type
    std::string message;                          // one line, says what to change
    std::string param;                            // the request field at fault, or ""
    std::string code;                             // a machine-readable code (OpenAI's `code`), or ""

    int status() const;
    // {"error":{"message","type","param","code"}}, param and code null when empty.
    std::string openai_body() const;
    // {"type":"error","error":{"type","message"}}.
    std::string anthropic_body() const;
};

// Thrown by the request parsers; caught where the HTTP answer is written.
struct ApiException {
    ApiError error;  // what to answer
};

// What a request still waiting, or cut short, gets when the server stops.
inline const ApiError kShuttingDown{ErrorKind::unavailable, "the server is shutting down", "",
                                    "shutting_down"};

// Throws ApiException{invalid_request, message, param, code}.
[[noreturn]] void invalid_request(std::string message, std::string param = {}, std::string code = {});

}  // namespace coli::server
