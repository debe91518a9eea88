#include "server/api_format.h"

#include <fmt/format.h>

#include <random>

namespace coli::server {

std::unique_ptr<ApiFormat> api_format_new(const GenerationRequest& r, const std::string& model_id) {
    return r.api == ApiKind::messages ? anthropic_format_new(r, model_id) : openai_format_new(r, model_id);
}

std::string response_id(const char* prefix) {
    thread_local std::mt19937_64 rng(std::random_device{}());
    return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

}  // namespace coli::server
