#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace coli::server {

namespace {

struct KindInfo {
    int status;               // HTTP status
    const char* openai_type;  // OpenAI's error.type
    const char* anthropic;    // Anthropic's error.type
};

KindInfo kind_info(ErrorKind k) {
    switch (k) {
        case ErrorKind::invalid_request:
            return {400, "invalid_request_error", "invalid_request_error"};
        case ErrorKind::unauthorized:
            return {401, "invalid_request_error", "authentication_error"};
        case ErrorKind::not_found:
            return {404, "invalid_request_error", "not_found_error"};
        case ErrorKind::wrong_method:
            return {405, "invalid_request_error", "invalid_request_error"};
        case ErrorKind::too_large:
            return {413, "invalid_request_error", "request_too_large"};
        case ErrorKind::queue_full:
            return {429, "rate_limit_error", "rate_limit_error"};
        case ErrorKind::internal:
            return {500, "server_error", "api_error"};
        case ErrorKind::unavailable:
            return {503, "server_error", "overloaded_error"};
    }
    return {500, "server_error", "api_error"};
}

nlohmann::json null_if_empty(const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

}  // namespace

int ApiError::status() const {
    return kind_info(kind).status;
}

std::string ApiError::openai_body() const {
    const nlohmann::json body = {{"error",
                                  {{"message", message},
                                   {"type", kind_info(kind).openai_type},
                                   {"param", null_if_empty(param)},
                                   {"code", null_if_empty(code)}}}};
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ApiError::anthropic_body() const {
    const nlohmann::json body = {{"type", "error"},
                                 {"error", {{"type", kind_info(kind).anthropic}, {"message", message}}}};
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void invalid_request(std::string message, std::string param, std::string code) {
    throw ApiException{{ErrorKind::invalid_request, std::move(message), std::move(param), std::move(code)}};
}

}  // namespace coli::server
