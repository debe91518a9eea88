#include "server/text_api.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/api_error.h"
#include "text/token_piece.h"

namespace coli::server {

namespace {

std::string dump(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string tokenize_body(const text::Tokenizer& tokenizer, const TokenizeRequest& r) {
    const std::vector<int32_t> ids = tokenizer.encode(r.content, r.add_special);
    nlohmann::json tokens = nlohmann::json::array();
    for (int32_t id : ids) {
        if (r.with_pieces)
            tokens.push_back({{"id", id}, {"piece", text::token_piece_json(tokenizer.token_bytes(id))}});
        else
            tokens.push_back(id);
    }
    return dump({{"tokens", std::move(tokens)}});
}

std::string detokenize_body(const text::Tokenizer& tokenizer, std::span<const int32_t> ids) {
    std::string content;
    try {
        content = tokenizer.decode(ids);
    } catch (const Error& e) {  // an id without bytes inside the vocabulary's range
        invalid_request(e.what(), "tokens");
    }
    return dump({{"content", content}});
}

std::string apply_template_body(const text::ChatTemplate& tmpl,
                                const std::vector<text::ChatMessage>& messages) {
    std::string prompt;
    try {
        prompt = tmpl.render(messages, true);
    } catch (const Error& e) {
        invalid_request(e.what(), "messages");
    }
    return dump({{"prompt", prompt}});
}

}  // namespace coli::server
